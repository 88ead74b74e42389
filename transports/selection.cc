#include "transports/selection.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "base/log.h"

namespace nodus {

Status forcedTransport(const std::string& name, int* out) {
  *out = -1;
  if (name.empty()) return Status::ok();
  std::string known;
  const auto table = transportTable();
  for (size_t t = 0; t < table.size(); ++t) {
    if (name == table[t].name) *out = static_cast<int>(t);
    if (!known.empty()) known.append(", ");
    known.append(table[t].name);
  }
  if (*out < 0) return makeError(nodusInvalidArgument, "NODUS_TRANSPORT=%s names no transport (%s)", name.c_str(), known.c_str());
  return Status::ok();
}

uint32_t usableTransports(const Settings& settings, int forced, bool probe, std::vector<std::string>* why) {
  const auto table = transportTable();
  why->assign(table.size(), std::string());
  if (!probe) return ~0u;
  uint32_t usable = 0;
  for (size_t t = 0; t < table.size(); ++t) {
    const TransportEntry& e = table[t];
    const bool candidate = forced < 0 || forced == static_cast<int>(t);
    if (e.usable == nullptr || (candidate && e.usable(settings, &(*why)[t]))) usable |= 1u << t;
  }
  return usable;
}

namespace {

bool sameMachine(const RankReach& a, const RankReach& b) { return strncmp(a.machine, b.machine, sizeof(a.machine)) == 0; }

// The transport a pair placed like this, with these transports usable at
// both ends, uses: -1 if none reaches it.
int pick(const PeerPlacement& where, uint32_t bothUsable, int forced, uint32_t* unusable) {
  const auto table = transportTable();
  for (size_t t = 0; t < table.size(); ++t) {
    if ((forced >= 0 && forced != static_cast<int>(t)) || !table[t].reaches(where)) continue;
    if ((bothUsable & (1u << t)) == 0) {
      if (unusable) *unusable |= 1u << t;
      continue;
    }
    return static_cast<int>(t);
  }
  return -1;
}

// Every transport some pair may use, from the kinds of pairs present (same
// process, same machine, different machines) and the usable sets present.
uint32_t usedByAnyPair(std::span<const RankReach> ranks, bool inProcess, int forced) {
  std::vector<uint32_t> masks;
  for (const RankReach& r : ranks)
    if (std::find(masks.begin(), masks.end(), r.usable) == masks.end()) masks.push_back(r.usable);
  // Per machine, its first two processes and whether one of them holds two ranks.
  struct Machine {
    uint64_t procs[2] = {0, 0};
    int nprocs = 0;
    bool twoInOne = false;
  };
  std::unordered_map<std::string, Machine> machines;
  for (const RankReach& r : ranks) {
    Machine& m = machines[std::string(r.machine, strnlen(r.machine, sizeof(r.machine)))];
    bool seen = false;
    for (int i = 0; i < m.nprocs; ++i) seen |= m.procs[i] == r.processToken;
    if (seen) m.twoInOne = true;
    else if (m.nprocs < 2) m.procs[m.nprocs++] = r.processToken;
  }
  bool sameProcess = false, sameHost = false;
  for (const auto& [name, m] : machines) {
    sameProcess |= inProcess && m.twoInOne;
    // Two ranks of one process that are not its threads (inProcess false)
    // still share the machine, as two processes do.
    sameHost |= m.nprocs > 1 || (!inProcess && m.twoInOne);
  }
  const bool remote = machines.size() > 1;
  uint32_t used = 0;
  auto add = [&](const PeerPlacement& where) {
    for (uint32_t a : masks)
      for (uint32_t b : masks)
        if (const int t = pick(where, a & b, forced, nullptr); t >= 0) used |= 1u << t;
  };
  if (sameProcess) add(PeerPlacement{true, true});
  if (sameHost) add(PeerPlacement{false, true});
  if (remote) add(PeerPlacement{false, false});
  return used;
}

}  // namespace

Status chooseTransports(int rank, std::span<const RankReach> ranks, const std::vector<std::string>& hosts,
                        bool inProcess, int forced, const std::vector<std::string>& unusableWhy, TransportChoice* out) {
  const auto table = transportTable();
  const int nranks = static_cast<int>(ranks.size());
  const RankReach& me = ranks[static_cast<size_t>(rank)];
  out->peerTransport.assign(static_cast<size_t>(nranks), -1);
  out->peersByTransport.assign(table.size(), {});
  uint32_t said = 0;  // transports said unusable once per communicator, then the next is tried
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    const RankReach& peer = ranks[static_cast<size_t>(r)];
    PeerPlacement where;
    where.sameHost = sameMachine(peer, me);
    where.sameProcess = inProcess && where.sameHost && peer.processToken == me.processToken;
    uint32_t unusable = 0;
    const int t = pick(where, me.usable & peer.usable, forced, &unusable);
    for (size_t u = 0; u < table.size(); ++u) {
      const uint32_t bit = 1u << u;
      if ((unusable & bit) == 0 || (said & bit) != 0) continue;
      said |= bit;
      NODUS_INFO(rank, "%s: not used for rank %d on %s%s%s; trying the next transport", table[u].name, r,
                 hosts[static_cast<size_t>(r)].c_str(), (me.usable & bit) == 0 ? ": " : " (it has no usable device)",
                 (me.usable & bit) == 0 ? unusableWhy[u].c_str() : "");
    }
    if (t < 0)
      return makeError(nodusInvalidUsage, "NODUS_TRANSPORT=%s cannot reach rank %d on host %s from rank %d on host %s%s%s",
                       forced >= 0 ? table[static_cast<size_t>(forced)].name : "", r, hosts[static_cast<size_t>(r)].c_str(),
                       rank, hosts[static_cast<size_t>(rank)].c_str(),
                       forced >= 0 && !unusableWhy[static_cast<size_t>(forced)].empty() ? ": " : "",
                       forced >= 0 ? unusableWhy[static_cast<size_t>(forced)].c_str() : "");
    out->peerTransport[static_cast<size_t>(r)] = t;
    out->peersByTransport[static_cast<size_t>(t)].push_back(r);
  }
  out->used = usedByAnyPair(ranks, inProcess, forced);
  // What this rank chose is in what every rank computed (a mismatch would
  // leave a pair's ends in different bootstrap exchanges).
  for (size_t t = 0; t < table.size(); ++t)
    if (!out->peersByTransport[t].empty() && (out->used & (1u << t)) == 0)
      return makeError(nodusInternalError, "transport %s chosen for a pair but not counted as used", table[t].name);
  return Status::ok();
}

