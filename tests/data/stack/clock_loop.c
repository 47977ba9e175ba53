/* Test program for pysframe stack: calls clock_gettime in a loop, so that a stop most often
 * lands in the vDSO (or in libc's wrapper around it).  Prints "READY <pid>", then loops
 * forever. */
#include <stdio.h>
#include <time.h>

__attribute__((noinline)) long clock_loop(void)
{
    struct timespec now;
    long sum = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        sum += now.tv_nsec;
    }
    return sum;
}

int main(void)
{
    printf("READY\n");
    fflush(stdout);
    return (int)clock_loop();
}
