#pragma once
// The host model of the executor's benchmarks (bench_executor, bench_dtr): examples/eigen's
// transformer-like residual stack (8 blocks, width 256, hidden 1024, batch 64), with dropout p
// after each block when p > 0, and its chain, profiled once per p through the host backend.

#include <map>

#include <eigen/models.hpp>

#include <remat/exec/host_backend.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/problem/chain.hpp>

namespace remat_bench::host_model {

constexpr int depth = 8, width = 256, hidden = 1024, batch = 64;

inline eg::model build(float dropout = 0.0f) {
  return eg::make_residual_stack(depth, width, hidden, batch, 7, dropout);
}

inline eg::tensor input(remat::exec::host_backend& b) { return eg::make_input(b, batch, width, 1); }

/// The model's chain, measured (5 repetitions after 2 warm-ups) at its first use.
inline const remat::chain& profiled_chain(float dropout = 0.0f) {
  static std::map<float, remat::chain> chains;
  auto it = chains.find(dropout);
  if (it == chains.end()) {
    eg::model m = build(dropout);
    remat::exec::host_backend b;
    it = chains
             .emplace(dropout,
                      *remat::exec::profile_chain(m, input(b), b, {.repetitions = 5, .warmup = 2}))
             .first;
  }
  return it->second;
}

}  // namespace remat_bench::host_model
