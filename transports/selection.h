// Which transport serves each pair of ranks, and connecting them: the part
// of a communicator's set-up that is the transports' business. The
// communicator gathers a RankReach from every rank (in its one exchange
// before connecting), and every rank then decides alike, with no further
// exchange, what each pair uses and which transports the job connects.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/status.h"
#include "transports/registry.h"
#include "transports/transport.h"

namespace nodus {

// What the transports must know of a rank to choose one for it.
struct RankReach {
  char machine[80] = {};      // the machine transports see: kernel hostname and boot id
  uint64_t processToken = 0;  // random per process: equal tokens, one process
  uint32_t usable = 0;        // bit t: transportTable()[t] can run there (TransportEntry::usable)
};

// The table index NODUS_TRANSPORT names (-1: none forced); an unknown name fails.
Status forcedTransport(const std::string& name, int* out);

// The transports this process can run: bit t for each that has no usable()
// or says yes (only transports `forced` leaves as candidates are probed, and
// only when `probe`: where every rank is on one machine no probe matters).
// why[t] says why an entry cannot run.
uint32_t usableTransports(const Settings& settings, int forced, bool probe, std::vector<std::string>* why);

struct TransportChoice {
  std::vector<int> peerTransport;                  // table index per peer; -1 for the rank itself
  std::vector<std::vector<int>> peersByTransport;  // this rank's peers, per table entry
  // Bit t: some pair of the communicator may use transport t. Every rank
  // connects each of them, in table order, with or without peers of its own,
  // so that their bootstrap exchanges match. Computed alike on every rank
  // from what all reported; it may hold a transport no pair ends up using
  // (connected with no peers anywhere), never miss one.
  uint32_t used = 0;
};

// Per peer: the forced transport, else the first in the table that reaches
// it and that both ends can run. `hosts` names the ranks in errors;
// `inProcess`: ranks of one process are threads of it (nodusCommInitAll).
Status chooseTransports(int rank, std::span<const RankReach> ranks, const std::vector<std::string>& hosts,
                        bool inProcess, int forced, const std::vector<std::string>& unusableWhy, TransportChoice* out);

// The connected transports of one rank.
struct ConnectedTransports {
  // This rank's doorbell unless a transport provides one (shm); made before
  // the transports, which ring it, and destroyed after them.
  std::unique_ptr<Doorbell> localBell;
  std::vector<std::unique_ptr<Transport>> transports;  // indexed like the table; null: not connected
  Connections conns;                                   // merged, per peer
  std::string names;                                   // "shm(1)+tcp(2)", for the INFO line
  // Takes the connections down before the transports, in reverse table
  // order: later transports may ring a doorbell an earlier one owns.
  void close();
  ~ConnectedTransports() { close(); }
};

// Connects every transport in `choice.used`, in table order, each with its
// peers (req.peers is set per transport; req.bell is made here).
Status connectTransports(ConnectRequest req, const TransportChoice& choice, ConnectedTransports* out);

}  // namespace nodus
