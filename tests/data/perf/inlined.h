/* Helpers of tests/data/perf/inlined.c and inlinedlib.c, inlined from a header: the lines of
 * their inline frames are in this file. */
static inline unsigned mix(unsigned h, unsigned c)
{
	h ^= c;
	h *= 16777619u;
	return h;
}

static inline unsigned rotl(unsigned x, int r)
{
	return (x << r) | (x >> (32 - r));
}

static inline unsigned scramble(unsigned h)
{
	h = rotl(h, 13);
	h = mix(h, h >> 7);
	return h;
}
