/* The shared library of profiled.c: a qsort through libc with a callback, and a hash. */
#include <stdlib.h>
static int cmp(const void *a, const void *b) { int x = *(const int *)a, y = *(const int *)b; return (x > y) - (x < y); }
__attribute__((noinline)) long lib_sort(int *v, int n) { qsort(v, n, sizeof *v, cmp); long s = 0; for (int i = 0; i < n; i++) s += v[i] * (i & 7); return s; }
__attribute__((noinline)) long lib_hash(const char *s, int rounds) { unsigned long h = 5381; for (int r = 0; r < rounds; r++) for (const char *p = s; *p; p++) h = h * 33 + *p; return (long)h; }
