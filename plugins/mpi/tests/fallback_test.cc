// Calls nodus must leave to MPI, each for its reason, and calls with
// datatypes that nodus moves only after packing: every result is checked
// against values computed here, and (preloaded) every route and reason.
#include <algorithm>
#include <complex>
#include <string>
#include <vector>

#include "harness.h"
#include "values.h"

using harness::Harness;

namespace {

constexpr int kN = 6007;  // elements: above the test threshold for every type used

// Sums ints, or elements made of ints (a derived type).
void userSum(void* in, void* inout, int* len, MPI_Datatype* type) {
  int size = 0;
  PMPI_Type_size(*type, &size);
  const int n = *len * (size / static_cast<int>(sizeof(int)));
  const int* a = static_cast<const int*>(in);
  int* b = static_cast<int*>(inout);
  for (int i = 0; i < n; ++i) b[i] += a[i];
}

// Not commutative: MPI must apply it in rank order.
void userFirst(void* in, void* inout, int* len, MPI_Datatype*) {
  const int* a = static_cast<const int*>(in);
  int* b = static_cast<int*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = a[i];
}

class Test {
 public:
  explicit Test(Harness& h) : h_(h) {}

  void run() {
    reductionsLeftToMpi();
    derivedMoves();
    intercomm();
    selfComm();
  }

 private:
  int v(int rank, int i) const { return (i * 7 + rank * 3) % 11 - 5; }

  // One Allreduce (or Reduce) of kN ints (or whatever `count`/`type` say)
  // with a check of its route.
  template <class Call>
  void routed(int coll, Harness::Route want, const std::string& what, Call&& call) {
    const auto before = h_.counters(coll);
    const int rc = call();
    h_.check(rc == MPI_SUCCESS, "%s returned %d", what.c_str(), rc);
    h_.expectRoute(coll, before, want, what.c_str());
  }

