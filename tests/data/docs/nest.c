#include <stdio.h>
#include <unistd.h>

int middle(int n);

__attribute__((noinline)) int leaf(int n) { pause(); return n; }
__attribute__((noinline)) int outer(int n) { return middle(n * 2) * 3; }

int main(void)
{
    printf("%d\n", getpid());
    fflush(stdout);
    return outer(1);
}
