#include "partners.h"

namespace nodus_torch {

std::vector<int> partners(int nranks, int rank) {
  const int n = nranks + (nranks % 2);  // odd: a phantom rank; its partner sits out
  std::vector<int> out;
  for (int k = 0; k < n - 1; ++k) {
    int q;
    if (rank == n - 1) q = k;
    else if (rank == k) q = n - 1;
    else q = ((2 * k - rank) % (n - 1) + (n - 1)) % (n - 1);
    out.push_back(q < nranks ? q : -1);
  }
  return out;
}

}  // namespace nodus_torch
