#pragma once
// The stage model of the pipeline planners: how layers i..j run as one stage (its F and B times,
// its weights, what it keeps per mini-batch in flight, its extra memory while its B runs), and
// the boundaries between stages (a_j + delta_j bytes of buffer on each side, (a_j + delta_j) /
// beta seconds of transfer). The DPs (pipedream.hpp, madpipe.hpp) take a model as a template
// parameter: pipe_store_all_model is the thesis' Part III model [Shilova21, Part III], where a
// stage stores what its layers' backwards need per mini-batch (sim::stage_cost); a model with
// recompute options plugs in with the same interface. docs/pipeline.md.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/problem/pipeline.hpp>

namespace remat::detail {

/// One way to run layers i..j as one stage.
struct pipe_stage_option {
  seconds forward = 0;       ///< the stage's F time
  seconds backward = 0;      ///< the stage's B time
  bytes weights = 0;         ///< sum W over i..j (the user multiplies by C)
  bytes per_activation = 0;  ///< bytes kept per mini-batch in flight (sim::stage_cost's kept)
  bytes working = 0;         ///< extra bytes while its B runs (store-all: 0)
  /// A recomputing option's share of the segment policy's slots (pipe_recompute_model); -1:
  /// store-all.
  std::int64_t share = -1;
  [[nodiscard]] seconds work() const { return forward + backward; }
};

/// The store-all model from prefix sums: options(i, j) is one option, layers i..j storing
/// everything. A model's options(i, j) is a small range of pipe_stage_option sorted by work()
/// ascending; the DPs take the first that fits.
class pipe_store_all_model {
 public:
  explicit pipe_store_all_model(const pipeline_problem& problem)
      : layers_(problem.layers.length()),
        copies_(problem.copies),
        bandwidth_(problem.bandwidth),
        f_(ix(layers_ + 1), 0),
        b_(ix(layers_ + 1), 0),
        w_(ix(layers_ + 1), 0),
        act_(ix(layers_ + 1), 0),
        chain_a_(ix(layers_ + 1), 0),
        boundary_(ix(layers_ + 1), 0) {
    const chain& c = problem.layers;
    for (int l = 1; l <= layers_; ++l) {
      f_[ix(l)] = f_[ix(l - 1)] + c.uf(l);
      b_[ix(l)] = b_[ix(l - 1)] + c.ub(l);
      w_[ix(l)] = w_[ix(l - 1)] + c.w(l);
      act_[ix(l)] = act_[ix(l - 1)] + c.abar(l);
    }
    for (int l = 0; l <= layers_; ++l) {
      boundary_[ix(l)] = c.a(l) + c.delta(l);
      chain_a_[ix(l)] = c.a(l);
    }
  }

  [[nodiscard]] int layers() const { return layers_; }
  [[nodiscard]] int copies() const { return copies_; }

  /// Layers i..j (1-based, i <= j) as one stage.
  [[nodiscard]] std::array<pipe_stage_option, 1> options(int i, int j) const {
    // What sim::stage_cost counts: a_{i-1}, and abar_l over the layers less a_j (sent on).
    return {pipe_stage_option{
        f_[ix(j)] - f_[ix(i - 1)], b_[ix(j)] - b_[ix(i - 1)], w_[ix(j)] - w_[ix(i - 1)],
        chain_a_[ix(i - 1)] + act_[ix(j)] - act_[ix(i - 1)] - chain_a_[ix(j)], 0}};
  }

  /// a_j + delta_j: the buffer on each side of a boundary after layer j (0 for j = 0 or N).
  [[nodiscard]] bytes boundary_bytes(int j) const {
    return j <= 0 || j >= layers_ ? 0 : boundary_[ix(j)];
  }
  /// C(j) = (a_j + delta_j) / beta, the two transfers at a boundary after layer j (0 for j = 0
  /// or N, and with an infinite bandwidth).
  [[nodiscard]] seconds transfer(int j) const {
    const bytes b = boundary_bytes(j);
    return b == 0 ? 0 : static_cast<double>(b) / bandwidth_;
  }

  /// A stage's memory as the simulator counts it: C x weights, g activations, its working
  /// memory, and a buffer at each end shared with another processor (`left`: layer first - 1,
  /// `right`: layer last).
  [[nodiscard]] bytes memory(const pipe_stage_option& o, int first, int last, long long g,
                             bool left, bool right) const {
    bytes m = copies_ * o.weights + static_cast<bytes>(g) * o.per_activation + o.working;
    if (left) m += boundary_bytes(first - 1);
    if (right) m += boundary_bytes(last);
    return m;
  }

 private:
  int layers_;
  int copies_;
  double bandwidth_;
  std::vector<seconds> f_, b_;
  std::vector<bytes> w_, act_, chain_a_, boundary_;
};

}  // namespace remat::detail
