#pragma once
// Small pipeline instances shared by the pipeline tests (tests/sim, tests/policy).

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>

namespace remat::testing {

/// A layer of a pipeline test chain: its forward and backward times, output a_l and weights W_l.
struct pipe_layer {
  seconds uf = 0;
  seconds ub = 0;
  bytes a = 0;
  bytes w = 0;
};

/// A chain of these layers (the last the loss), with input a_0.
inline chain pipe_chain(const std::vector<pipe_layer>& layers, bytes input = 0) {
  chain c{"pipe", input, {}};
  for (const auto& l : layers) {
    stage s;
    s.forward_time = l.uf;
    s.backward_time = l.ub;
    s.output_bytes = l.a;
    s.saved_bytes = l.a;
    s.weight_bytes = l.w;
    c.stages.push_back(s);
  }
  return c;
}

/// The knobs of random_pipeline_problem, each value drawn uniformly between its bounds.
struct pipe_random_knobs {
  int min_layers = 1, max_layers = 7;  ///< N
  int max_time = 6;                    ///< u_F, u_B: 0.5 to max_time / 2 s in steps of 0.5
  int min_size = 0, max_size = 4;      ///< a size: a_l = size x size_unit, W_l = size
  bytes size_unit = 1;
  std::optional<bytes> input;             ///< a_0; empty: a size (unscaled)
  int max_keep = 1;                       ///< saved bytes a_l x 1..max_keep (drawn only when > 1)
  int min_procs = 1, max_procs = 4;       ///< P = min(N, drawn)
  std::vector<double> bandwidths;         ///< beta, one of these; empty: infinite, not drawn
  int max_copies = 1;                     ///< C = 1 + a size mod max_copies (drawn only when > 1)
  bytes min_memory = 0, max_memory = -1;  ///< M; max < min: unlimited, not drawn
};

/// A random chain and pipeline problem (the draws in the order of the knobs, so that a test's
/// instances stay the same for the same knobs and seed).
inline pipeline_problem random_pipeline_problem(std::mt19937& rng, const pipe_random_knobs& k) {
  std::uniform_int_distribution<int> len(k.min_layers, k.max_layers), time(1, k.max_time),
      size(k.min_size, k.max_size), keep(1, std::max(1, k.max_keep)),
      procs(k.min_procs, k.max_procs);
  const int n = len(rng);
  std::vector<pipe_layer> ls;
  for (int l = 0; l < n; ++l)
    ls.push_back({time(rng) * 0.5, time(rng) * 0.5, size(rng) * k.size_unit, size(rng)});
  pipeline_problem p;
  p.layers = pipe_chain(ls, k.input ? *k.input : size(rng));
  if (k.max_keep > 1)
    for (auto& st : p.layers.stages) st.saved_bytes = st.output_bytes * keep(rng);
  p.processors = std::min(n, procs(rng));
  if (!k.bandwidths.empty()) {
    std::uniform_int_distribution<std::size_t> bw(0, k.bandwidths.size() - 1);
    p.bandwidth = k.bandwidths[bw(rng)];
  }
  p.copies = k.max_copies > 1 ? 1 + size(rng) % k.max_copies : 1;
  if (k.max_memory >= k.min_memory) {
    std::uniform_int_distribution<bytes> mem(k.min_memory, k.max_memory);
    p.memory = mem(rng);
  }
  return p;
}

/// Knobs for chains whose stages want to recompute: 4 to 8 layers keeping 1 to 4 times their
/// output (10 to 60 bytes), weights 1 to 6, input 10, 2 or 3 processors, one copy, M unlimited
/// (the tests set it).
inline pipe_random_knobs pipe_keeping_knobs() {
  pipe_random_knobs k;
  k.min_layers = 4;
  k.max_layers = 8;
  k.min_size = 1;
  k.max_size = 6;
  k.size_unit = 10;
  k.input = 10;
  k.max_keep = 4;
  k.min_procs = 2;
  k.max_procs = 3;
  return k;
}

/// The thesis' Lemma 10: weights (1, 2, 1) on 2 processors of memory 2, one copy, no
/// activations, the layer times of one_three_on_one_processor().
inline pipeline_problem weights_one_two_one() {
  pipeline_problem p;
  p.layers = pipe_chain({{0.5, 0.5, 0, 1}, {1, 1, 0, 2}, {0.5, 0.5, 0, 1}});
  p.processors = 2;
  p.memory = 2;
  p.copies = 1;
  return p;
}

/// 1-periodic ops from the absolute start of each op on mini-batch 0 (in `ops`, with start
/// holding the absolute time).
inline std::vector<pipeline_op> from_absolute(const std::vector<pipeline_op>& ops, seconds period) {
  std::vector<pipeline_op> out;
  for (const auto& op : ops) out.push_back(place_op(op.kind, op.stage, op.start, 0, period));
  return out;
}

/// Three one-layer stages, {1, 3} on processor 0 and {2} on processor 1, layer times (F, B) =
/// (0.5, 0.5), (1, 1), (0.5, 0.5): period 2, no idle time on either processor, transfers free.
/// The thesis' non-contiguous allocation for costs (1, 2, 1) and for weights (1, 2, 1).
inline pipeline_plan one_three_on_one_processor() {
  using k = pipeline_op_kind;
  pipeline_plan plan;
  plan.stages = {{1, 1, 0}, {2, 2, 1}, {3, 3, 0}};
  plan.period = 2;
  plan.ops = from_absolute({{k::forward, 1, 0, 0},
                            {k::send_activation, 1, 0.5, 0},
                            {k::forward, 2, 0.5, 0},
                            {k::send_activation, 2, 1.5, 0},
                            {k::forward, 3, 1.5, 0},
                            {k::backward, 3, 2.5, 0},
                            {k::send_gradient, 2, 3, 0},
                            {k::backward, 2, 3.5, 0},
                            {k::send_gradient, 1, 4.5, 0},
                            {k::backward, 1, 5, 0}},
                           plan.period);
  return plan;
}

}  // namespace remat::testing
