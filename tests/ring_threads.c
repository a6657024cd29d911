/*
 * ring_threads.c - 4 threads on 2 devices (a stranger's program, for ringleak_test.sh), recorded with a
 * short history (--max-entries 50): thread 0 keeps 1 MiB a step for the first 20 of its 40 steps,
 * then none; each thread makes and frees two buffers a step.  The threads race, so each one's
 * blocks count over its own steps, and the kept blocks fell out of the history: growth cannot be
 * judged, and leaks said "too few steps (6 of the 4 needed)" of 6 steps.  Prints "done".
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#define STEPS 40
static CUcontext ctx[2];
#define CK(x) do{CUresult r_=(x); if(r_){fprintf(stderr,"%s:%d %s -> %d\n",__FILE__,__LINE__,#x,r_); exit(1);}}while(0)
static void *leaky_site(size_t n){ CUdeviceptr p; CK(cuMemAlloc(&p,n)); return (void*)p; }
static void *worker(void *arg){
  int id=(int)(long)arg; int dev=id/2;
  CK(cuCtxSetCurrent(ctx[dev]));
  for(int s=0;s<STEPS;s++){
    CUdeviceptr a,b;
    CK(cuMemAlloc(&a, (size_t)(4+id)<<20));
    CK(cuMemAlloc(&b, (size_t)(2)<<20));
    if(id==0 && s<STEPS/2) leaky_site(1<<20);
    usleep(20000);
    CK(cuMemFree(b)); CK(cuMemFree(a));
  }
  return NULL;
}
int main(void){
  CK(cuInit(0));
  for(int d=0;d<2;d++){ CUdevice dv; CK(cuDeviceGet(&dv,d)); CK(cuDevicePrimaryCtxRetain(&ctx[d],dv)); }
  pthread_t t[4];
  for(long i=0;i<4;i++) pthread_create(&t[i],NULL,worker,(void*)i);
  for(int i=0;i<4;i++) pthread_join(t[i],NULL);
  printf("done\n");
  return 0;
}
