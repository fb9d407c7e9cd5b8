/* cross-core probe: (1) cache-line ping-pong round trip between CPU a and b;
   (2) producer/consumer handoff of a B-byte buffer through shared memory, alternating direction */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static _Atomic long flag __attribute__((aligned(64)));
static char *buf; static size_t B = 512 << 10; static int N = 20000, R = 200;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static volatile double sink;
static void *other(void *arg){ pin(*(int*)arg);
  for (int i=0;i<N;i++){ while(atomic_load(&flag)!=2*i+1); atomic_store(&flag,2*i+2);}
  /* handoff: odd rounds: I write, even: I read */
  for (int r=0;r<R;r++){ long want=2*N+2*r+1; while(atomic_load(&flag)!=want);
     double s=0; for(size_t i=0;i<B;i+=64) s+=buf[i]; sink=s; memset(buf, r, B);
     atomic_store(&flag,want+1);}
  return 0;}
int main(int argc,char**argv){int a=argc>1?atoi(argv[1]):0,b=argc>2?atoi(argv[2]):1;
  buf=aligned_alloc(4096,B); memset(buf,1,B);
  pthread_t t; pin(a); pthread_create(&t,0,other,&b);
  double t0=now();
  for(int i=0;i<N;i++){ atomic_store(&flag,2*i+1); while(atomic_load(&flag)!=2*i+2);}
  double t1=now();
  for (int r=0;r<R;r++){ long want=2*N+2*r; double s=0; for(size_t i=0;i<B;i+=64) s+=buf[i]; sink=s; memset(buf, r, B); atomic_store(&flag,want+1); while(atomic_load(&flag)!=want+2);}
  double t2=now(); pthread_join(t,0);
  printf("rtt %.0f ns  handoff %.2f GB/s (2x%zuKiB read+write per round)\n",(t1-t0)/N*1e9, 2.0*2*B*R/(t2-t1)/1e9, B>>10);
}
