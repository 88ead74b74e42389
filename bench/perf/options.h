// nodus-perf's command line: the options, the help text, the parsers, and the
// sizes a sweep visits.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "perf/common.h"

namespace nodus_perf {

struct Options {
  size_t minBytes = 8;
  size_t maxBytes = size_t{64} << 20;
  double stepFactor = 2.0;
  size_t stepBytes = 0;  // > 0: linear steps instead of a factor
  int iters = 20;
  int rounds = 1;  // -a all: passes over the algorithms, each cell keeps its best
  int split = 0;   // --split K: time the split into K groups (rank % K), then run the sweep on them
  int warmup = 5;
  int check = 1;
  int root = 0;
  int threads = 0;  // > 0: ranks are threads of this process
  // --rank/--nranks/--id-file: one rank of a job started without a launcher
  // (every process run by hand, a script or a scheduler).
  int rank = -1;
  int nranks = 0;
  std::string idFile;
  bool idFileMode() const { return !idFile.empty(); }
  bool baselineMpi = false;
  bool help = false;
  std::vector<Coll> colls{Coll::AllReduce};
  std::vector<nodusDataType_t> types{nodusFloat32};
  std::vector<nodusRedOp_t> ops{nodusSum};
  std::string csvPath;
  std::string jsonPath;
  // -a: empty (NODUS_ALGO as the environment has it), "auto" (unset), "all"
  // (every algorithm side by side), or what NODUS_ALGO is set to.
  std::string algo;
  bool algoAll() const { return algo == "all"; }
  // The table shows the algorithm that ran only when -a asks: scripts parse it.
  bool algoColumn() const { return !algo.empty() && !algoAll(); }
};

// The algorithms the library implements, in its registry order.
std::vector<std::string> algorithmNames();

void printHelp(FILE* f);

// Sizes as every nodus tool takes them (base/size.h).
bool parseSize(const std::string& s, size_t* out);
bool parseInt(const std::string& s, int* out);
std::vector<std::string> splitList(const std::string& s);

// -a's value. A plain name must be one the library knows, so a typo stops here
// with the list instead of silently falling back to the tuner; anything with
// rule syntax is NODUS_ALGO's business (communicator creation reports errors).
bool parseAlgo(const std::string& value, std::string* out, std::string* err);

std::string lowerNoSeparators(const std::string& s);
bool parseTypes(const std::string& s, std::vector<nodusDataType_t>* out);
bool parseOps(const std::string& s, std::vector<nodusRedOp_t>* out);
bool parseColls(const std::string& s, std::vector<Coll>* out);

// Parses argv; on failure writes a message to *err and returns false.
bool parseArgs(int argc, char** argv, Options* o, std::string* err);

// The sizes of the sweep, -b to -e by -f or -i.
std::vector<size_t> sweepSizes(const Options& o);

}  // namespace nodus_perf
