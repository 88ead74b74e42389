/*
 * mpi-coll-bench: times MPI collectives the way nccl-tests does, through the
 * plain MPI C API and nothing else. It knows nothing of nodus; run it as it is
 * to time the MPI library, or with LD_PRELOAD=libnodus_mpi.so to time the
 * interposer (bench/mpi_preload_bench.sh does both and prints the ratio).
 *
 *   mpirun -np 2 mpi-coll-bench -c allreduce,allgather -b 8 -e 64M -f 2 --csv out.csv
 *
 * Sizes are bytes as in nccl-tests: what each rank contributes for AllReduce,
 * Bcast and Reduce, what each rank receives in all for AllGather (nranks *
 * sendcount), what each rank sends for Reduce_scatter_block (nranks *
 * recvcount). busbw = algbw * 2(p-1)/p for AllReduce, (p-1)/p for AllGather
 * and Reduce_scatter_block, 1 for Bcast and Reduce.
 *
 * Each size runs `-w` untimed iterations, then `-r` repetitions of `-n`
 * iterations (with -n 0, as many as fill about `-T` milliseconds), each
 * repetition timed from a barrier on every rank and taken as the slowest
 * rank's average; the table shows the median and the best repetition (this
 * machine is shared and noisy). With -k 1 every size is then run once more on
 * fresh integer-valued data and every element compared with its exact value.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLREDUCE, ALLGATHER, BCAST, REDUCE, REDUCE_SCATTER_BLOCK, BARRIER, NUM_COLLS };
static const char* const kCollNames[NUM_COLLS] = {"allreduce", "allgather",           "bcast",
                                                   "reduce",    "reduce_scatter_block", "barrier"};

typedef struct {
  const char* name;
  MPI_Datatype type;
  size_t size;
  int isFloat;
} type_info;

typedef struct {
  int colls[NUM_COLLS];
  size_t minBytes, maxBytes;
  double factor;
  int iters, warmup, reps, check;
  double targetMs;
  int placement; /* 0 out of place, 1 in place, 2 both */
  type_info type;
  const char* csv;
} options;

static int gRank = 0, gSize = 1;

static void die(const char* msg) {
  if (gRank == 0) fprintf(stderr, "mpi-coll-bench: %s\n", msg);
  MPI_Abort(MPI_COMM_WORLD, 2);
  exit(2);
}

static int parseSize(const char* s, size_t* out) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0) return 0;
  double mult = 1;
  if (*end == 'k' || *end == 'K') mult = 1024, ++end;
  else if (*end == 'm' || *end == 'M') mult = 1024.0 * 1024, ++end;
  else if (*end == 'g' || *end == 'G') mult = 1024.0 * 1024 * 1024, ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return 0;
  *out = (size_t)(v * mult);
  return 1;
}

static int parseType(const char* s, type_info* t) {
  static const struct {
    const char* name;
    size_t size;
    int isFloat;
  } known[] = {{"float", 4, 1}, {"double", 8, 1}, {"int", 4, 0}, {"long", 8, 0}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i) {
    if (strcmp(s, known[i].name) != 0) continue;
    t->name = known[i].name;
    t->size = known[i].size;
    t->isFloat = known[i].isFloat;
    t->type = i == 0 ? MPI_FLOAT : i == 1 ? MPI_DOUBLE : i == 2 ? MPI_INT : MPI_LONG;
    return 1;
  }
  return 0;
}

static void usage(void) {
  if (gRank != 0) return;
  printf(
      "Usage: mpirun -np N mpi-coll-bench [options]\n"
      "  -c, --coll LIST       allreduce,allgather,bcast,reduce,reduce_scatter_block,barrier or all\n"
      "                        (default allreduce,allgather)\n"
      "  -b, --minbytes SIZE   smallest size (default 8)\n"
      "  -e, --maxbytes SIZE   largest size (default 64M)\n"
      "  -f, --stepfactor F    multiply the size by F at each step (default 2)\n"
      "  -n, --iters N         iterations per repetition; 0: enough for -T ms (default 0)\n"
      "  -T, --target-ms MS    time per repetition when -n 0 (default 20)\n"
      "  -w, --warmup N        untimed iterations per size (default 5)\n"
      "  -r, --reps N          timed repetitions per size; the median is reported (default 5)\n"
      "  -p, --placement P     out (default), in (MPI_IN_PLACE) or both\n"
      "  -d, --datatype T      float (default), double, int, long\n"
      "  -k, --check 0|1       verify every size once on exact data (default 1)\n"
      "      --csv FILE        also write one CSV record per size and placement\n"
      "  -h, --help            this text\n");
}

