#include "tune/tuner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "algorithms/direct.h"
#include "base/params.h"

namespace nodus {

// Intra-host constants measured on this project's 2-core VMs over shm with
// nodus-perf (-a all) and the default 128 KiB slices: a step costs about
// 0.6 us of handshake, a pipelined slot copy moves about 10 GB/s per rank, a
// reduction about 12 GB/s.
constexpr double kMeasuredSliceBytes = 128 << 10;

CostModel CostModel::of(const PlanContext& ctx) {
  CostModel m;
  m.intraAlphaUs = 0.6;
  m.intraBetaUsPerByte = 1.0 / 10000.0;
  m.gammaUsPerByte = 1.0 / 12000.0;
  // What a smaller slice costs: 2 ranks, AllReduce and AllGather of 64 KiB-
  // 4 MiB, NODUS_CHUNK_BYTES=16K/32K/64K against the 128 KiB slot in one
  // command, 0.56-0.77 us more per extra slice (nothing smaller was faster).
  m.intraSliceUs = 0.6;
  const Topology* t = ctx.topo;
  if (t != nullptr && t->oversubscribed) {
    // No rank polls: a hand-off is a yield to the rank that waits or a
    // futex wake. nodus-perf -a all --rounds 3 on 2 cores (AllGather and
    // AllReduce, 4 KiB-4 MiB, best of two runs): the ring's steps and
    // halving-doubling's rounds cost 2.0-3.3 us each on 4 and 8 ranks (8 B
    // AllReduce on 4 ranks: ring 8.8 us for 6 steps, halving-doubling 9.1
    // for 4). The 15 us this was before priced the ring AllGather 2x over
    // measurement at 32-128 KiB and handed those sizes to Bruck (pick/best
    // 0.30-0.77).
    m.intraAlphaUs = 2.5;
    // 4 ranks on 2 cores, measured as above: 2.6-3.8 us per extra slice.
    m.intraSliceUs = 3.0;
    // Ranks that share a core share its copies and reductions where they
    // all work at once (busyShare): the ring AllGather moved 6.2 GB/s a
    // rank on 4 ranks and 1.6 on 8 (4 MiB), 10 with a core each.
    m.busyShare = std::max(1.0, t->coreShare);
    // A ring step hands a slice to one neighbour: 2.6-2.7 us on 8 ranks as
    // on 4 (AllReduce and AllGather, 256 B-2 KiB, medians of 8 runs of -a
    // all --rounds 3, 2026-12-04). A round in which every rank exchanges at once ends
    // only when every rank has run: halving-doubling 3.8 us and Bruck 5.4 on
    // 8 ranks, 1.7 and 2.9 on 4. The square root of the ranks a core over 2
    // (1 on 4 ranks, 1.41 on 8) puts each pick of those runs right: 8 ranks,
    // AllReduce of 8 KiB to halving-doubling (direct 46.1 us, 28.9), and
    // AllGather of 32 KiB still to Bruck, 64 KiB to the ring.
    m.exchangeAlphaShare = std::sqrt(std::max(1.0, t->coreShare / 2.0));
  }
  // The 10 GB/s above already pays the per-slice work of 128 KiB slices.
  m.intraLinkBetaUsPerByte = m.intraBetaUsPerByte;
  const double slice = ctx.sliceBytes ? static_cast<double>(ctx.sliceBytes) : kMeasuredSliceBytes;
  m.intraBetaUsPerByte += m.intraSliceUs * (1.0 / slice - 1.0 / kMeasuredSliceBytes);
  // Halving-doubling against the ring on one host: its sends cost 1.5x a
  // fused ring step's bytes.
  m.passUsPerByte = 0.5 * m.intraBetaUsPerByte;
  if (ctx.gammaUsPerByte >= 0) m.gammaUsPerByte = ctx.gammaUsPerByte;
  if (ctx.passUsPerByte >= 0) m.passUsPerByte = ctx.passUsPerByte;
  m.alphaUs = m.intraAlphaUs;
  m.betaUsPerByte = m.intraBetaUsPerByte;
  m.streamHandoffUs = m.intraAlphaUs;
  if (t == nullptr) return m;
  m.topo = t;
  if (t->oversubscribed) {
    // Except along a chain: measured with nodus-perf -a all (back-to-back
    // calls, 2 cores), an 8 B Broadcast took 2.6 us on 4 ranks and 5.3 us on
    // 8, about 0.75 us per hop, while the tree took 7.4 and 26 us.
    m.streamHandoffUs = 0.75;
  }
  const LinkSpec& link = t->fabric.link;
  // A message on the fabric pays the latency of each link it crosses plus
  // about a microsecond of software on each side.
  m.hopUs = link.latencyUs;
  m.interAlphaUs = m.softwareUs + link.latencyUs;
  // A connection has `slots` slices in flight, and a slice holds its slot
  // for the link's latency and its transfer: in small slices a link runs
  // below its bandwidth once the slots no longer cover its latency.
  m.linkBetaUsPerByte = 1.0 / (link.bandwidthGBs * 1000.0);
  m.windowSliceBytes = slice;
  m.windowSlots = ctx.slots;
  m.interBetaUsPerByte = m.routeBeta(m.interAlphaUs);
  if (t->hosts.size() > 1) {
    m.alphaUs = m.interAlphaUs;
    m.betaUsPerByte = m.interBetaUsPerByte;
  }
  if (t->fabric.kind == FabricKind::FatTree && !t->fabric.oversubscription.empty()) {
    int minLeaf = INT32_MAX, maxLeaf = -1;
    for (const HostCoord& c : t->coords) minLeaf = std::min(minLeaf, c[0]), maxLeaf = std::max(maxLeaf, c[0]);
    if (maxLeaf > minLeaf) m.uplinkSharing = t->fabric.oversubscription[0];
  }
  return m;
}

double CostModel::alphaBetween(int a, int b) const {
  if (topo == nullptr || a == b) return alphaUs;
  const int h = topo->hops(a, b);
  return h == 0 ? intraAlphaUs : softwareUs + h * hopUs;
}

double CostModel::streamAlphaBetween(int a, int b) const {
  if (a == b) return alphaUs;
  return topo == nullptr || topo->hops(a, b) == 0 ? streamHandoffUs : alphaBetween(a, b);
}

double CostModel::betaBetween(int a, int b) const {
  if (topo == nullptr || a == b) return betaUsPerByte;
  return topo->hops(a, b) == 0 ? intraBetaUsPerByte : interBetaUsPerByte;
}

double CostModel::busyBetaBetween(int a, int b) const {
  const bool intra = topo == nullptr || a == b || topo->hops(a, b) == 0;
  return betaBetween(a, b) * (intra ? busyShare : 1.0);
}

bool CostModel::crossesLeaf(int a, int b) const {
  if (topo == nullptr || topo->fabric.kind != FabricKind::FatTree) return false;
  const auto& ca = topo->coords[static_cast<size_t>(topo->hostOf[static_cast<size_t>(a)])];
  const auto& cb = topo->coords[static_cast<size_t>(topo->hostOf[static_cast<size_t>(b)])];
  return ca[0] != cb[0];
}

namespace {

bool parseBytes(const std::string& s, uint64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const unsigned long long v = strtoull(s.c_str(), &end, 10);
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ULL << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ULL << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ULL << 30, ++end;
  if (*end == 'B') ++end;
  if (end == s.c_str() || *end != '\0') return false;
  *out = v * mult;
  return true;
}

int collectiveByName(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast,
                       Collective::Reduce}) {
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
        if (!lo.empty() && !parseBytes(lo, &r.lo)) return bad(entry, "the range's lower end is not a size");
        if (!hi.empty() && !parseBytes(hi, &r.hi)) return bad(entry, "the range's upper end is not a size");
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
  return (k.coll == Collective::AllGather || k.coll == Collective::ReduceScatter) ? b * static_cast<uint64_t>(k.nranks) : b;
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
        const double t = a->cost(key, at, CostModel::of(at));
        if (t < e.us * (1 - 1e-9)) e.us = t, e.sliceBytes = slice, e.channels = channelsFor(*a, key, at);
        if (!trySmaller || !a->slicesPriced || slice / 2 / 64 * 64 < std::max<uint64_t>(kMinSliceBytes, key.typeSize))
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

void contextFromEnvironment(PlanContext* ctx, int64_t transportSlot) {
  const int64_t env = param::kSlotBytes.get();
  const int64_t slot =
      std::max<int64_t>(64, env != 0 ? env : transportSlot > 0 ? transportSlot : kDefaultSlotBytes) / 64 * 64;
  const int64_t chunk = param::kChunkBytes.get();
  ctx->sliceForced = chunk > 0;
  ctx->sliceBytes = static_cast<uint64_t>(chunk > 0 ? std::min(slot, chunk) : slot);
  ctx->slots = static_cast<uint32_t>(std::clamp<int64_t>(param::kSlots.get(), 2, 64));  // CommConfig's range
  const int64_t round = param::kRoundSlices.get();
  ctx->roundSlices = static_cast<uint32_t>(round > 0 ? round : std::max<uint32_t>(1, ctx->slots / 2));
  const int64_t direct = param::kDirectMaxBytes.get();
  ctx->directMaxBytes = direct < 0 ? kDirectMaxAuto : static_cast<uint64_t>(direct);
  const int64_t channels = param::kChannels.get();
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
