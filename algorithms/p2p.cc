// Point-to-point: one send or one receive, sliced through the connection.
#include "algorithms/p2p.h"

#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::Send || k.coll == Collective::Recv;
}

Status build(const PlanKey& k, const PlanContext&, Plan& plan) {
  PlanBuilder b(plan);
  if (k.coll == Collective::Send)
    b.send(k.root, {Buf::Send, 0}, k.count);
  else
    b.recv(k.root, {Buf::Recv, 0}, k.count);
  return Status::ok();
}

}  // namespace

const Algorithm kP2pAlgorithm = {"p2p", "Send / Recv between two ranks.", supports, build};

}  // namespace nodus
