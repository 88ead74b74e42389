// The Python module nodus_torch._C: the ProcessGroupNodus type, its
// creator, registered with torch.distributed as backend "nodus", and
// nodus's version.
#include <string>
#include <vector>

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "errors.h"
#include "process_group_nodus.h"

namespace nodus_torch {
namespace {

c10::intrusive_ptr<ProcessGroupNodus> create(c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  // The creator gets the store torch made for this group; no other rendezvous.
  auto owned = c10::intrusive_ptr<c10d::Store>::unsafe_reclaim_from_nonowning(&store);
  return c10::make_intrusive<ProcessGroupNodus>(owned, rank, size, timeout);
}

}  // namespace
}  // namespace nodus_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  using nodus_torch::ProcessGroupNodus;
  m.doc() = "nodus collectives as the torch.distributed backend \"nodus\"";
  py::module dist = py::module::import("torch.distributed");

  py::class_<ProcessGroupNodus, nodus_torch::Base, c10::intrusive_ptr<ProcessGroupNodus>>(m, "ProcessGroupNodus")
      .def_property_readonly("made_from_parent", &ProcessGroupNodus::madeFromParent,
                             "Whether dist.new_group made this group's communicator from the first group's "
                             "(nodusCommCreateGroup) rather than from a new unique id.");
  m.def("create_process_group", &nodus_torch::create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Creates a nodus process group (the creator registered as backend \"nodus\").");
  m.def("grid_order", [](const c10::intrusive_ptr<ProcessGroupNodus>& pg, int dp, int tp, int pp) {
    const char* order = nullptr;
    nodus_torch::check(nodusGridOrder(pg->comm(), dp, tp, pp, &order), "hybrid_groups");
    return std::string(order);
  }, py::arg("group"), py::arg("dp"), py::arg("tp"), py::arg("pp"),
        "The order nodusCommSplitGrid chooses for dp x tp x pp over this group (tensor groups on the fastest links).");
  m.def("version", [] {
    int v = 0;
    nodusGetVersion(&v);
    return v;
  }, "nodus's version code (MAJOR*10000 + MINOR*100 + PATCH) of the library loaded.");

  py::object backend = dist.attr("Backend");
  if (!py::hasattr(backend, "NODUS")) {
    py::object creator = m.attr("create_process_group");
#if TORCH_VERSION_MAJOR >= 2
    backend.attr("register_backend")("nodus", creator, py::arg("extended_api") = false,
                                     py::arg("devices") = std::vector<std::string>{"cpu"});
#else
    backend.attr("register_backend")("nodus", creator);
#endif
  }
}
