/* Test program for pysframe stack on other architectures: recursion without frame pointers, a
 * frame with alloca, a 5 KB frame, then abort() (a core file under qemu-user, or a stop at
 * SIGABRT for a debugger attached to qemu's gdbstub).
 *
 * usage: cross_prog [DEPTH]   (a negative DEPTH: exit with status 3 instead)
 */
#include <alloca.h>
#include <stdlib.h>
#include <string.h>

static volatile int sink;

__attribute__((noinline)) void crash(int n)
{
    sink = n;
    abort();
}

__attribute__((noinline)) void big_frame(int n)
{
    volatile char buffer[5120];
    memset((char *)buffer, n, sizeof buffer);
    crash(buffer[n & 1023]);
    sink = buffer[7];
}

__attribute__((noinline)) void with_alloca(int n)
{
    volatile char *area = alloca(64 + (n & 255) * 16);
    area[0] = (char)n;
    big_frame(area[0]);
    sink = area[0];
}

__attribute__((noinline)) int recurse(int n)
{
    volatile int pad = n;
    if (n <= 0) {
        with_alloca(pad + 3);
        return pad;
    }
    int result = recurse(n - 1);
    return result + pad;
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 6;
    if (depth < 0)
        return 3;
    return recurse(depth);
}
