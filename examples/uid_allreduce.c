/* One rank of a job that finds its peers with the unique-id bootstrap and no
 * launcher: rank 0 makes the id and writes it to a file every rank can read;
 * the others wait for the file. Then a few AllReduce calls, checked.
 *
 *   uid_allreduce RANK NRANKS IDFILE [COUNT]
 *
 * Used by scripts/netns-cluster.sh (ranks in network namespaces posing as
 * hosts); any launcher that starts RANK 0..NRANKS-1 with a shared IDFILE works.
 * Exit status 0 when every result was right. */
#include <nodus/nodus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double nowUs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int publishId(const char* path, const nodusUniqueId* id) {
  char tmp[4096];
  snprintf(tmp, sizeof(tmp), "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0) return -1;
  return rename(tmp, path); /* atomic: readers never see half an id */
}

static int readId(const char* path, nodusUniqueId* id, int timeoutMs) {
  for (int waited = 0; waited < timeoutMs; waited += 10) {
    FILE* f = fopen(path, "rb");
    if (f) {
      const size_t n = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (n == 1) return 0;
    }
    usleep(10000);
  }
  return -1;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s RANK NRANKS IDFILE [COUNT]\n", argv[0]);
    return 2;
  }
  const int rank = atoi(argv[1]), nranks = atoi(argv[2]);
  const size_t count = argc > 4 ? strtoull(argv[4], NULL, 0) : (size_t)1 << 20;
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  nodusUniqueId id;
  if (rank == 0) {
    if (nodusGetUniqueId(&id) != nodusSuccess || publishId(argv[3], &id) != 0) {
      fprintf(stderr, "rank 0: cannot make or publish the unique id: %s\n", nodusGetLastError(NULL));
      return 1;
    }
  } else if (readId(argv[3], &id, 30000) != 0) {
    fprintf(stderr, "rank %d: no unique id in %s\n", rank, argv[3]);
    return 1;
  }
  nodusComm_t comm = NULL;
  nodusResult_t r = nodusCommInitRank(&comm, nranks, id, rank);
  if (r != nodusSuccess) {
    fprintf(stderr, "rank %d on %s: nodusCommInitRank: %s\n", rank, host, nodusGetLastError(NULL));
    return 1;
  }
  float* in = malloc(count * sizeof(float));
  float* out = malloc(count * sizeof(float));
  int wrong = 0;
  double best = 1e300;
  for (int iter = 0; iter < 5 && !wrong; ++iter) {
    for (size_t i = 0; i < count; ++i) in[i] = (float)(rank + 1 + (i % 7));
    const double t0 = nowUs();
    r = nodusAllReduce(in, out, count, nodusFloat32, nodusSum, comm);
    const double t = nowUs() - t0;
    if (t < best) best = t;
    if (r != nodusSuccess) {
      fprintf(stderr, "rank %d on %s: AllReduce: %s\n", rank, host, nodusGetLastError(comm));
      wrong = 1;
      break;
    }
    for (size_t i = 0; i < count; ++i) {
      const float expect = (float)(nranks * (nranks + 1) / 2 + nranks * (int)(i % 7));
      if (out[i] != expect) {
        fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, out[i], expect);
        wrong = 1;
        break;
      }
    }
  }
  if (!wrong)
    printf("rank %d of %d on %s: AllReduce of %zu floats right, best %.0f us (%.3f GB/s busbw)\n", rank, nranks, host,
           count, best, count * 4.0 / best / 1e3 * 2.0 * (nranks - 1) / nranks);
  free(in);
  free(out);
  nodusCommDestroy(comm);
  return wrong;
}
