/* Threads that name themselves anything (prctl PR_SET_NAME: a ';', a newline, a tab, quotes,
 * markup, bytes that are not UTF-8) and spend their time three calls deep, in spin_top,
 * spin_mid and spin_leaf, which the tests rename in the symbol table (objcopy
 * --redefine-sym) to names just as bad.  Usage: names [SECONDS]. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

static volatile unsigned long sink;
static double seconds = 0.3;

__attribute__((noinline, noclone)) static void spin_leaf(unsigned long n) {
  for (unsigned long i = 0; i < n; i++) sink += i * i;
}

__attribute__((noinline, noclone)) static void spin_mid(unsigned long n) {
  spin_leaf(n);
  sink++;
}

__attribute__((noinline, noclone)) static void spin_top(unsigned long n) {
  spin_mid(n);
  sink++;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void *worker(void *name) {
  prctl(PR_SET_NAME, name);
  double end = now() + seconds;
  while (now() < end) spin_top(20000);
  return NULL;
}

int main(int argc, char **argv) {
  static const char *names[] = {
      "bad\xff\xfe", "semi;colon", "new\nline", "<!--<script>", "tab\tq\"'",
  };
  enum { THREADS = sizeof names / sizeof names[0] };
  pthread_t threads[THREADS];
  if (argc > 1) seconds = atof(argv[1]);
  for (int i = 0; i < THREADS; i++) pthread_create(&threads[i], NULL, worker, (void *)names[i]);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  return 0;
}
