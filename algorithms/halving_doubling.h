#pragma once
#include <bit>

#include "algorithms/algorithm.h"
#include "algorithms/plan_builder.h"
namespace nodus {
extern const Algorithm kHalvingDoublingAlgorithm;

// The shape of the exchange, as built and as its cost formula walks it.
namespace halving {
struct Fold {
  int p, pp, r;  // ranks, largest power of two <= p, p - pp
  explicit Fold(int nranks)
      : p(nranks), pp(static_cast<int>(std::bit_floor(static_cast<unsigned>(nranks)))), r(nranks - pp) {}
  // Virtual rank of a real rank, -1 for the even rank of a pair.
  int virt(int q) const { return q < 2 * r ? (q % 2 ? q / 2 : -1) : q - r; }
  int real(int v) const { return v < r ? 2 * v + 1 : v + r; }
  // Real ranks a virtual rank stands for: [first, first + size).
  int firstReal(int v) const { return v < r ? 2 * v : v + r; }
  int realCount(int v) const { return v < r ? 2 : 1; }
};

// The order of the exchanges. Step s (0 .. log2(pp)-1) of the halving
// splits the rank's range of segments in two halves of half(s) segments and
// trades one of them with the virtual rank that differs in bit(s).
// Near first (AllReduce): bit 0 first, so the largest half goes to the
// nearest partner (ranks of one host or leaf are numbered together) and the
// farthest exchange moves the least; a rank ends with segment bitreverse(v),
// which the doubling retraces. Far first (ReduceScatter): the top bit first,
// so that rank v ends with segment v, its own block.
struct Order {
  int pp;
  bool nearFirst;
  int bit(int s) const { return nearFirst ? 1 << s : pp >> (s + 1); }
  int half(int s) const { return pp >> (s + 1); }
  int steps() const { return std::countr_zero(static_cast<unsigned>(pp)); }
  // The first segment of virtual rank v's range before step s.
  int base(int v, int s) const {
    int b = 0;
    for (int i = 0; i < s; ++i)
      if (v & bit(i)) b += half(i);
    return b;
  }
};
}  // namespace halving
}  // namespace nodus
