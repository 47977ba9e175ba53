/* A program to profile: two threads and main hashing through a shared library, or
   recursing 40 frames deep with 512-byte frames down to qsort, whose callbacks come back
   from libc; argv[1] is how many seconds it runs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
long lib_sort(int *v, int n);
long lib_hash(const char *s, int rounds);
static double seconds;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) long deep(int n, long acc) {
    volatile char big[512]; big[n & 511] = (char)n;
    if (n == 0) { int v[256]; for (int i = 0; i < 256; i++) v[i] = rand(); return acc + lib_sort(v, 256) + big[0]; }
    return deep(n - 1, acc + big[n & 511]);
}
__attribute__((noinline)) long hashing(void) { char buf[200]; memset(buf, 'a', sizeof buf - 1); buf[199] = 0; return lib_hash(buf, 50); }
static void *worker(void *arg) {
    long total = 0; double end = now() + seconds;
    while (now() < end) total += (long)arg & 1 ? deep(40, 0) : hashing();
    return (void *)total;
}
int main(int argc, char **argv) {
    seconds = argc > 1 ? atof(argv[1]) : 1.0;
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    long total = (long)worker((void *)1);
    for (int i = 0; i < 2; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
    printf("%ld\n", total & 0xff);
    return 0;
}
