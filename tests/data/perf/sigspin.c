/* A program that spends its time in a SIGALRM handler, for the walks through a signal frame.
 *
 * main calls interrupted(), which spins until the handler has run; the alarm's handler,
 * on_alarm, prints READY and calls spin_in_handler(), which spins for argv[1] seconds (0:
 * until the process is killed).  So a sample or a backtrace taken in the handler reads,
 * innermost first: spin_in_handler, on_alarm, the signal trampoline (libc's __restore_rt),
 * interrupted, main, then libc's start-up.  Built with -O2 -fomit-frame-pointer. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t done;
static volatile unsigned long sink;
static double seconds;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void spin_in_handler(void) {
    double end = now() + seconds;
    while (seconds <= 0 || now() < end) {
        for (unsigned long i = 0; i < 20000000UL; i++)
            sink += i * 7;
    }
}

static void on_alarm(int sig) {
    (void)sig;
    static const char ready[] = "READY\n";
    write(1, ready, sizeof ready - 1);
    spin_in_handler();
    done = 1;
}

__attribute__((noinline)) static void interrupted(void) {
    while (!done)
        sink++;
}

int main(int argc, char **argv) {
    seconds = argc > 1 ? atof(argv[1]) : 0.5;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_alarm;
    sigaction(SIGALRM, &action, NULL);
    struct itimerval timer = {{0, 0}, {0, 10000}};
    setitimer(ITIMER_REAL, &timer, NULL);
    interrupted();
    printf("%lu\n", sink);
    return 0;
}