static void parseArgs(int argc, char** argv, options* o) {
  memset(o, 0, sizeof *o);
  o->colls[ALLREDUCE] = o->colls[ALLGATHER] = 1;
  o->minBytes = 8;
  o->maxBytes = 64u << 20;
  o->factor = 2;
  o->warmup = 5;
  o->reps = 5;
  o->check = 1;
  o->targetMs = 20;
  parseType("float", &o->type);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(s, l) (strcmp(a, s) == 0 || strcmp(a, l) == 0)
    if (OPT("-h", "--help")) {
      usage();
      MPI_Finalize();
      exit(0);
    }
    if (v == NULL) die("every option takes a value (see --help)");
    ++i;
    if (OPT("-c", "--coll")) {
      memset(o->colls, 0, sizeof o->colls);
      char list[256];
      snprintf(list, sizeof list, "%s", v);
      for (char* tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int c = 0; c < NUM_COLLS; ++c)
          if (strcmp(tok, "all") == 0 || strcmp(tok, kCollNames[c]) == 0) o->colls[c] = found = 1;
        if (!found) die("unknown collective (see --help)");
      }
    } else if (OPT("-b", "--minbytes")) {
      if (!parseSize(v, &o->minBytes)) die("bad -b");
    } else if (OPT("-e", "--maxbytes")) {
      if (!parseSize(v, &o->maxBytes)) die("bad -e");
    } else if (OPT("-f", "--stepfactor")) {
      o->factor = atof(v);
      if (o->factor <= 1) die("-f must be more than 1");
    } else if (OPT("-n", "--iters")) {
      o->iters = atoi(v);
    } else if (OPT("-T", "--target-ms")) {
      o->targetMs = atof(v);
    } else if (OPT("-w", "--warmup")) {
      o->warmup = atoi(v);
    } else if (OPT("-r", "--reps")) {
      o->reps = atoi(v);
      if (o->reps < 1) die("-r must be at least 1");
    } else if (OPT("-p", "--placement")) {
      o->placement = strcmp(v, "in") == 0 ? 1 : strcmp(v, "both") == 0 ? 2 : strcmp(v, "out") == 0 ? 0 : -1;
      if (o->placement < 0) die("-p takes out, in or both");
    } else if (OPT("-d", "--datatype")) {
      if (!parseType(v, &o->type)) die("unknown datatype");
    } else if (OPT("-k", "--check")) {
      o->check = atoi(v);
    } else if (strcmp(a, "--csv") == 0) {
      o->csv = v;
    } else {
      die("unknown option (see --help)");
    }
#undef OPT
  }
  if (o->minBytes > o->maxBytes) die("-b is larger than -e");
}

/* ---- Buffers ------------------------------------------------------------------------ */

typedef struct {
  char* send;
  char* recv;
  size_t bytes;
} buffers;

/* Allocated once for the largest size and touched, so that no timed iteration
 * pays for first-touch page faults. */
static void allocBuffers(buffers* b, const options* o) {
  const size_t need = o->maxBytes * (size_t)1 + 64;
  b->bytes = need;
  b->send = malloc(need);
  b->recv = malloc(need);
  if (!b->send || !b->recv) die("out of memory");
  memset(b->send, 0, need);
  memset(b->recv, 0, need);
}

/* The element count and buffer extents of one call of `bytes`. */
static size_t countFor(int coll, size_t bytes, size_t elem) {
  size_t n = bytes / elem;
  if (coll == ALLGATHER || coll == REDUCE_SCATTER_BLOCK) n /= (size_t)gSize;
  return n;
}

static double busFactor(int coll) {
  const double p = gSize;
  switch (coll) {
    case ALLREDUCE: return 2 * (p - 1) / p;
    case ALLGATHER:
    case REDUCE_SCATTER_BLOCK: return (p - 1) / p;
    default: return 1;
  }
}

