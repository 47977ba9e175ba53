/* A JIT as perf sees one: machine code copied into an executable anonymous mapping, named
   in /tmp/perf-PID.map (lines "START SIZE name", hex: what Python's -X perf, Node's
   --perf-basic-prof and perf-map-agent write), and called in a loop.  x86-64 only.

   argv[1]: seconds to run; argv[2]: a tag that makes the names unique.  Three copies of one
   function: the first two named in the map (the second's name has spaces, as Python's
   "py::f:file.py" and the JVM's names may), the third left out of it.  The copies keep a
   frame pointer, so that a frame-pointer walk goes on through them to their caller.  The
   map is written before the code runs and left for the caller to remove. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const unsigned char code[] = {
    0x55,                   /* push %rbp */
    0x48, 0x89, 0xe5,       /* mov %rsp,%rbp */
    0x48, 0x89, 0xf8,       /* mov %rdi,%rax */
    0x48, 0x6b, 0xc0, 0x03, /* 1: imul $3,%rax,%rax */
    0x48, 0x83, 0xc0, 0x01, /* add $1,%rax */
    0x48, 0x83, 0xef, 0x01, /* sub $1,%rdi */
    0x75, 0xf2,             /* jne 1b */
    0x5d,                   /* pop %rbp */
    0xc3,                   /* ret */
};
#define SLOT 64

typedef long (*jitted)(long);

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

__attribute__((noinline)) long call_jitted(jitted f, long n) { return f(n) + 1; }

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    const char *tag = argc > 2 ? argv[2] : "test";
    unsigned char *region = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) { perror("mmap"); return 1; }
    for (int i = 0; i < 3; i++) memcpy(region + i * SLOT, code, sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE *map = fopen(path, "w");
    if (map == NULL) { perror(path); return 1; }
    fprintf(map, "%lx %zx jit_hot_%s\n", (unsigned long)region, sizeof code, tag);
    fprintf(map, "%lx %zx Interpreted %s::loop (spaces)\n", (unsigned long)(region + SLOT),
            sizeof code, tag);
    fclose(map);
    long total = 0;
    double end = now() + seconds;
    for (int round = 0; now() < end; round++)
        total += call_jitted((jitted)(region + (round % 3) * SLOT), 200000);
    printf("%ld\n", total & 0xff);
    return 0;
}
