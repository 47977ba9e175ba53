/* The shared library of tests/data/perf/inlined.c: a hot loop whose helpers are inlined,
 * one from this file, the others from inlined.h. */
#include "inlined.h"

static inline unsigned lib_round(unsigned h, int i)
{
	return scramble(mix(h, (unsigned)i));
}

unsigned lib_digest(const unsigned char *data, int n, int rounds)
{
	unsigned h = 2166136261u;
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < n; i++)
			h = lib_round(h, data[i] + r);
	return h;
}
