#include "perf/reporter.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace nodus_perf {

std::string fmtTime(double us) {
  char b[32];
  if (!std::isfinite(us)) return "n/a";
  std::snprintf(b, sizeof b, us < 1e6 ? "%.2f" : "%.0f", us);
  return b;
}

std::string fmtFixed(double v, const char* fmt) {
  char b[32];
  if (!std::isfinite(v)) return "n/a";
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

// busbw in the -a all table: below 1 GB/s "%.2f" would print 0.00 for every
// algorithm at small sizes, where they differ the most.
std::string fmtBw(double v) {
  char b[32];
  if (!std::isfinite(v)) return "n/a";
  std::snprintf(b, sizeof b, v >= 1.0 ? "%.2f" : "%#.3g", v);
  return b;
}

std::string jsonNum(double v) {
  char b[40];
  if (!std::isfinite(v)) return "null";
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::string csvNum(double v) {
  char b[40];
  if (!std::isfinite(v)) return "";
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::string jsonString(const std::string& s) {
  std::string r = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      r.push_back('\\');
      r.push_back(ch);
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
      r += b;
    } else {
      r.push_back(ch);
    }
  }
  return r + "\"";
}

Reporter::Reporter(const Options& opt, int nranks, const char* launch)
    : opt_(opt), nranks_(nranks), launch_(launch) {}

bool Reporter::openFiles(std::string* err) {
  if (!opt_.csvPath.empty()) {
    csv_.reset(std::fopen(opt_.csvPath.c_str(), "w"));
    if (!csv_) {
      *err = "cannot write " + opt_.csvPath + ": " + std::strerror(errno);
      return false;
    }
    std::fprintf(csv_.get(),
                 "collective,nranks,launch,type,redop,root,size_bytes,count,rank_count,placement,"
                 "time_us,algbw_gbps,busbw_gbps,wrong,mpi_time_us,mpi_busbw_gbps,busbw_ratio,"
                 "algo%s\n",
                 opt_.algoAll() ? ",tuner_pick,fastest" : "");
    std::fflush(csv_.get());
  }
  if (!opt_.jsonPath.empty()) {
    json_.reset(std::fopen(opt_.jsonPath.c_str(), "w"));
    if (!json_) {
      *err = "cannot write " + opt_.jsonPath + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

void Reporter::printHeader(int version, const std::vector<std::string>& rankLines) {
  std::string colls, types, ops;
  for (Coll c : opt_.colls) colls += std::string(colls.empty() ? "" : ",") + collName(c);
  for (nodusDataType_t t : opt_.types)
    types += std::string(types.empty() ? "" : ",") + typeInfo(t).name;
  for (nodusRedOp_t op : opt_.ops) ops += std::string(ops.empty() ? "" : ",") + opName(op);
  char step[64];
  if (opt_.stepBytes > 0)
    std::snprintf(step, sizeof step, "%zu(bytes)", opt_.stepBytes);
  else
    std::snprintf(step, sizeof step, "%g(factor)", opt_.stepFactor);
  std::printf("# nodus-perf: nodus %d.%d.%d, %d ranks (%s)\n", version / 10000,
              (version / 100) % 100, version % 100, nranks_, launch_);
  std::printf("#  minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d validation: %d\n",
              opt_.minBytes, opt_.maxBytes, step, opt_.warmup, opt_.iters, opt_.check);
  std::printf("#  collectives: %s  types: %s  ops: %s  root: %d  baseline: %s%s%s\n",
              colls.c_str(), types.c_str(), ops.c_str(), opt_.root,
              opt_.baselineMpi ? "mpi" : "none",
              opt_.algo.empty() ? "" : "  algo: ", opt_.algo.c_str());
  std::printf("#\n");
  for (const std::string& l : rankLines) std::printf("%s\n", l.c_str());
  std::fflush(stdout);
  if (json_) {
    FILE* j = json_.get();
    std::fprintf(j, "{\n  \"benchmark\": \"nodus-perf\",\n");
    std::fprintf(j, "  \"nodus_version\": \"%d.%d.%d\",\n", version / 10000,
                 (version / 100) % 100, version % 100);
    std::fprintf(j, "  \"nranks\": %d,\n  \"launch\": %s,\n", nranks_,
                 jsonString(launch_).c_str());
    std::fprintf(j,
                 "  \"min_bytes\": %zu,\n  \"max_bytes\": %zu,\n  \"step_factor\": %s,\n"
                 "  \"step_bytes\": %zu,\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n"
                 "  \"check\": %d,\n  \"root\": %d,\n  \"baseline\": %s,\n  \"algo\": %s,\n",
                 opt_.minBytes, opt_.maxBytes,
                 opt_.stepBytes > 0 ? "null" : jsonNum(opt_.stepFactor).c_str(), opt_.stepBytes,
                 opt_.iters, opt_.warmup, opt_.check, opt_.root,
                 opt_.baselineMpi ? "\"mpi\"" : "null",
                 opt_.algo.empty() ? "null" : jsonString(opt_.algo).c_str());
    std::fprintf(j, "  \"results\": [");
    std::fflush(j);
  }
}

void Reporter::beginTable(Coll c) {
  table_ = Table{};
  std::printf("#\n# %s\n", collName(c));
  const bool mpi = opt_.baselineMpi;
  std::string l1 = lead("", "", "", "", "");
  std::string l2 = lead("size", "count", "type", "redop", "root");
  std::string l3 = lead("(B)", "(elements)", "", "", "");
  for (const char* title : {"out-of-place", "in-place"}) {
    std::string cols = place("time", "algbw", "busbw", "#wrong");
    std::string units = place("(us)", "(GB/s)", "(GB/s)", "");
    if (mpi) {
      cols += mpiCols("mpi(us)", "mpibw", "ratio");
      units += mpiCols("(us)", "(GB/s)", "");
    }
    std::string t = title;
    const size_t width = cols.size();
    l1 += std::string(width > t.size() ? width - t.size() : 0, ' ') + t;
    l2 += cols;
    l3 += units;
  }
  if (opt_.algoColumn()) l2 += "  algo";
  for (std::string* l : {&l1, &l2, &l3}) {
    (*l)[0] = '#';
    l->erase(l->find_last_not_of(' ') + 1);
    std::printf("%s\n", l->c_str());
  }
  std::fflush(stdout);
}

void Reporter::row(const Row& r) {
  const TypeInfo& ti = typeInfo(r.type);
  const char* redop = collHasOp(r.coll) ? opName(r.op) : "none";
  char rootStr[16];
  std::snprintf(rootStr, sizeof rootStr, "%d", r.root);
  char sizeStr[24], countStr[24];
  std::snprintf(sizeStr, sizeof sizeStr, "%zu", r.bytes);
  std::snprintf(countStr, sizeof countStr, "%zu", r.count);
  std::string line = lead(sizeStr, countStr, ti.name, redop, rootStr);
  for (int ip = 0; ip < 2; ++ip) {
    const Measurement& m = r.place[ip];
    const std::string wrong = m.wrong < 0 ? "N/A" : std::to_string(m.wrong);
    line += place(fmtTime(m.timeUs), fmtFixed(m.algbw), fmtFixed(m.busbw), wrong);
    const double ratio = m.busbw / m.mpiBusbw;
    if (opt_.baselineMpi)
      line += mpiCols(fmtTime(m.mpiTimeUs), fmtFixed(m.mpiBusbw), fmtFixed(ratio));
    table_.busbwSum += m.busbw;
    ++table_.busbwCount;
    if (std::isfinite(m.mpiBusbw)) {
      table_.mpiBusbwSum += m.mpiBusbw;
      ++table_.mpiCount;
    }
    if (std::isfinite(ratio)) {
      table_.ratioSum += ratio;
      ++table_.ratioCount;
    }
    if (m.wrong > 0) table_.wrong += static_cast<uint64_t>(m.wrong);
    if (m.wrong >= 0) table_.checked = true;
    record(r, ip == 1, ratio);
  }
  if (opt_.algoColumn()) line += std::string("  ") + (r.algo != nullptr ? r.algo : "?");
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Reporter::endTable(Coll c) {
  const Table& t = table_;
  if (!t.checked)
    std::printf("# Wrong values         : not checked\n");
  else
    std::printf("# Wrong values         : %llu %s\n", static_cast<unsigned long long>(t.wrong),
                t.wrong == 0 ? "OK" : "FAILED");
  const double avg = t.busbwCount > 0 ? t.busbwSum / t.busbwCount : 0.0;
  std::printf("# Avg bus bandwidth    : %g\n", avg);
  double mpiAvg = kNaN, ratioAvg = kNaN;
  if (opt_.baselineMpi) {
    if (t.mpiCount > 0) mpiAvg = t.mpiBusbwSum / t.mpiCount;
    if (t.ratioCount > 0) ratioAvg = t.ratioSum / t.ratioCount;
    std::printf("# Avg MPI bus bandwidth: %s\n",
                std::isfinite(mpiAvg) ? fmtFixed(mpiAvg, "%g").c_str() : "n/a");
    std::printf("# Avg nodus/MPI busbw  : %s\n",
                std::isfinite(ratioAvg) ? fmtFixed(ratioAvg, "%.3f").c_str() : "n/a");
  }
  std::fflush(stdout);
  char b[512];
  std::snprintf(b, sizeof b,
                "    {\"collective\": \"%s\", \"wrong\": %s, \"avg_busbw_gbps\": %s, "
                "\"avg_mpi_busbw_gbps\": %s, \"avg_busbw_ratio\": %s}",
                collName(c), t.checked ? std::to_string(t.wrong).c_str() : "null",
                jsonNum(avg).c_str(), jsonNum(mpiAvg).c_str(), jsonNum(ratioAvg).c_str());
  summaries_.push_back(b);
  totalWrong_ += t.wrong;
}

void Reporter::progress(const std::string& text) {
  std::printf("# %s\n", text.c_str());
  std::fflush(stdout);
}

void Reporter::algoTable(Coll c, const std::vector<AlgoRow>& rows, const std::vector<std::string>& names) {
  std::vector<size_t> cols;  // the algorithms that run at least one call of this table
  for (size_t k = 0; k < names.size(); ++k)
    for (const AlgoRow& ar : rows)
      if (ar.row.coll == c && ar.cells[k]) {
        cols.push_back(k);
        break;
      }
  const auto cellWidth = [&](size_t k) {
    return static_cast<int>(std::max<size_t>(names[k].size(), 8) + 1);
  };
  int fastestWidth = 7;
  for (size_t k : cols) fastestWidth = std::max(fastestWidth, static_cast<int>(names[k].size()));
  const bool mpi = opt_.baselineMpi;

  std::printf(
      "#\n# %s: out-of-place busbw (GB/s) per algorithm; * the tuner's pick, - not run by "
      "that algorithm\n",
      collName(c));
  std::string l1 = lead("size", "count", "type", "redop", "root");
  std::string l2 = lead("(B)", "(elements)", "", "", "");
  for (size_t k : cols) {
    l1 += "  " + pad(names[k] + " ", cellWidth(k));
    l2 += "  " + pad("(GB/s) ", cellWidth(k));
  }
  if (mpi) {
    l1 += "  " + pad("mpi ", 9);
    l2 += "  " + pad("(GB/s) ", 9);
  }
  l1 += "  " + pad("fastest", fastestWidth) + "  " + pad("agree", 5) + "  " +
        pad("pick/best", 9) + "  " + pad("#wrong", 6);
  for (std::string* l : {&l1, &l2}) {
    (*l)[0] = '#';
    l->erase(l->find_last_not_of(' ') + 1);
    std::printf("%s\n", l->c_str());
  }

  int nrows = 0, agreed = 0, ratioCount = 0;
  double ratioSum = 0;
  uint64_t wrong = 0;
  bool checked = false;
  std::vector<int> wins(names.size(), 0);
  for (const AlgoRow& ar : rows) {
    if (ar.row.coll != c) continue;
    const Row& r = ar.row;
    ++nrows;
    std::optional<size_t> best, pick;
    int64_t rowWrong = -1;
    for (size_t k = 0; k < names.size(); ++k) {
      if (ar.pick != nullptr && names[k] == ar.pick) pick = k;
      if (!ar.cells[k]) continue;
      if (!best || ar.cells[k]->timeUs < ar.cells[*best]->timeUs) best = k;
      if (ar.cells[k]->wrong >= 0) rowWrong = std::max<int64_t>(rowWrong, 0) + ar.cells[k]->wrong;
    }
    const bool pickRan = pick && ar.cells[*pick];
    double pickOverBest = kNaN;
    if (best) {
      ++wins[*best];
      if (pickRan) {
        pickOverBest = ar.cells[*pick]->busbw / ar.cells[*best]->busbw;
        if (*pick == *best) ++agreed;
      }
    }
    if (std::isfinite(pickOverBest)) {
      ratioSum += pickOverBest;
      ++ratioCount;
    }
    if (rowWrong >= 0) {
      checked = true;
      wrong += static_cast<uint64_t>(rowWrong);
    }

    char rootStr[16], sizeStr[24], countStr[24];
    std::snprintf(rootStr, sizeof rootStr, "%d", r.root);
    std::snprintf(sizeStr, sizeof sizeStr, "%zu", r.bytes);
    std::snprintf(countStr, sizeof countStr, "%zu", r.count);
    std::string line = lead(sizeStr, countStr, typeInfo(r.type).name,
                            collHasOp(r.coll) ? opName(r.op) : "none", rootStr);
    for (size_t k : cols) {
      const std::string cell =
          ar.cells[k] ? fmtBw(ar.cells[k]->busbw) + (pick && *pick == k ? "*" : " ") : "- ";
      line += "  " + pad(cell, cellWidth(k));
    }
    if (mpi) line += "  " + pad(fmtBw(r.place[0].mpiBusbw) + " ", 9);
    line += "  " + pad(best ? names[*best] : "n/a", fastestWidth) + "  " +
            pad(!best || !pickRan ? "n/a"
                : *pick == *best  ? "yes"
                                  : "no",
                5) +
            "  " + pad(fmtFixed(pickOverBest), 9) + "  " +
            pad(rowWrong < 0 ? "N/A" : std::to_string(rowWrong), 6);
    std::printf("%s\n", line.c_str());

    for (size_t k = 0; k < names.size(); ++k) {
      if (!ar.cells[k]) continue;
      Row rec = r;
      const Measurement& baseline = r.place[0];
      rec.place[0] = *ar.cells[k];
      rec.place[0].mpiTimeUs = baseline.mpiTimeUs;
      rec.place[0].mpiBusbw = baseline.mpiBusbw;
      rec.algo = names[k].c_str();
      const bool isPick = pick && *pick == k, isBest = best && *best == k;
      const std::string csvExtra =
          std::string(",") + (isPick ? "true" : "false") + "," + (isBest ? "true" : "false");
      const std::string jsonExtra = std::string(", \"tuner_pick\": ") +
                                    (isPick ? "true" : "false") +
                                    ", \"fastest\": " + (isBest ? "true" : "false");
      record(rec, false, rec.place[0].busbw / baseline.mpiBusbw, csvExtra.c_str(),
             jsonExtra.c_str());
    }
  }

  if (!checked)
    std::printf("# Wrong values         : not checked\n");
  else
    std::printf("# Wrong values         : %llu %s\n", static_cast<unsigned long long>(wrong),
                wrong == 0 ? "OK" : "FAILED");
  const double avgRatio = ratioCount > 0 ? ratioSum / ratioCount : kNaN;
  std::printf("# Tuner's pick fastest : %d of %d rows; its busbw averaged %s of the fastest's\n",
              agreed, nrows, fmtFixed(avgRatio, "%.3f").c_str());
  std::string tally;
  for (size_t k = 0; k < names.size(); ++k)
    if (wins[k] > 0)
      tally += (tally.empty() ? "" : ", ") + names[k] + " " + std::to_string(wins[k]);
  std::printf("# Fastest measured     : %s\n", tally.empty() ? "none" : tally.c_str());
  std::fflush(stdout);
  char b[512];
  std::snprintf(b, sizeof b,
                "    {\"collective\": \"%s\", \"wrong\": %s, \"rows\": %d, \"tuner_agreed\": %d, "
                "\"avg_pick_over_best\": %s}",
                collName(c), checked ? std::to_string(wrong).c_str() : "null", nrows, agreed,
                jsonNum(avgRatio).c_str());
  summaries_.push_back(b);
  totalWrong_ += wrong;
}

void Reporter::finish() {
  if (opt_.colls.size() > 1 && opt_.check)
    std::printf("#\n# Wrong values, all collectives: %llu %s\n",
                static_cast<unsigned long long>(totalWrong_), totalWrong_ == 0 ? "OK" : "FAILED");
  std::fflush(stdout);
  if (json_) {
    FILE* j = json_.get();
    std::fprintf(j, "\n  ],\n  \"summary\": [\n");
    for (size_t i = 0; i < summaries_.size(); ++i)
      std::fprintf(j, "%s%s\n", summaries_[i].c_str(), i + 1 < summaries_.size() ? "," : "");
    std::fprintf(j, "  ]\n}\n");
    std::fflush(j);
  }
  csv_.reset();
  json_.reset();
}

std::string Reporter::pad(const std::string& s, int width) {
  return std::string(
             s.size() < static_cast<size_t>(width) ? static_cast<size_t>(width) - s.size() : 0,
             ' ') +
         s;
}

std::string Reporter::lead(const std::string& size, const std::string& count,
                           const std::string& type, const std::string& redop,
                           const std::string& root) {
  return pad(size, 12) + "  " + pad(count, 12) + "  " + pad(type, 8) + "  " + pad(redop, 6) +
         "  " + pad(root, 6);
}

std::string Reporter::place(const std::string& time, const std::string& algbw,
                            const std::string& busbw, const std::string& wrong) {
  return "  " + pad(time, 9) + "  " + pad(algbw, 7) + "  " + pad(busbw, 7) + "  " + pad(wrong, 6);
}

std::string Reporter::mpiCols(const std::string& time, const std::string& busbw,
                              const std::string& ratio) {
  return "  " + pad(time, 9) + "  " + pad(busbw, 7) + "  " + pad(ratio, 6);
}

void Reporter::record(const Row& r, bool inPlace, double ratio, const char* extraCsv,
                      const char* extraJson) {
  const Measurement& m = r.place[inPlace ? 1 : 0];
  const char* algo = r.algo != nullptr ? r.algo : "";
  const char* redop = collHasOp(r.coll) ? opName(r.op) : "none";
  const char* placement = inPlace ? "in-place" : "out-of-place";
  const char* type = typeInfo(r.type).name;
  if (csv_) {
    std::fprintf(csv_.get(), "%s,%d,%s,%s,%s,%d,%zu,%zu,%zu,%s,%s,%s,%s,%s,%s,%s,%s,%s%s\n",
                 collName(r.coll), nranks_, launch_, type, redop, r.root, r.bytes, r.count,
                 r.rankCount, placement, csvNum(m.timeUs).c_str(), csvNum(m.algbw).c_str(),
                 csvNum(m.busbw).c_str(), m.wrong < 0 ? "" : std::to_string(m.wrong).c_str(),
                 csvNum(m.mpiTimeUs).c_str(), csvNum(m.mpiBusbw).c_str(), csvNum(ratio).c_str(),
                 algo, extraCsv);
    std::fflush(csv_.get());
  }
  if (json_) {
    std::fprintf(
        json_.get(),
        "%s\n    {\"collective\": \"%s\", \"nranks\": %d, \"type\": \"%s\", "
        "\"redop\": \"%s\", \"root\": %d, \"size_bytes\": %zu, \"count\": %zu, "
        "\"rank_count\": %zu, \"placement\": \"%s\", \"time_us\": %s, "
        "\"algbw_gbps\": %s, \"busbw_gbps\": %s, \"wrong\": %s, \"mpi_time_us\": %s, "
        "\"mpi_busbw_gbps\": %s, \"busbw_ratio\": %s, \"algo\": %s%s}",
        firstRecord_ ? "" : ",", collName(r.coll), nranks_, type, redop, r.root, r.bytes, r.count,
        r.rankCount, placement, jsonNum(m.timeUs).c_str(), jsonNum(m.algbw).c_str(),
        jsonNum(m.busbw).c_str(), m.wrong < 0 ? "null" : std::to_string(m.wrong).c_str(),
        jsonNum(m.mpiTimeUs).c_str(), jsonNum(m.mpiBusbw).c_str(), jsonNum(ratio).c_str(),
        r.algo != nullptr ? jsonString(r.algo).c_str() : "null", extraJson);
    std::fflush(json_.get());
    firstRecord_ = false;
  }
}

}  // namespace nodus_perf