  void reductionsLeftToMpi() {
    const int p = h_.size, me = h_.rank;
    std::vector<int> in(kN), out(kN);
    for (int i = 0; i < kN; ++i) in[i] = v(me, i);

    // User-defined ops, commutative and not.
    MPI_Op sum, first;
    MPI_Op_create(userSum, 1, &sum);
    MPI_Op_create(userFirst, 0, &first);
    routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_OP), "Allreduce with a user op",
           [&] { return MPI_Allreduce(in.data(), out.data(), kN, MPI_INT, sum, MPI_COMM_WORLD); });
    int bad = 0;
    for (int i = 0; i < kN; ++i) {
      int want = 0;
      for (int r = 0; r < p; ++r) want += v(r, i);
      bad += out[i] != want;
    }
    h_.check(bad == 0, "user-op Allreduce: %d wrong", bad);
    h_.digest(out.data(), out.size() * sizeof(int));
    routed(NODUS_MPI_REDUCE, Harness::toMpi(NODUS_MPI_FB_OP), "Reduce with a non-commutative user op",
           [&] { return MPI_Reduce(in.data(), out.data(), kN, MPI_INT, first, p - 1, MPI_COMM_WORLD); });
    if (me == p - 1) {
      bad = 0;
      for (int i = 0; i < kN; ++i) bad += out[i] != v(0, i);  // (((x0 o x1) o x2)...) keeps x0
      h_.check(bad == 0, "non-commutative Reduce: %d wrong", bad);
    }
    routed(NODUS_MPI_IALLREDUCE, Harness::toMpi(NODUS_MPI_FB_OP), "Iallreduce with a user op", [&] {
      MPI_Request r;
      const int rc = MPI_Iallreduce(in.data(), out.data(), kN, MPI_INT, sum, MPI_COMM_WORLD, &r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      return rc;
    });
    MPI_Op_free(&sum);
    MPI_Op_free(&first);

    // Predefined ops nodus lacks.
    for (MPI_Op op : {MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR}) {
      routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_OP), "Allreduce with a bitwise/logical op",
             [&] { return MPI_Allreduce(in.data(), out.data(), kN, MPI_INT, op, MPI_COMM_WORLD); });
      bad = 0;
      for (int i = 0; i < kN; ++i) {
        int want = v(0, i);
        for (int r = 1; r < p; ++r) {
          const int x = v(r, i);
          if (op == MPI_BAND) want &= x;
          else if (op == MPI_BOR) want |= x;
          else if (op == MPI_BXOR) want ^= x;
          else if (op == MPI_LAND) want = want && x;
          else if (op == MPI_LOR) want = want || x;
          else want = !want != !x;
        }
        if (r0(op)) want = want != 0;
        bad += out[i] != want;
      }
      h_.check(bad == 0, "bitwise/logical Allreduce: %d wrong", bad);
      h_.digest(out.data(), out.size() * sizeof(int));
    }

    // Types nodus cannot reduce exactly, or ops undefined for the type here.
    {
      std::vector<long double> a(kN), b(kN);
      for (int i = 0; i < kN; ++i) a[i] = v(me, i) * 0.5L;
      routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_DATATYPE), "Allreduce of MPI_LONG_DOUBLE",
             [&] { return MPI_Allreduce(a.data(), b.data(), kN, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD); });
      bad = 0;
      for (int i = 0; i < kN; ++i) {
        long double want = 0;
        for (int r = 0; r < p; ++r) want += v(r, i) * 0.5L;
        bad += b[i] != want;
      }
      h_.check(bad == 0, "long double Allreduce: %d wrong", bad);
    }
    {
      std::vector<short> a(kN), b(kN);
      for (int i = 0; i < kN; ++i) a[i] = static_cast<short>(v(me, i) * 1000);
      routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_DATATYPE), "Allreduce of MPI_SHORT",
             [&] { return MPI_Allreduce(a.data(), b.data(), kN, MPI_SHORT, MPI_SUM, MPI_COMM_WORLD); });
      bad = 0;
      for (int i = 0; i < kN; ++i) {
        int want = 0;
        for (int r = 0; r < p; ++r) want += v(r, i) * 1000;
        bad += b[i] != static_cast<short>(want);
      }
      h_.check(bad == 0, "short Allreduce: %d wrong", bad);
    }
    {
      std::vector<unsigned char> a(kN), b(kN);  // C _Bool is one byte here
      for (int i = 0; i < kN; ++i) a[i] = (i + me) % 3 == 0;
      routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_DATATYPE), "Allreduce of MPI_C_BOOL with LOR",
             [&] { return MPI_Allreduce(a.data(), b.data(), kN, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD); });
      bad = 0;
      for (int i = 0; i < kN; ++i) {
        bool want = false;
        for (int r = 0; r < p; ++r) want = want || (i + r) % 3 == 0;
        bad += (b[i] != 0) != want;
      }
      h_.check(bad == 0, "C_BOOL LOR Allreduce: %d wrong", bad);
    }
    {
      struct Pair {
        int value, rank;
      };
      std::vector<Pair> a(kN), b(kN);
      for (int i = 0; i < kN; ++i) a[i] = {v(me, i), me};
      routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_DATATYPE), "Allreduce of MPI_2INT with MAXLOC",
             [&] { return MPI_Allreduce(a.data(), b.data(), kN, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD); });
      bad = 0;
      for (int i = 0; i < kN; ++i) {
        Pair want{v(0, i), 0};
        for (int r = 1; r < p; ++r)
          if (v(r, i) > want.value) want = {v(r, i), r};
        bad += b[i].value != want.value || b[i].rank != want.rank;
      }
      h_.check(bad == 0, "MAXLOC Allreduce: %d wrong", bad);
    }
    {
      std::vector<unsigned char> a(kN), b(kN);
      for (int i = 0; i < kN; ++i) a[i] = static_cast<unsigned char>(i + me);
      routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_OP), "Allreduce of MPI_BYTE with SUM",
             [&] { return MPI_Allreduce(a.data(), b.data(), kN, MPI_BYTE, MPI_SUM, MPI_COMM_WORLD); });
      routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_OP), "Allreduce of MPI_CHAR with PROD",
             [&] { return MPI_Allreduce(a.data(), b.data(), kN, MPI_CHAR, MPI_PROD, MPI_COMM_WORLD); });
      // Complex products are not two real products: (1+i)^p.
      std::vector<std::complex<float>> c(kN, {1.0f, 1.0f}), d(kN);
      routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_OP), "Allreduce of MPI_C_FLOAT_COMPLEX with PROD",
             [&] { return MPI_Allreduce(c.data(), d.data(), kN, MPI_C_FLOAT_COMPLEX, MPI_PROD, MPI_COMM_WORLD); });
      std::complex<float> want{1.0f, 0.0f};
      for (int r = 0; r < p; ++r) want *= std::complex<float>{1.0f, 1.0f};
      bad = 0;
      for (int i = 0; i < kN; ++i) bad += d[i] != want;
      h_.check(bad == 0, "complex PROD: %d wrong", bad);
    }

    // A derived type in a reduction, even a contiguous one: MPI's to do (Open
    // MPI accepts only user ops on derived types; the type decides first).
    MPI_Datatype four;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    MPI_Op_create(userSum, 1, &sum);
    routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_DATATYPE), "Allreduce of a derived type", [&] {
      return MPI_Allreduce(in.data(), out.data(), kN / 4, four, sum, MPI_COMM_WORLD);
    });
    MPI_Op_free(&sum);
    bad = 0;
    for (int i = 0; i < kN / 4 * 4; ++i) {
      int want = 0;
      for (int r = 0; r < p; ++r) want += v(r, i);
      bad += out[i] != want;
    }
    h_.check(bad == 0, "derived-type Allreduce: %d wrong", bad);
    MPI_Type_free(&four);
  }
  static bool r0(MPI_Op op) { return op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR; }

  // Bcast and Allgather may use different (matching) types on different
  // ranks: they go to nodus on the byte count, and a non-contiguous side packs.
  void derivedMoves() {
    const int p = h_.size, me = h_.rank;
    const int root = p - 1;
    MPI_Datatype strided, contig;
    MPI_Type_vector(kN, 1, 2, MPI_INT, &strided);  // every other int
    MPI_Type_commit(&strided);
    MPI_Type_contiguous(kN, MPI_INT, &contig);
    MPI_Type_commit(&contig);

    for (int variant = 0; variant < 4; ++variant) {
      const bool nb = variant >= 2;
      // Variants 0/2: the root strided, others contiguous ints; 1/3 the other way round.
      const bool stridedHere = (variant % 2 == 0) == (me == root);
      std::vector<int> buf(2 * static_cast<size_t>(kN) + 8, -99);
      for (int i = 0; i < kN; ++i)
        if (me == root) buf[stridedHere ? 2 * static_cast<size_t>(i) : static_cast<size_t>(i)] = v(root, i) * 7;
      const std::string what = std::string(nb ? "Ibcast" : "Bcast") + " with a strided type on " +
                               (variant % 2 == 0 ? "the root" : "the other ranks");
      const int coll = nb ? NODUS_MPI_IBCAST : NODUS_MPI_BCAST;
      const auto before = h_.counters(coll);
      routed(coll, p > 1 ? Harness::toNodus() : Harness::toMpi(NODUS_MPI_FB_ONE_RANK), what, [&] {
        if (!nb) return stridedHere ? MPI_Bcast(buf.data(), 1, strided, root, MPI_COMM_WORLD)
                                    : MPI_Bcast(buf.data(), kN, MPI_INT, root, MPI_COMM_WORLD);
        MPI_Request r;
        const int rc = stridedHere ? MPI_Ibcast(buf.data(), 1, strided, root, MPI_COMM_WORLD, &r)
                                   : MPI_Ibcast(buf.data(), kN, MPI_INT, root, MPI_COMM_WORLD, &r);
        int flag = 0;
        while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        return rc;
      });
      int bad = 0;
      for (int i = 0; i < kN; ++i) {
        bad += buf[stridedHere ? 2 * static_cast<size_t>(i) : static_cast<size_t>(i)] != v(root, i) * 7;
        if (stridedHere) bad += buf[2 * static_cast<size_t>(i) + 1] != -99;  // the gaps stay untouched
      }
      h_.check(bad == 0, "%s: %d wrong", what.c_str(), bad);
      h_.digest(buf.data(), buf.size() * sizeof(int));
      if (h_.preloaded && p > 1 && stridedHere)
        h_.check(h_.counters(coll).staged_calls == before.staged_calls + 1, "%s was not staged", what.c_str());
    }

    // A contiguous derived type is one run of bytes: not staged.
    {
      std::vector<int> buf(kN, me == 0 ? 5 : 0);
      const auto before = h_.counters(NODUS_MPI_BCAST);
      routed(NODUS_MPI_BCAST, p > 1 ? Harness::toNodus() : Harness::toMpi(NODUS_MPI_FB_ONE_RANK),
             "Bcast of a contiguous derived type", [&] { return MPI_Bcast(buf.data(), 1, contig, 0, MPI_COMM_WORLD); });
      h_.check(std::all_of(buf.begin(), buf.end(), [](int x) { return x == 5; }), "contiguous-type Bcast wrong");
      if (h_.preloaded)
        h_.check(h_.counters(NODUS_MPI_BCAST).staged_calls == before.staged_calls,
                 "a contiguous derived type was staged");
    }

    // Allgather: each rank sends kN strided ints and receives blocks of kN
    // ints, as plain ints or as a resized strided type (non-contiguous receive).
    MPI_Datatype recvStrided;
    {
      MPI_Datatype v2;
      MPI_Type_vector(kN, 1, 2, MPI_INT, &v2);
      MPI_Type_create_resized(v2, 0, static_cast<MPI_Aint>(2 * sizeof(int)) * kN, &recvStrided);
      MPI_Type_commit(&recvStrided);
      MPI_Type_free(&v2);
    }
    for (int variant = 0; variant < 4; ++variant) {
      const bool stridedSend = variant & 1, stridedRecv = variant & 2;
      for (bool inPlace : {false, true}) {
        if (inPlace && stridedSend) continue;  // send arguments are ignored in place
        std::vector<int> send(2 * static_cast<size_t>(kN), -7), recv(2 * static_cast<size_t>(kN) * p + 8, -99);
        auto recvAt = [&](int r, int i) -> int& {
          return stridedRecv ? recv[(2 * static_cast<size_t>(kN)) * r + 2 * static_cast<size_t>(i)]
                             : recv[static_cast<size_t>(kN) * r + static_cast<size_t>(i)];
        };
        for (int i = 0; i < kN; ++i) {
          if (inPlace) recvAt(me, i) = v(me, i) + 100;
          else send[stridedSend ? 2 * static_cast<size_t>(i) : static_cast<size_t>(i)] = v(me, i) + 100;
        }
        const std::string what = std::string("Allgather ") + (stridedSend ? "strided" : "int") + " -> " +
                                 (stridedRecv ? "strided" : "int") + (inPlace ? " in place" : "");
        routed(NODUS_MPI_ALLGATHER, p > 1 ? Harness::toNodus() : Harness::toMpi(NODUS_MPI_FB_ONE_RANK), what, [&] {
          const void* sb = inPlace ? MPI_IN_PLACE : send.data();
          return MPI_Allgather(sb, stridedSend ? 1 : kN, stridedSend ? strided : MPI_INT, recv.data(),
                               stridedRecv ? 1 : kN, stridedRecv ? recvStrided : MPI_INT, MPI_COMM_WORLD);
        });
        int bad = 0;
        for (int r = 0; r < p; ++r)
          for (int i = 0; i < kN; ++i) bad += recvAt(r, i) != v(r, i) + 100;
        if (stridedRecv)
          for (int r = 0; r < p; ++r)
            for (int i = 0; i < kN; ++i) bad += recv[(2 * static_cast<size_t>(kN)) * r + 2 * static_cast<size_t>(i) + 1] != -99;
        h_.check(bad == 0, "%s: %d wrong", what.c_str(), bad);
        h_.digest(recv.data(), recv.size() * sizeof(int));
      }
    }
    // Non-blocking with a non-contiguous receive: unpacked when it completes.
    {
      std::vector<int> send(kN), recv(2 * static_cast<size_t>(kN) * p, -99);
      for (int i = 0; i < kN; ++i) send[i] = v(me, i) - 100;
      routed(NODUS_MPI_IALLGATHER, p > 1 ? Harness::toNodus() : Harness::toMpi(NODUS_MPI_FB_ONE_RANK),
             "Iallgather into a strided type", [&] {
               MPI_Request r;
               const int rc =
                   MPI_Iallgather(send.data(), kN, MPI_INT, recv.data(), 1, recvStrided, MPI_COMM_WORLD, &r);
               MPI_Waitall(1, &r, MPI_STATUSES_IGNORE);
               return rc;
             });
      int bad = 0;
      for (int r = 0; r < p; ++r)
        for (int i = 0; i < kN; ++i) bad += recv[(2 * static_cast<size_t>(kN)) * r + 2 * static_cast<size_t>(i)] != v(r, i) - 100;
      h_.check(bad == 0, "Iallgather into a strided type: %d wrong", bad);
    }
    MPI_Type_free(&recvStrided);
    MPI_Type_free(&strided);
    MPI_Type_free(&contig);
  }

  void intercomm() {
    if (h_.size < 2) return;
    const int half = h_.size / 2;
    const bool low = h_.rank < half;
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, low, h_.rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? half : 0, 42, &inter);
    std::vector<int> in(kN), out(kN);
    for (int i = 0; i < kN; ++i) in[i] = v(h_.rank, i);
    // On an inter-communicator each group receives the other group's reduction.
    routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_INTERCOMM), "Allreduce on an inter-communicator",
           [&] { return MPI_Allreduce(in.data(), out.data(), kN, MPI_INT, MPI_SUM, inter); });
    int bad = 0;
    for (int i = 0; i < kN; ++i) {
      int want = 0;
      for (int r = low ? half : 0; r < (low ? h_.size : half); ++r) want += v(r, i);
      bad += out[i] != want;
    }
    h_.check(bad == 0, "inter-communicator Allreduce: %d wrong", bad);
    // A barrier stays on MPI anyway unless the threshold is 0.
    routed(NODUS_MPI_BARRIER, Harness::toMpi(h_.minBytes() > 0 ? NODUS_MPI_FB_SMALL : NODUS_MPI_FB_INTERCOMM),
           "Barrier on an inter-communicator",
           [&] { return MPI_Barrier(inter); });
    if (h_.preloaded)
      h_.check(h_.commState(inter) == NODUS_MPI_COMM_UNSUITABLE, "inter-communicator state %d", h_.commState(inter));
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
  }

  void selfComm() {
    std::vector<double> in(kN, 1.5), out(kN);
    routed(NODUS_MPI_ALLREDUCE, Harness::toMpi(NODUS_MPI_FB_ONE_RANK), "Allreduce on MPI_COMM_SELF",
           [&] { return MPI_Allreduce(in.data(), out.data(), kN, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF); });
    h_.check(out == in, "MPI_COMM_SELF Allreduce wrong");
  }

  Harness& h_;
};

}  // namespace

int main(int argc, char** argv) {
  Harness h(&argc, &argv);
  Test(h).run();
  return h.finish("fallback_test");
}
