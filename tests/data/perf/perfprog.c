/* The program the perf.data tests record: three threads and a forked child spin in a short
 * call chain (outer -> middle -> leaf), so that samples come from several threads, processes
 * and CPUs, with side-band FORK, EXIT, COMM and MMAP2 records around them.
 *
 * Usage: perfprog [MILLIONS]   loop iterations per thread, in millions (default 1.5)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;
static long work = 1500000;

__attribute__((noinline)) static void leaf(long n)
{
	for (long i = 0; i < n; i++)
		sink += i;
}

__attribute__((noinline)) static void middle(long n)
{
	leaf(n);
	sink++;
}

__attribute__((noinline)) static void outer(long n)
{
	middle(n);
	sink++;
}

static void *thread(void *arg)
{
	(void)arg;
	outer(work);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[3];

	if (argc > 1)
		work = (long)(atof(argv[1]) * 1e6);
	for (int i = 0; i < 3; i++)
		pthread_create(&threads[i], NULL, thread, NULL);
	outer(work);
	for (int i = 0; i < 3; i++)
		pthread_join(threads[i], NULL);
	pid_t child = fork();
	if (child == 0) {
		outer(work / 2);
		_exit(0);
	}
	waitpid(child, NULL, 0);
	printf("%ld\n", sink);
	return 0;
}
