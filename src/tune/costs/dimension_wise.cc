#include "tune/costs/dimension_wise.h"

#include <algorithm>

#include "tune/cost_model.h"

namespace nodus {

double dimensionWiseCost(double bytes, const std::vector<int>& sizes, const std::vector<Stream>& streams,
                         const std::vector<DimCost>& links, double gammaUsPerByte, const PlanContext& ctx,
                         double portBetaUsPerByte) {
  if (streams.empty()) return 0;
  const size_t stages = streams[0].dims.size();
  std::vector<double> len(streams.size(), bytes / static_cast<double>(streams.size()));
  double total = 0, reduced = 0;
  // Busy time of each port during one stage: dimension d's forward links at
  // 2d, its backward links at 2d+1 (the same port unless directional).
  std::vector<double> busy(2 * links.size());
  for (size_t t = 0; t < stages; ++t) {
    std::fill(busy.begin(), busy.end(), 0.0);
    double chain = 0, port = 0, stepBytes = 0, fill = 0;
    for (size_t j = 0; j < streams.size(); ++j) {
      const auto d = static_cast<size_t>(streams[j].dims[t]);
      const double q = sizes[d];
      const double moved = (q - 1) / q * len[j];
      // The streams' rings run side by side: the longest chain and the
      // biggest step set the stage's pace.
      chain = std::max(chain, (q - 1) * links[d].alphaUs);
      stepBytes = std::max(stepBytes, len[j] / q);
      // A stage is a phase: it starts once the last one is whole, so its
      // first slices walk the ring before the links are busy: a hop's
      // latency and a third of a slice's time per step (nodus-sim: 4x4x4
      // torus at 128 KiB slices, 1-64 MiB; 16x16x16 at 1 MiB slices, 256 MiB).
      const double slice = std::min<double>(len[j] / q, static_cast<double>(ctx.sliceBytes));
      fill = std::max(fill, (q - 1) * (links[d].alphaUs + slice * links[d].betaUsPerByte / 3));
      busy[2 * d + (links[d].directional && streams[j].backward ? 1 : 0)] += moved * links[d].betaUsPerByte;
      port += moved * portBetaUsPerByte;
      reduced += moved;
      len[j] /= q;
    }
    const double data = std::max(port, *std::max_element(busy.begin(), busy.end()));
    total += 2 * pipelinedPass(chain, data, stepBytes, ctx, fill);  // the all-gather retraces the reduce-scatter
  }
  return total + reduced * gammaUsPerByte;
}

}  // namespace nodus
