#include "tune/tuner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "algorithms/direct.h"
#include "base/settings.h"
#include "base/size.h"

namespace nodus {

namespace {

int collectiveByName(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast,
                       Collective::Reduce, Collective::AllToAll, Collective::AllToAllV, Collective::Gather,
                       Collective::Scatter, Collective::AllGatherV, Collective::ReduceScatterV}) {
    std::string name = collectiveName(c);
    for (char& ch : name) ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
    if (s == name) return static_cast<int>(c);
  }
  return s == "*" ? -2 : -3;  // -2: every collective; -3: not a collective
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1) out.push_back(s.substr(start, at - start));
  out.push_back(s.substr(start));
  return out;
}

std::string knownAlgorithms() {
  std::string names;
  for (const Algorithm* a : algorithms()) names += std::string(names.empty() ? "" : ", ") + a->name;
  return names;
}

}  // namespace

Status AlgoSpec::parse(const std::string& text, AlgoSpec* out) {
  AlgoSpec spec;
  spec.text = text;
  auto bad = [&](const std::string& part, const char* why) {
    return makeError(nodusInvalidArgument, "NODUS_ALGO=%s: '%s': %s (form: [collective:][lo-hi:]algorithm,...;...; "
                     "algorithms: %s)", text.c_str(), part.c_str(), why, knownAlgorithms().c_str());
  };
  for (const std::string& rule : split(text, ';')) {
    if (rule.empty()) continue;
    std::string body = rule;
    int coll = -1;
    const size_t colon = rule.find(':');
    if (colon != std::string::npos) {
      const int c = collectiveByName(rule.substr(0, colon));
      if (c != -3) {
        coll = c == -2 ? -1 : c;
        body = rule.substr(colon + 1);
      }
    }
    for (const std::string& entry : split(body, ',')) {
      AlgoRule r;
      r.coll = coll;
      std::string name = entry;
      const size_t c = entry.find(':');
      if (c != std::string::npos) {
        const std::string range = entry.substr(0, c);
        name = entry.substr(c + 1);
        const size_t dash = range.find('-');
        if (dash == std::string::npos) return bad(entry, "a size range is lo-hi, e.g. 0-64K or 1M-");
        const std::string lo = range.substr(0, dash), hi = range.substr(dash + 1);
        if (!lo.empty() && !parseUnsignedSize(lo, &r.lo)) return bad(entry, "the range's lower end is not a size");
        if (!hi.empty() && !parseUnsignedSize(hi, &r.hi)) return bad(entry, "the range's upper end is not a size");
        if (r.lo >= r.hi) return bad(entry, "the range is empty");
      }
      r.algo = findAlgorithm(name.c_str());
      if (r.algo == nullptr) return bad(entry, "names no algorithm");
      spec.rules.push_back(r);
    }
  }
  *out = std::move(spec);
  return Status::ok();
}

const Algorithm* AlgoSpec::forcedFor(const PlanKey& key) const {
  const uint64_t bytes = callBytes(key);
  for (const AlgoRule& r : rules)
    if ((r.coll < 0 || r.coll == static_cast<int>(key.coll)) && bytes >= r.lo && bytes < r.hi) return r.algo;
  return nullptr;
}

uint64_t callBytes(const PlanKey& k) {
  const uint64_t b = k.count * k.typeSize;
  switch (k.coll) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::Gather:
    case Collective::Scatter: return b * static_cast<uint64_t>(k.nranks);
    case Collective::AllGatherV:
    case Collective::ReduceScatterV: {
      uint64_t all = 0;
      for (int j = 0; j < k.nranks; ++j) all += k.blocks[static_cast<size_t>(j)];
      return all * k.typeSize;
    }
    case Collective::AllToAllV: return 0;  // a rank's sizes are its own (PlanKey::blocks)
    default: return b;
  }
}

std::string formatBytes(uint64_t b) {
  char buf[32];
  if (b >= (1 << 20) && b % (1 << 20) == 0) snprintf(buf, sizeof(buf), "%lluM", static_cast<unsigned long long>(b >> 20));
  else if (b >= 1024 && b % 1024 == 0) snprintf(buf, sizeof(buf), "%lluK", static_cast<unsigned long long>(b >> 10));
  else snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(b));
  return buf;
}

std::string Choice::explain() const {
  std::string s;
  for (const Estimate& e : estimates) {
    char buf[112];
    char ch[16] = "";
    if (e.channels > 1) snprintf(ch, sizeof(ch), "x%uch", e.channels);
    snprintf(buf, sizeof(buf), "%s%s %.3gus/%s%s%s", s.empty() ? "" : ", ", e.algo->name, e.us,
             formatBytes(e.sliceBytes).c_str(), ch, e.algo == algo ? "*" : "");
    s += buf;
  }
  return s + (forced ? " (forced by NODUS_ALGO)" : "");
}

