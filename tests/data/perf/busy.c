#include <stdio.h>
static volatile long sink;
__attribute__((noinline)) void leaf(long n){ for(long i=0;i<n;i++) sink+=i; }
__attribute__((noinline)) void mid(long n){ leaf(n); sink++; }
int main(void){ for(int k=0;k<200;k++) mid(100000); printf("%ld\n", sink); return 0; }
