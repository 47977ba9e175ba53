#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>
static volatile long sink;
__attribute__((noinline)) void leaf(long n){ for(long i=0;i<n;i++) sink+=i; }
void *run(void *a){ leaf(3000000); return 0; }
int main(void){ pthread_t t[3]; for(int i=0;i<3;i++) pthread_create(&t[i],0,run,0); leaf(3000000); for(int i=0;i<3;i++) pthread_join(t[i],0);
 pid_t p=fork(); if(!p){ leaf(2000000); _exit(0);} waitpid(p,0,0); printf("%ld\n", sink); return 0; }
