/* A program whose hot code is inlined, for perf script's inline frames (tests/
 * test_perf_inline.py), built with -O2 -g: a chain of static inline helpers (chain3 -> step ->
 * scramble -> rotl, mix), some from a header (inlined.h), inside a function GCC clones for its
 * constant argument (hot.constprop.0, whose DWARF name is hot), inside main; and the same
 * helpers inlined in a shared library (inlinedlib.c).  argv[1] is how many seconds it runs. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "inlined.h"

unsigned lib_digest(const unsigned char *data, int n, int rounds);

static inline unsigned step(unsigned h, unsigned char c)
{
	return scramble(mix(h, c));
}

static inline unsigned chain3(unsigned h, const unsigned char *p, int n)
{
	for (int i = 0; i < n; i++)
		h = step(h, p[i]);
	return h;
}

__attribute__((noinline)) static unsigned long hot(const unsigned char *p, int n, int rounds)
{
	unsigned long total = 0;
	for (int r = 0; r < rounds; r++)
		total += chain3((unsigned)r, p, n);
	return total;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1.0;
	unsigned char buf[4096];
	for (int i = 0; i < (int)sizeof buf; i++)
		buf[i] = (unsigned char)rand();
	unsigned long total = 0;
	double end = now() + seconds;
	while (now() < end) {
		total += hot(buf, sizeof buf, 20);
		total += lib_digest(buf, sizeof buf, 10);
	}
	printf("%lu\n", total & 0xff);
	return 0;
}
