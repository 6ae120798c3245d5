#pragma once
// A user's DAG shape (docs/checkmate.md), shared by test_checkmate_minimum and bench_checkmate.

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <remat/problem/builder.hpp>

namespace remat::test {

/// The shape: a stem, `blocks` blocks x -> a -> b, x -> s (a side branch), add(x, b, s)
/// (a 3-input add without phantom), a head and a loss op; sizes of 4-16 KiB and phantoms of
/// 0-8 KiB in multiples of 4 KiB, times of 1-4 ms (backwards twice the forward).
inline remat::graph side_branch_graph(int blocks, int seed) {
  constexpr bytes K = 4096;
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  auto op = [&](std::string name, std::vector<std::string> in, std::vector<std::string> reads) {
    std::uniform_int_distribution<int> u(1, 4), r(0, 2);
    remat::forward_op o;
    o.name = std::move(name);
    o.inputs = std::move(in);
    o.forward_time = u(rng) * 1e-3;
    o.backward_time = 2 * o.forward_time;
    o.output_bytes = u(rng) * K;
    o.phantom_bytes = r(rng) * K;
    o.backward_reads = std::move(reads);
    return o;
  };
  remat::forward_dag f{"side_branch" + std::to_string(blocks), 2 * K, {}};
  f.ops.push_back(op("stem", {"input"}, {"input"}));
  std::string x = "stem";
  for (int b = 0; b < blocks; ++b) {
    const std::string s = std::to_string(b);
    f.ops.push_back(op("a" + s, {x}, {x}));
    f.ops.push_back(op("b" + s, {"a" + s}, {"a" + s, "output"}));
    f.ops.push_back(op("s" + s, {x}, {x}));
    f.ops.push_back(op("add" + s, {x, "b" + s, "s" + s}, {}));
    f.ops.back().phantom_bytes = 0;
    x = "add" + s;
  }
  f.ops.push_back(op("head", {x}, {x}));
  f.ops.push_back(op("loss", {"head"}, {"head", "output"}));
  return remat::build_graph(f).value();
}

}  // namespace remat::test
