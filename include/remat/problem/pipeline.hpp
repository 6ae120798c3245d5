#pragma once
// Pipelined model parallelism's problem [Shilova21, Part III, Problem 12]: a chain whose layers
// (the chain's stages, the loss the last) carry their weights W_l, to be run on P identical
// processors of memory M each, fully connected by links of bandwidth beta, every processor
// keeping C copies of the weights of its layers (two weight versions, the gradients, the
// optimizer state: C = 3 at least). validate(problem) names the field at fault.
// docs/pipeline.md.

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>

namespace remat {

struct pipeline_problem {
  chain layers;                    ///< layer l of the pipeline is stage l of the chain
  int processors = 1;              ///< P
  bytes memory = unlimited_bytes;  ///< M, per processor: weights, activations and buffers
  /// beta, bytes per second on every link; +infinity makes communications free.
  double bandwidth = std::numeric_limits<double>::infinity();
  int copies = 3;  ///< C, the copies of the weights each processor keeps

  friend bool operator==(const pipeline_problem&, const pipeline_problem&) = default;
};

/// Checks the chain and the machine; the error names the field and says what would work.
inline result<void> validate(const pipeline_problem& p) {
  auto bad = [](std::string msg) { return error{status::invalid_problem, std::move(msg), {}}; };
  if (auto r = validate(p.layers); !r) return r;
  const int n = p.layers.length();
  if (p.processors < 1)
    return bad("pipeline: processors is " + std::to_string(p.processors) +
               "; a pipeline needs at least 1 processor");
  if (p.processors > n)
    return bad("pipeline: processors is " + std::to_string(p.processors) + " but chain '" +
               p.layers.name + "' has " + std::to_string(n) +
               " layers (the loss included); each processor must hold at least one layer, so "
               "use at most " +
               std::to_string(n) + " processors");
  if (p.memory < 0)
    return bad("pipeline: memory is negative (" + std::to_string(p.memory) +
               "); it is each processor's memory in bytes, >= 0");
  if (std::isnan(p.bandwidth) || p.bandwidth <= 0)
    return bad("pipeline: bandwidth is " + detail::time_text(p.bandwidth) +
               "; it must be > 0 bytes per second (+infinity for free communications)");
  constexpr int max_copies = 1024;
  if (p.copies < 1 || p.copies > max_copies)
    return bad("pipeline: copies is " + std::to_string(p.copies) +
               "; the copies of the weights each processor keeps must be in 1.." +
               std::to_string(max_copies) + " (3: weights, gradients, optimizer state)");
  // Memory sums stay far from overflow: C * sum W <= 2^60 (each W_l <= 2^52 by validate(chain)).
  bytes total = 0;
  for (int l = 1; l <= n; ++l) {
    total += p.layers.w(l);
    if (total > (bytes{1} << 60) / p.copies)
      return bad("pipeline: " + detail::stage_label(p.layers, l) +
                 ": weight_bytes brings copies x the chain's weights over 2^60 bytes");
  }
  return {};
}

}  // namespace remat
