#include "perf/options.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>

#include "base/size.h"

namespace nodus_perf {

void printHelp(FILE* f) {
  // The library's algorithm list, wrapped into the option column.
  std::string names, lineSoFar;
  for (const std::string& n : algorithmNames()) {
    if (!lineSoFar.empty() && lineSoFar.size() + n.size() + 2 > 80) {
      names += lineSoFar + ",\n";
      lineSoFar.clear();
    }
    if (!lineSoFar.empty()) lineSoFar += ", ";
    if (lineSoFar.empty()) lineSoFar = std::string(26, ' ');
    lineSoFar += n;
  }
  names += lineSoFar;
  std::fprintf(f,
               "nodus-perf: collective benchmark (nccl-tests' table and flags)\n"
               "\n"
               "Usage: mpirun -np N nodus-perf [options]   one rank per process\n"
               "       nodus-perf -t N [options]           N ranks as threads of one process\n"
               "       nodus-perf --rank R --nranks N --id-file PATH [options]\n"
               "                                           rank R of N processes started\n"
               "                                           without mpirun (any host, any order)\n"
               "\n"
               "  -t, --nthreads N        run N ranks as threads of this process (no mpirun)\n"
               "      --rank R            this process is rank R of --nranks N; rank 0 makes\n"
               "      --nranks N          the communicator's unique id and publishes it in\n"
               "      --id-file PATH      PATH (which must not exist yet), the others wait\n"
               "                          for PATH (a file system every rank sees) and rank 0\n"
               "                          removes it once all have joined (or when\n"
               "                          interrupted or terminated before)\n"
               "  -b, --minbytes SIZE     smallest size in bytes (default 8)\n"
               "  -e, --maxbytes SIZE     largest size in bytes (default 64M)\n"
               "  -f, --stepfactor F      multiply the size by F at each step (default 2)\n"
               "  -i, --stepbytes SIZE    add SIZE at each step instead of multiplying\n"
               "  -n, --iters N           timed iterations per size (default 20)\n"
               "  -w, --warmup_iters N    untimed iterations before timing (default 5)\n"
               "  -c, --check 0|1         verify every result (default 1)\n"
               "  -d, --datatype TYPE     float|float32|half|float16|bfloat16|double|int8|uint8|\n"
               "                          int32|uint32|int64|uint64|all, or a comma list\n"
               "                          (default float)\n"
               "  -o, --op OP             sum|prod|min|max|avg|all, or a comma list (default sum)\n"
               "  -r, --root R            root of broadcast, reduce, gather and scatter (default 0)\n"
               "      --coll NAME         allreduce|allgather|reducescatter|broadcast|reduce|\n"
               "                          alltoall|gather|scatter|all, or a comma list (default\n"
               "                          allreduce)\n"
               "      --baseline mpi      also time the MPI library's own collective on the same\n"
               "                          buffers (under mpirun; fp16, bf16 and avg: n/a)\n"
               "      --csv FILE          write one CSV record per size and placement\n"
               "      --json FILE         write the results as JSON\n"
               "      --split K           time nodusCommSplit into K communicators (rank %% K) against\n"
               "                          making the same from new unique ids (nodusGetUniqueId,\n"
               "                          nodusCommInitRank), then run the sweep on the split ones\n"
               "                          (all K at once; --baseline mpi on MPI_Comm_split's)\n"
               "      --rounds R          -a all: R passes over the algorithms, in reverse order\n"
               "                          every other pass; each cell keeps its best (default 1)\n"
               "  -a, --algo NAME         force an algorithm: sets NODUS_ALGO=NAME before any\n"
               "                          communicator is created. NAME is one of:\n%s,\n"
               "                          or a whole NODUS_ALGO rule string, passed through\n"
               "                          (e.g. 'allreduce:0-64K:direct,64K-:ring'). A call the\n"
               "                          algorithm does not implement is left to the tuner, so\n"
               "                          the table gains an `algo` column: what actually ran.\n"
               "                          auto: unset NODUS_ALGO; the `algo` column shows the\n"
               "                          tuner's pick. all: compare every algorithm (below)\n"
               "  -h, --help              this text\n"
               "\n"
               "SIZE accepts K, M, G (and T) suffixes, powers of 1024. Sizes are total bytes\n"
               "as in nccl-tests (allgather: bytes received, reducescatter: bytes sent per\n"
               "rank, alltoall: bytes sent per rank, gather and scatter: the root's p blocks);\n"
               "a size whose count per rank rounds to 0 is skipped. busbw = algbw * 2(p-1)/p\n"
               "for allreduce, (p-1)/p for allgather, reducescatter, alltoall, gather and\n"
               "scatter, 1 otherwise.\n"
               "The exit status is 1 when any result was wrong.\n"
               "\n"
               "-a all times each algorithm in turn on a communicator of its own (NODUS_ALGO set\n"
               "to its name; a communicator reads NODUS_ALGO when it is created), out-of-place\n"
               "only, after asking a communicator with NODUS_ALGO unset for the tuner's pick\n"
               "(a NODUS_ALGO from the environment is ignored).\n"
               "One table per collective: a row per size and type/op, a busbw column per\n"
               "algorithm that runs at least one of its calls, '-' where the algorithm does not\n"
               "run that call (the library would fall back to the tuner; not timed), '*' on the\n"
               "tuner's pick; then the fastest algorithm measured, whether the tuner agreed, and\n"
               "the pick's busbw over the fastest's. Every timed call is checked (-c). busbw\n"
               "below 1 GB/s is shown to 3 significant digits so small sizes stay comparable.\n"
               "With --baseline mpi, an `mpi` column (timed once, in the tuner's pass). CSV/JSON:\n"
               "one record per size and algorithm that ran, with `algo`, `tuner_pick` and\n"
               "`fastest`. A `#` line is printed as each algorithm's pass starts. On a shared\n"
               "or oversubscribed machine, --rounds 3 or more makes the columns comparable.\n",
               names.c_str());
}

// Sizes as every nodus tool takes them (base/size.h).
bool parseSize(const std::string& s, size_t* out) {
  uint64_t v = 0;
  if (!nodus::parseUnsignedSize(s, &v) || v > std::numeric_limits<size_t>::max()) return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool parseInt(const std::string& s, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || s.empty() || *end != '\0' || v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    parts.push_back(
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

std::vector<std::string> algorithmNames() {
  std::vector<std::string> names;
  for (std::string& n : splitList(nodusAlgorithmNames()))
    if (!n.empty()) names.push_back(std::move(n));
  return names;
}

// -a's value. A plain name must be one the library knows, so a typo stops here
// with the list instead of silently falling back to the tuner; anything with
// rule syntax is NODUS_ALGO's business (communicator creation reports errors).
bool parseAlgo(const std::string& value, std::string* out, std::string* err) {
  if (value.find_first_of(":,;") != std::string::npos) {
    *out = value;
    return true;
  }
  std::string n;
  for (char ch : value)
    n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  if (n == "all" || n == "auto") {
    *out = n;
    return true;
  }
  std::string known;
  for (const std::string& name : algorithmNames()) {
    if (n == name) {
      *out = name;
      return true;
    }
    known += (known.empty() ? "" : ", ") + name;
  }
  *err = "unknown algorithm '" + value + "' for -a (this library has: " + known +
         "; or all, auto, or a NODUS_ALGO rule string)";
  return false;
}

std::string lowerNoSeparators(const std::string& s) {
  std::string r;
  for (char ch : s)
    if (ch != '_' && ch != '-')
      r.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  return r;
}

bool parseTypes(const std::string& s, std::vector<nodusDataType_t>* out) {
  out->clear();
  for (const std::string& raw : splitList(s)) {
    const std::string n = lowerNoSeparators(raw);
    if (n == "all") {
      for (const TypeInfo& ti : kTypes) out->push_back(ti.type);
      continue;
    }
    nodusDataType_t t;
    if (n == "float" || n == "float32" || n == "fp32" || n == "f32")
      t = nodusFloat32;
    else if (n == "half" || n == "float16" || n == "fp16" || n == "f16")
      t = nodusFloat16;
    else if (n == "bfloat16" || n == "bf16")
      t = nodusBfloat16;
    else if (n == "double" || n == "float64" || n == "fp64" || n == "f64")
      t = nodusFloat64;
    else if (n == "int8" || n == "char")
      t = nodusInt8;
    else if (n == "uint8")
      t = nodusUint8;
    else if (n == "int32" || n == "int")
      t = nodusInt32;
    else if (n == "uint32")
      t = nodusUint32;
    else if (n == "int64")
      t = nodusInt64;
    else if (n == "uint64")
      t = nodusUint64;
    else
      return false;
    out->push_back(t);
  }
  return !out->empty();
}

bool parseOps(const std::string& s, std::vector<nodusRedOp_t>* out) {
  out->clear();
  for (const std::string& raw : splitList(s)) {
    const std::string n = lowerNoSeparators(raw);
    if (n == "all") {
      for (nodusRedOp_t op : {nodusSum, nodusProd, nodusMin, nodusMax, nodusAvg})
        out->push_back(op);
    } else if (n == "sum")
      out->push_back(nodusSum);
    else if (n == "prod")
      out->push_back(nodusProd);
    else if (n == "min")
      out->push_back(nodusMin);
    else if (n == "max")
      out->push_back(nodusMax);
    else if (n == "avg")
      out->push_back(nodusAvg);
    else
      return false;
  }
  return !out->empty();
}

bool parseColls(const std::string& s, std::vector<Coll>* out) {
  out->clear();
  for (const std::string& raw : splitList(s)) {
    const std::string n = lowerNoSeparators(raw);
    if (n == "all") {
      out->insert(out->end(), std::begin(kAllColls), std::end(kAllColls));
      continue;
    }
    bool found = false;
    for (Coll c : kAllColls) {
      if (n == collName(c) || (n == "bcast" && c == Coll::Broadcast)) {
        out->push_back(c);
        found = true;
      }
    }
    if (!found) return false;
  }
  return !out->empty();
}

// Parses argv; on failure writes a message to *err and returns false.
bool parseArgs(int argc, char** argv, Options* o, std::string* err) {
  struct Alias {
    const char* longName;
    char shortName;
  };
  static constexpr Alias kAliases[] = {
      {"nthreads", 't'},  {"minbytes", 'b'}, {"maxbytes", 'e'},     {"stepfactor", 'f'},
      {"stepbytes", 'i'}, {"iters", 'n'},    {"warmup_iters", 'w'}, {"check", 'c'},
      {"datatype", 'd'},  {"op", 'o'},       {"root", 'r'},         {"help", 'h'},
      {"coll", 'C'},      {"baseline", 'B'}, {"csv", 'V'},          {"json", 'J'},
      {"algo", 'a'},      {"rounds", 'R'},       {"rank", 'K'},         {"nranks", 'N'},
      {"id-file", 'I'},   {"split", 'S'},
  };
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    char key = 0;
    std::string value;
    bool hasValue = false;
    if (arg.size() > 2 && arg[0] == '-' && arg[1] == '-') {
      std::string name = arg.substr(2);
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        hasValue = true;
      }
      for (const Alias& al : kAliases)
        if (name == al.longName) key = al.shortName;
      if (name == "collective") key = 'C';
      if (key == 0) {
        *err = "unknown option '" + arg + "'";
        return false;
      }
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      key = arg[1];
      bool known = false;
      for (const Alias& al : kAliases)
        if (key == al.shortName && std::islower(static_cast<unsigned char>(key))) known = true;
      if (!known) {
        *err = "unknown option '" + arg + "'";
        return false;
      }
      if (arg.size() > 2) {
        value = arg.substr(2);
        hasValue = true;
      }
    } else {
      *err = "unexpected argument '" + arg + "'";
      return false;
    }
    if (key == 'h') {
      o->help = true;
      continue;
    }
    if (!hasValue) {
      if (a + 1 >= argc) {
        *err = "option '" + arg + "' needs a value";
        return false;
      }
      value = argv[++a];
    }
    bool ok = true;
    switch (key) {
      case 't': ok = parseInt(value, &o->threads) && o->threads >= 1; break;
      case 'b': ok = parseSize(value, &o->minBytes); break;
      case 'e': ok = parseSize(value, &o->maxBytes); break;
      case 'f': {
        char* end = nullptr;
        o->stepFactor = std::strtod(value.c_str(), &end);
        ok = !value.empty() && *end == '\0' && o->stepFactor > 1.0 && std::isfinite(o->stepFactor);
        if (ok) o->stepBytes = 0;
        break;
      }
      case 'i': ok = parseSize(value, &o->stepBytes); break;
      case 'n': ok = parseInt(value, &o->iters) && o->iters >= 1; break;
      case 'w': ok = parseInt(value, &o->warmup) && o->warmup >= 0; break;
      case 'R': ok = parseInt(value, &o->rounds) && o->rounds >= 1; break;
      case 'S': ok = parseInt(value, &o->split) && o->split >= 1; break;
      case 'K': ok = parseInt(value, &o->rank) && o->rank >= 0; break;
      case 'N': ok = parseInt(value, &o->nranks) && o->nranks >= 1; break;
      case 'I':
        o->idFile = value;
        ok = !value.empty();
        break;
      case 'c': ok = parseInt(value, &o->check) && (o->check == 0 || o->check == 1); break;
      case 'd': ok = parseTypes(value, &o->types); break;
      case 'o': ok = parseOps(value, &o->ops); break;
      case 'r': ok = parseInt(value, &o->root) && o->root >= 0; break;
      case 'C': ok = parseColls(value, &o->colls); break;
      case 'B': {
        const std::string n = lowerNoSeparators(value);
        ok = (n == "mpi" || n == "none");
        o->baselineMpi = (n == "mpi");
        break;
      }
      case 'V':
        o->csvPath = value;
        ok = !value.empty();
        break;
      case 'J':
        o->jsonPath = value;
        ok = !value.empty();
        break;
      case 'a':
        if (!parseAlgo(value, &o->algo, err)) return false;
        break;
      default: ok = false; break;
    }
    if (!ok) {
      *err = "bad value '" + value + "' for option '" + arg + "'";
      return false;
    }
  }
  if (o->minBytes > o->maxBytes) {
    *err = "minbytes (-b) is larger than maxbytes (-e)";
    return false;
  }
  if (o->rounds > 1 && !o->algoAll()) {
    *err = "--rounds applies to -a all only";
    return false;
  }
  const bool anyOfFile = o->rank >= 0 || o->nranks > 0 || o->idFileMode();
  if (anyOfFile && (o->rank < 0 || o->nranks < 1 || !o->idFileMode())) {
    *err = "--rank, --nranks and --id-file go together (one rank of a job started without mpirun)";
    return false;
  }
  if (anyOfFile && o->rank >= o->nranks) {
    *err = "--rank " + std::to_string(o->rank) + " is not a rank of --nranks " + std::to_string(o->nranks);
    return false;
  }
  if (anyOfFile && o->threads > 0) {
    *err = "-t (ranks as threads) and --rank/--nranks/--id-file (ranks as processes) exclude each other";
    return false;
  }
  if (anyOfFile && o->baselineMpi) {
    *err = "--baseline mpi needs an MPI launch (mpirun), not --id-file";
    return false;
  }
  return true;
}

std::vector<size_t> sweepSizes(const Options& o) {
  std::vector<size_t> sizes;
  size_t s = o.minBytes;
  while (true) {
    sizes.push_back(s);
    size_t next;
    if (o.stepBytes > 0) {
      next = s + o.stepBytes;
      if (next < s) break;  // overflow
    } else {
      const double d = static_cast<double>(s) * o.stepFactor;
      next = d >= 1.8e19 ? std::numeric_limits<size_t>::max() : static_cast<size_t>(d);
      if (next <= s) next = s + 1;
    }
    if (next > o.maxBytes) break;
    s = next;
  }
  return sizes;
}

}  // namespace nodus_perf