Status chooseAlgorithm(const PlanKey& key, const PlanContext& ctx, const AlgoSpec& spec, Choice* out) {
  Choice c;
  double best = std::numeric_limits<double>::infinity();
  // Ranks that share cores do not overlap one slice's hand-off with the
  // next one's copy, which the pipelined costs assume: 4 ranks on 2 cores,
  // AllReduce of 256 KiB, 78-87 us in 128 KiB slices, 110-145 in 16 KiB
  // (the costs said 16 KiB was faster). They keep the slot.
  const bool trySmaller = !ctx.sliceForced && !(ctx.topo != nullptr && ctx.topo->oversubscribed);
  for (const Algorithm* a : algorithms()) {
    if (!a->supports(key, ctx)) continue;
    Estimate e{a, std::numeric_limits<double>::infinity(), ctx.sliceBytes, 1};
    // An algorithm without a formula is never picked, but can be forced (at the slot).
    const CostFormula* formula = costFormulaFor(a);
    // Channels 1, 2, 4, ... up to the algorithm's most (only NODUS_CHANNELS
    // when forced); for each, the slot, then halves of it: the pair that
    // prices lowest, fewer channels and the larger slice on a tie.
    const uint32_t most = std::max<uint32_t>(1, a->maxChannels);
    for (uint32_t ch = ctx.channelsForced ? channelsFor(*a, ctx) : 1; ch <= most; ch *= 2) {
      // Halves stay whole cache lines (a slot that is not a power of two).
      for (uint64_t slice = ctx.sliceBytes;; slice = slice / 2 / 64 * 64) {
        PlanContext at = ctx;
        at.sliceBytes = slice;
        at.channels = ch;
        const double t = formula != nullptr ? formula->cost(key, at, CostModel::of(at)) : e.us;
        if (t < e.us * (1 - 1e-9)) e.us = t, e.sliceBytes = slice, e.channels = channelsFor(*a, key, at);
        if (!trySmaller || formula == nullptr || !formula->slicesPriced || slice / 2 / 64 * 64 < std::max<uint64_t>(kMinSliceBytes, key.typeSize))
          break;
      }
      if (ctx.channelsForced) break;
    }
    c.estimates.push_back(e);
    // The single-round direct exchange stays below its size limit unless forced.
    if (a == &kDirectAlgorithm && key.count * key.typeSize > directMaxFor(ctx)) continue;
    if (e.us < best) best = e.us, c.algo = a, c.sliceBytes = e.sliceBytes, c.channels = e.channels;
  }
  if (const Algorithm* f = spec.forcedFor(key); f != nullptr && f->supports(key, ctx)) {
    c.algo = f;
    c.forced = true;
    c.sliceBytes = c.sliceFor(f);
    c.channels = c.channelsFor(f);
  }
  if (c.algo == nullptr) return makeError(nodusInternalError, "no algorithm implements %s", collectiveName(key.coll));
  *out = std::move(c);
  return Status::ok();
}

void contextFromSettings(const Settings& settings, PlanContext* ctx, int64_t transportSlot) {
  const int64_t env = settings.get(param::kSlotBytes);
  const int64_t slot =
      std::max<int64_t>(64, env != 0 ? env : transportSlot > 0 ? transportSlot : kDefaultSlotBytes) / 64 * 64;
  const int64_t chunk = settings.get(param::kSliceBytes);
  ctx->sliceForced = chunk > 0;
  ctx->sliceBytes = static_cast<uint64_t>(chunk > 0 ? std::min(slot, chunk) : slot);
  ctx->slots = static_cast<uint32_t>(std::clamp<int64_t>(settings.get(param::kSlots), 2, 64));
  const int64_t round = settings.get(param::kRoundSlices);
  ctx->roundSlices = static_cast<uint32_t>(round > 0 ? round : std::max<uint32_t>(1, ctx->slots / 2));
  const int64_t direct = settings.get(param::kDirectMaxBytes);
  ctx->directMaxBytes = direct < 0 ? kDirectMaxAuto : static_cast<uint64_t>(direct);
  const int64_t channels = settings.get(param::kChannels);
  ctx->channelsForced = channels > 0;
  ctx->channels = static_cast<uint32_t>(std::clamp<int64_t>(channels, 1, kMaxChannels));
}

uint64_t Choice::sliceFor(const Algorithm* a) const {
  for (const Estimate& e : estimates)
    if (e.algo == a) return e.sliceBytes;
  return 0;
}

uint32_t Choice::channelsFor(const Algorithm* a) const {
  for (const Estimate& e : estimates)
    if (e.algo == a) return e.channels;
  return 1;
}

}  // namespace nodus
