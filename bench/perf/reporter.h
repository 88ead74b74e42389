// nodus-perf's output, written by rank 0 only: the results it measures, the
// nccl-tests table on stdout, and the CSV and JSON files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perf/common.h"
#include "perf/options.h"

namespace nodus_perf {

// ---- Results -------------------------------------------------------------------

struct Measurement {
  double timeUs = 0;
  double algbw = 0;
  double busbw = 0;
  int64_t wrong = -1;       // -1: not checked
  double mpiTimeUs = kNaN;  // NaN: no baseline, or no MPI equivalent
  double mpiBusbw = kNaN;
};

struct Row {
  Coll coll;
  nodusDataType_t type;
  nodusRedOp_t op;
  int root;                    // -1 for collectives without one
  size_t bytes;                // nccl-tests' size
  size_t count;                // bytes / element size
  size_t rankCount;            // the count argument of the nodus call
  Measurement place[2];        // out-of-place, in-place
  const char* algo = nullptr;  // what nodusCommGetAlgorithm says runs the call
};

// A row of -a all: the out-of-place call under every algorithm.
struct AlgoRow {
  Row row;                     // place[0] holds the MPI baseline only
  const char* pick = nullptr;  // the tuner's choice, NODUS_ALGO unset
  // Per algorithm of algorithmNames(); empty where it does not run the call.
  std::vector<std::optional<Measurement>> cells;
};

// ---- Output (rank 0 only) ------------------------------------------------------

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

std::string fmtTime(double us);
std::string fmtFixed(double v, const char* fmt = "%.2f");
// busbw in the -a all table: below 1 GB/s "%.2f" would print 0.00 for every
// algorithm at small sizes, where they differ the most.
std::string fmtBw(double v);
std::string jsonNum(double v);
std::string csvNum(double v);
std::string jsonString(const std::string& s);

class Reporter {
 public:
  Reporter(const Options& opt, int nranks, const char* launch);

  bool openFiles(std::string* err);

  void printHeader(int version, const std::vector<std::string>& rankLines);

  void beginTable(Coll c);

  void row(const Row& r);

  void endTable(Coll c);

  // A comment line while a long -a all sweep runs.
  void progress(const std::string& text);

  // -a all: the table of collective `c` from its rows, with its CSV/JSON
  // records and summary.
  void algoTable(Coll c, const std::vector<AlgoRow>& rows, const std::vector<std::string>& names);

  void finish();

 private:
  struct Table {
    double busbwSum = 0;
    int busbwCount = 0;
    double mpiBusbwSum = 0;
    int mpiCount = 0;
    double ratioSum = 0;
    int ratioCount = 0;
    uint64_t wrong = 0;
    bool checked = false;
  };

  static std::string pad(const std::string& s, int width);
  static std::string lead(const std::string& size, const std::string& count,
                          const std::string& type, const std::string& redop,
                          const std::string& root);
  static std::string place(const std::string& time, const std::string& algbw,
                           const std::string& busbw, const std::string& wrong);
  static std::string mpiCols(const std::string& time, const std::string& busbw,
                             const std::string& ratio);

  // extraCsv/extraJson: more fields of -a all, each starting with a comma.
  void record(const Row& r, bool inPlace, double ratio, const char* extraCsv = "",
              const char* extraJson = "");

  const Options& opt_;
  int nranks_;
  const char* launch_;
  File csv_;
  File json_;
  bool firstRecord_ = true;
  Table table_;
  std::vector<std::string> summaries_;
  uint64_t totalWrong_ = 0;
};

}  // namespace nodus_perf