void ConnectedTransports::close() {
  conns = Connections();
  while (!transports.empty()) transports.pop_back();
  localBell.reset();
}

Status connectTransports(ConnectRequest req, const TransportChoice& choice, ConnectedTransports* out) {
  const auto table = transportTable();
  out->localBell = std::make_unique<Doorbell>();
  req.bell = out->localBell.get();
  bool bellUsed = false;  // by a transport with peers, before any provided one
  Connections& conns = out->conns;
  conns.send.resize(static_cast<size_t>(req.nranks));
  conns.recv.resize(static_cast<size_t>(req.nranks));
  conns.peerDoorbells.assign(static_cast<size_t>(req.nranks), nullptr);
  out->transports.resize(table.size());
  for (size_t t = 0; t < table.size(); ++t) {
    if ((choice.used & (1u << t)) == 0) continue;
    out->transports[t] = table[t].make();
    req.peers = choice.peersByTransport[t];
    Connections c;
    NODUS_TRY(out->transports[t]->connect(req, c));
    if (c.doorbell != nullptr) {
      // Peers of the transports connected before rang the earlier doorbell.
      if (bellUsed)
        return makeError(nodusInternalError, "transport %s provides this rank's doorbell after others used another one",
                         table[t].name);
      req.bell = c.doorbell;
    }
    bellUsed |= !req.peers.empty();
    for (int peer : req.peers) {
      const size_t i = static_cast<size_t>(peer);
      conns.send[i] = std::move(c.send[i]);
      conns.recv[i] = std::move(c.recv[i]);
      if (i < c.peerDoorbells.size()) conns.peerDoorbells[i] = c.peerDoorbells[i];
    }
    if (!req.peers.empty()) {
      if (!out->names.empty()) out->names.push_back('+');
      out->names.append(table[t].name).append("(").append(std::to_string(req.peers.size())).append(")");
    }
  }
  conns.doorbell = req.bell;
  if (out->names.empty()) out->names = "none";
  return Status::ok();
}

}  // namespace nodus