static void runOnce(int coll, int inPlace, size_t count, const options* o, buffers* b) {
  MPI_Datatype t = o->type.type;
  const size_t elem = o->type.size;
  void* in = inPlace ? MPI_IN_PLACE : b->send;
  switch (coll) {
    case ALLREDUCE: MPI_Allreduce(in, b->recv, (int)count, t, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLGATHER:
      MPI_Allgather(inPlace ? MPI_IN_PLACE : b->send, (int)count, t, b->recv, (int)count, t, MPI_COMM_WORLD);
      break;
    case BCAST: MPI_Bcast(b->recv, (int)count, t, 0, MPI_COMM_WORLD); break;
    case REDUCE:
      MPI_Reduce(inPlace && gRank == 0 ? MPI_IN_PLACE : b->send, b->recv, (int)count, t, MPI_SUM, 0,
                 MPI_COMM_WORLD);
      break;
    case REDUCE_SCATTER_BLOCK: {
      /* In place: the input is all of recvbuf. */
      void* rin = inPlace ? MPI_IN_PLACE : b->send;
      MPI_Reduce_scatter_block(rin, b->recv, (int)count, t, MPI_SUM, MPI_COMM_WORLD);
      break;
    }
    case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
  }
  (void)elem;
}

/* ---- Checking -------------------------------------------------------------------------- */

static void setElem(char* buf, size_t i, const type_info* t, long v) {
  if (t->type == MPI_FLOAT) ((float*)buf)[i] = (float)v;
  else if (t->type == MPI_DOUBLE) ((double*)buf)[i] = (double)v;
  else if (t->type == MPI_INT) ((int*)buf)[i] = (int)v;
  else ((long*)buf)[i] = v;
}

static long getElem(const char* buf, size_t i, const type_info* t) {
  if (t->type == MPI_FLOAT) return (long)((const float*)buf)[i];
  if (t->type == MPI_DOUBLE) return (long)((const double*)buf)[i];
  if (t->type == MPI_INT) return ((const int*)buf)[i];
  return ((const long*)buf)[i];
}

/* Small integers, exact in every type: rank r's element i is (i * 7 + r * 3) % 11 - 5. */
static long value(int rank, size_t i) { return (long)((i * 7 + (size_t)rank * 3) % 11) - 5; }

static long checkOnce(int coll, int inPlace, size_t count, const options* o, buffers* b) {
  const type_info* t = &o->type;
  const int p = gSize, me = gRank;
  long wrong = 0;
  switch (coll) {
    case ALLREDUCE:
    case REDUCE:
      for (size_t i = 0; i < count; ++i) setElem(inPlace ? b->recv : b->send, i, t, value(me, i));
      break;
    case ALLGATHER:
      for (size_t i = 0; i < count; ++i)
        setElem(inPlace ? b->recv + (size_t)me * count * t->size : b->send, i, t, value(me, i));
      break;
    case BCAST:
      for (size_t i = 0; i < count; ++i) setElem(b->recv, i, t, me == 0 ? value(0, i) : 99);
      break;
    case REDUCE_SCATTER_BLOCK:
      for (size_t i = 0; i < count * (size_t)p; ++i) setElem(inPlace ? b->recv : b->send, i, t, value(me, i));
      break;
    default: return 0;
  }
  if (coll == REDUCE && !inPlace && me == 0) memset(b->recv, 0, count * t->size);
  runOnce(coll, inPlace, count, o, b);
  for (size_t i = 0; i < count; ++i) {
    long want = 0;
    switch (coll) {
      case ALLREDUCE:
      case REDUCE:
        if (coll == REDUCE && me != 0) continue;
        for (int r = 0; r < p; ++r) want += value(r, i);
        if (getElem(b->recv, i, t) != want) ++wrong;
        break;
      case BCAST:
        if (getElem(b->recv, i, t) != value(0, i)) ++wrong;
        break;
      case REDUCE_SCATTER_BLOCK:
        for (int r = 0; r < p; ++r) want += value(r, (size_t)me * count + i);
        if (getElem(b->recv, i, t) != want) ++wrong;
        break;
      default: break;
    }
  }
  if (coll == ALLGATHER)
    for (int r = 0; r < p; ++r)
      for (size_t i = 0; i < count; ++i)
        if (getElem(b->recv + (size_t)r * count * t->size, i, t) != value(r, i)) ++wrong;
  long total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

/* ---- Timing ------------------------------------------------------------------------------- */

static int cmpDouble(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Seconds per iteration, the slowest rank's, for each repetition. */
static void timeSize(int coll, int inPlace, size_t count, const options* o, buffers* b, int* itersOut,
                     double* median, double* best) {
  for (int i = 0; i < o->warmup; ++i) runOnce(coll, inPlace, count, o, b);
  int iters = o->iters;
  if (iters <= 0) {
    /* Calibrate on the slowest rank so every rank runs the same number. */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    runOnce(coll, inPlace, count, o, b);
    runOnce(coll, inPlace, count, o, b);
    double per = (MPI_Wtime() - t0) / 2, slowest = 0;
    MPI_Allreduce(&per, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double n = o->targetMs * 1e-3 / (slowest > 1e-9 ? slowest : 1e-9);
    iters = n < 3 ? 3 : n > 100000 ? 100000 : (int)n;
  }
  double times[64];
  const int reps = o->reps > 64 ? 64 : o->reps;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) runOnce(coll, inPlace, count, o, b);
    double per = (MPI_Wtime() - t0) / iters, slowest = 0;
    MPI_Allreduce(&per, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times[r] = slowest;
  }
  qsort(times, (size_t)reps, sizeof times[0], cmpDouble);
  *median = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
  *best = times[0];
  *itersOut = iters;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &gRank);
  MPI_Comm_size(MPI_COMM_WORLD, &gSize);
  options o;
  parseArgs(argc, argv, &o);
  buffers b;
  allocBuffers(&b, &o);

  FILE* csv = NULL;
  if (gRank == 0) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    char* nl = strchr(lib, '\n');
    if (nl) *nl = '\0';
    const char* preload = getenv("LD_PRELOAD");
    printf("# mpi-coll-bench: %d ranks, %s\n", gSize, lib);
    printf("# LD_PRELOAD: %s\n", preload && *preload ? preload : "(none)");
    printf("# sizes %zu..%zu x%g, datatype %s, op sum, root 0, warmup %d, reps %d (median shown), iters %s\n",
           o.minBytes, o.maxBytes, o.factor, o.type.name, o.warmup, o.reps, o.iters > 0 ? "fixed" : "auto");
    printf("#\n# %-21s %12s %11s %6s %7s %11s %11s %9s %9s %7s\n", "collective", "size(B)", "count", "place",
           "iters", "time(us)", "best(us)", "algbw", "busbw", "#wrong");
    printf("# %-21s %12s %11s %6s %7s %11s %11s %9s %9s %7s\n", "", "", "", "", "", "median", "", "(GB/s)",
           "(GB/s)", "");
    if (o.csv) {
      csv = fopen(o.csv, "w");
      if (!csv) die("cannot write the CSV file");
      fprintf(csv, "collective,nranks,type,placement,size_bytes,count,iters,time_us,best_us,algbw_gbps,busbw_gbps,wrong\n");
    }
    fflush(stdout);
  }

  for (int coll = 0; coll < NUM_COLLS; ++coll) {
    if (!o.colls[coll]) continue;
    for (size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
      const size_t count = coll == BARRIER ? 0 : countFor(coll, bytes, o.type.size);
      const size_t real = coll == BARRIER ? 0
                          : (coll == ALLGATHER || coll == REDUCE_SCATTER_BLOCK) ? count * o.type.size * (size_t)gSize
                                                                                : count * o.type.size;
      for (int place = 0; place < 2; ++place) {
        if (coll != BARRIER && count == 0) break;
        if ((o.placement == 0 && place == 1) || (o.placement == 1 && place == 0)) continue;
        if (coll == BARRIER && place == 1) continue;
        if (coll == BCAST && place == 1) continue; /* always in place */
        int iters = 0;
        double median = 0, best = 0;
        timeSize(coll, place, count, &o, &b, &iters, &median, &best);
        const long wrong = o.check ? checkOnce(coll, place, count, &o, &b) : -1;
        if (gRank == 0) {
          const double algbw = median > 0 ? (double)real / median / 1e9 : 0;
          const double busbw = algbw * busFactor(coll);
          const char* where = coll == BCAST || coll == BARRIER ? "-" : place ? "in" : "out";
          printf("  %-21s %12zu %11zu %6s %7d %11.2f %11.2f %9.3f %9.3f %7s\n", kCollNames[coll], real, count, where,
                 iters, median * 1e6, best * 1e6, algbw, busbw,
                 wrong < 0 ? "n/a" : wrong == 0 ? "0" : "WRONG");
          if (wrong > 0) printf("#   %ld wrong elements\n", wrong);
          if (csv)
            fprintf(csv, "%s,%d,%s,%s,%zu,%zu,%d,%.4f,%.4f,%.6f,%.6f,%ld\n", kCollNames[coll], gSize, o.type.name,
                    where, real, count, iters, median * 1e6, best * 1e6, algbw, busbw, wrong);
          fflush(stdout);
        }
      }
      if (coll == BARRIER) break;
      const size_t nextBytes = (size_t)((double)bytes * o.factor);
      bytes = nextBytes > bytes ? nextBytes : bytes + 1;
    }
  }
  if (csv) fclose(csv);
  free(b.send);
  free(b.recv);
  MPI_Finalize();
  return 0;
}
