/* A program outside the nodus tree: three ranks as threads, one AllReduce. */
#include <nodus/nodus.h>
#include <pthread.h>
#include <stdio.h>

#define N 3
static nodusComm_t comms[N];
static float results[N];

static void* rank_main(void* arg) {
  int r = (int)(size_t)arg;
  float x = (float)(r + 1);
  if (nodusAllReduce(&x, &results[r], 1, nodusFloat32, nodusSum, comms[r]) != nodusSuccess) results[r] = -1;
  return NULL;
}

int main(void) {
  pthread_t t[N];
  if (nodusCommInitAll(comms, N) != nodusSuccess) {
    printf("consumer: init failed: %s\n", nodusGetLastError(NULL));
    return 1;
  }
  for (int r = 0; r < N; ++r) pthread_create(&t[r], NULL, rank_main, (void*)(size_t)r);
  for (int r = 0; r < N; ++r) pthread_join(t[r], NULL);
  int ok = 1;
  for (int r = 0; r < N; ++r) {
    ok &= results[r] == 6.0f;
    nodusCommDestroy(comms[r]);
  }
  printf("consumer: allreduce over %d ranks %s\n", N, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
