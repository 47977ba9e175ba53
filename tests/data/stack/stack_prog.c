/* Test program for pysframe stack: threads recursing through a shared library, a signal handler
 * running on the main thread and a thread blocked in libc; prints "READY <pid>" once every
 * thread is at its known stopping point, then waits forever.
 *
 * usage: stack_prog [DEPTH [THREADS]]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern int lib_call(int (*callback)(int), int n);

static volatile int stop_flag;
static atomic_int ready;
static int depth = 20;

/* Waits forever at a fixed PC: on x86-64 in a pause system call made right here (so the PC
 * seen by a debugger is the same whenever it looks), elsewhere in a spin loop. */
__attribute__((noinline)) int spin_here(int n)
{
    atomic_fetch_add(&ready, 1);
    while (!stop_flag) {
#if defined(__x86_64__)
        long ret;
        __asm__ volatile("syscall" : "=a"(ret) : "0"(34L) : "rcx", "r11", "memory");
#else
        __asm__ volatile("" ::: "memory");
#endif
    }
    return n;
}

__attribute__((noinline)) int recurse(int n)
{
    volatile int pad = n;
    if (n <= 0)
        return spin_here(pad);
    int result = recurse(n - 1);
    return result + pad;
}

__attribute__((noinline)) int via_lib(int n)
{
    return lib_call(recurse, n) + 1;
}

static void *worker(void *arg)
{
    long extra = (long)arg;
    return (void *)(long)via_lib(depth + (int)extra);
}

static void on_signal(int sig)
{
    recurse(sig & 3);
}

static atomic_int main_spinning;

__attribute__((noinline)) void main_spin(void)
{
    atomic_store(&main_spinning, 1);
    while (!stop_flag)
        __asm__ volatile("" ::: "memory");
}

static pthread_t main_thread;
static int workers;

/* Waits for the workers, interrupts the main thread with SIGUSR1, waits for the handler to
 * reach spin_here, says READY, then blocks in libc. */
static void *sleeper(void *arg)
{
    (void)arg;
    while (atomic_load(&ready) < workers)
        usleep(1000);
    if (workers > 0) {
        while (!atomic_load(&main_spinning))
            usleep(1000);
        pthread_kill(main_thread, SIGUSR1);
        while (atomic_load(&ready) < workers + 1)
            usleep(1000);
    }
    printf("READY %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv)
{
    depth = argc > 1 ? atoi(argv[1]) : 20;
    workers = argc > 2 ? atoi(argv[2]) : 3;
    if (workers > 64)
        workers = 64;
    struct sigaction action = {0};
    action.sa_handler = on_signal;
    sigaction(SIGUSR1, &action, NULL);
    main_thread = pthread_self();
    pthread_t ids[64];
    for (long i = 0; i < workers; i++)
        pthread_create(&ids[i], NULL, worker, (void *)i);
    pthread_t waiter;
    if (workers == 0) {
        /* benchmark mode: the main thread recurses DEPTH deep and spins there */
        atomic_fetch_sub(&ready, 1);
        pthread_create(&waiter, NULL, sleeper, NULL);
        return via_lib(depth);
    }
    pthread_create(&waiter, NULL, sleeper, NULL);
    main_spin();
    return 0;
}
