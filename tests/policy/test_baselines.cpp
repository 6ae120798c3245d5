// The baselines against their references: store_all is plain training, periodic is PyTorch's
// torch.utils.checkpoint.checkpoint_sequential, revolve is Griewank's binomial checkpointing.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <support/random_chain.hpp>

#include <remat/remat.hpp>

#include "policy/chain_programs.hpp"

using namespace remat;
using remat::testing::chain_generator;

namespace {

bool close(double x, double y) {
  return x == y || std::abs(x - y) <= 1e-9 * std::max(std::abs(x), std::abs(y));
}

/// n stages, every time 1, every size `size` (abar = a): the homogeneous chain.
chain homogeneous(int n, bytes size = 64) {
  chain c{"homogeneous", size, {}};
  for (int l = 1; l <= n; ++l) c.stages.push_back({"", 1.0, 1.0, size, size, 0, 0});
  return c;
}

/// A chain policy's program, counted in the chain notation's ops.
int count_forwards(const chain& c, const schedule& s) {
  return test::count_forwards(test::chain_ops(c, s));
}
int count_backwards(const chain& c, const schedule& s) {
  return test::count_backwards(test::chain_ops(c, s));
}

/// The program PyTorch's checkpoint_sequential(functions, segments, input) runs, transcribed
/// from its loop (torch/utils/checkpoint.py), with functions[i] = stage i+1:
///     segment_size = len(functions) // segments
///     end = -1
///     for start in range(0, segment_size * (segments - 1), segment_size):
///         end = start + segment_size - 1
///         input = checkpoint(run_function(start, end, functions), input)
///     return run_function(end + 1, len(functions) - 1, functions)(input)
/// checkpoint() runs its segment under no_grad, keeping only the segment's input, and in the
/// backward pass re-runs the segment with grad enabled, then back-propagates through it. The
/// last segment runs normally (autograd keeps everything).
std::string pytorch_checkpoint_sequential(int n, int segments) {
  std::vector<std::string> fwd, bwd;
  const int segment_size = n / segments;
  int end = -1;
  std::vector<std::pair<int, int>> checkpointed;  // 0-based [start, end]
  for (int start = 0; start < segment_size * (segments - 1); start += segment_size) {
    end = start + segment_size - 1;
    checkpointed.emplace_back(start, end);
    for (int i = start; i <= end; ++i)
      fwd.push_back("F" + std::to_string(i + 1) + (i == start ? "_ck" : "_none"));
  }
  for (int i = end + 1; i <= n - 1; ++i) fwd.push_back("F" + std::to_string(i + 1) + "_all");
  for (int i = n - 1; i >= end + 1; --i) bwd.push_back("B" + std::to_string(i + 1));
  for (auto it = checkpointed.rbegin(); it != checkpointed.rend(); ++it) {
    for (int i = it->first; i <= it->second; ++i)
      bwd.push_back("F" + std::to_string(i + 1) + "_all");
    for (int i = it->second; i >= it->first; --i) bwd.push_back("B" + std::to_string(i + 1));
  }
  std::string out;
  for (const auto* part : {&fwd, &bwd})
    for (const auto& op : *part) out += (out.empty() ? "" : " ") + op;
  return out;
}

/// Griewank's t(l, s): the fewest forward steps that reverse l steps with s snapshots
/// (docs/chain-dps.md §8.5): r is the integer with beta(s, r-1) < l <= beta(s, r), beta(s, r) =
/// C(s+r, s), and t(l, s) = r*l - beta(s+1, r-1); t(1, s) = 0.
long griewank_forwards(long l, long s) {
  auto beta = [](long c, long r) {
    if (r < 0) return 0L;
    long v = 1;  // C(c+r, c), exact in long for the sizes used here
    for (long i = 1; i <= r; ++i) v = v * (c + i) / i;
    return v;
  };
  if (l <= 1) return 0;
  long r = 0;
  while (beta(s, r) < l) ++r;
  return r * l - beta(s + 1, r - 1);
}

}  // namespace

TEST_CASE("store_all: F1_all..FN_all BN..B1 at the ideal time") {
  CHECK(test::chain_text(homogeneous(4), *store_all{}.solve(homogeneous(4), unlimited_bytes)) ==
        "F1_all F2_all F3_all F4_all B4 B3 B2 B1");
  chain_generator gen(11);
  for (int i = 0; i < 200; ++i) {
    const chain c = gen({.max_length = 20});
    INFO(remat::testing::describe(c));
    const auto r = store_all{}.solve(c, unlimited_bytes);
    REQUIRE(r.ok());
    const int n = c.length();
    const auto ops = test::chain_ops(c, *r);
    REQUIRE(ops.size() == static_cast<std::size_t>(2 * n));
    for (int l = 1; l <= n; ++l) {
      CHECK(ops[static_cast<std::size_t>(l - 1)] == chain_op::forward(l, forward_mode::save_all));
      CHECK(ops[static_cast<std::size_t>(2 * n - l)] == chain_op::backward(l));
    }
    CHECK(r->ops == test::program(c, store_all::program(c)).ops);
    const auto rep = sim::simulate(c, *r);
    CHECK(rep.valid);
    CHECK(close(rep.makespan, c.ideal_time()));
    CHECK(close(r->predicted_time, c.ideal_time()));
    // Its peak is its minimum: one byte less fails.
    CHECK(store_all{}.solve(c, rep.peak).ok());
    if (rep.peak > 0) CHECK(store_all{}.solve(c, rep.peak - 1).err().minimum_budget == rep.peak);
  }
}

TEST_CASE("periodic: PyTorch's checkpoint_sequential segmentation") {
  // The two hand-checked cases.
  CHECK(test::chain_text(homogeneous(5),
                         *periodic{.segments = 3}.solve(homogeneous(5), unlimited_bytes)) ==
        "F1_ck F2_ck F3_all F4_all F5_all B5 B4 B3 F2_all B2 F1_all B1");
  CHECK(test::chain_text(homogeneous(6),
                         *periodic{.segments = 2}.solve(homogeneous(6), unlimited_bytes)) ==
        "F1_ck F2_none F3_none F4_all F5_all F6_all B6 B5 B4 F1_all F2_all F3_all B3 B2 B1");
  CHECK(pytorch_checkpoint_sequential(5, 3) ==
        "F1_ck F2_ck F3_all F4_all F5_all B5 B4 B3 F2_all B2 F1_all B1");

  // Every (N, k): the same program as PyTorch's loop, which recomputes each stage of the k-1
  // checkpointed segments once: (k-1) * floor(N/k) extra forwards.
  for (int n = 1; n <= 24; ++n)
    for (int k = 1; k <= n; ++k) {
      INFO("N = ", n, ", k = ", k);
      const chain c = homogeneous(n);
      const auto r = periodic{.segments = k}.solve(c, unlimited_bytes);
      REQUIRE(r.ok());
      CHECK(test::chain_text(c, *r) == pytorch_checkpoint_sequential(n, k));
      CHECK(count_forwards(c, *r) == n + (k - 1) * (n / k));
      CHECK(count_backwards(c, *r) == n);
      CHECK(r->predicted_time == doctest::Approx(2 * n + (k - 1) * (n / k)));
      CHECK(sim::simulate(c, *r).valid);
    }
  // k = 1 is plain training.
  const chain c = homogeneous(7);
  CHECK(periodic{.segments = 1}.solve(c, unlimited_bytes)->ops ==
        store_all{}.solve(c, unlimited_bytes)->ops);
}

TEST_CASE("periodic: segments = 0 picks the fastest k that fits") {
  chain_generator gen(12);
  int strictly_between = 0;  // cases where the best k is neither 1 nor N
  for (int i = 0; i < 150; ++i) {
    const chain c = gen({.min_length = 2, .max_length = 16});
    INFO(remat::testing::describe(c));
    const int n = c.length();
    const graph g = test::graph_of(c);
    std::vector<bytes> peaks;
    for (int k = 1; k <= n; ++k) {
      const auto ops = periodic::program(c, k);
      peaks.push_back(sim::simulate(g, test::program(c, ops)).peak);
    }
    const bytes lo = *std::min_element(peaks.begin(), peaks.end());
    const bytes hi = *std::max_element(peaks.begin(), peaks.end());
    for (int j = -1; j <= 8; ++j) {
      const bytes budget = j < 0 ? lo - 1 : lo + (hi - lo) * j / 8;
      INFO("budget ", budget);
      // The reference: every fixed k, the fastest that fits.
      double best = std::numeric_limits<double>::infinity();
      int best_k = 0;
      for (int k = 1; k <= n; ++k) {
        const auto r = periodic{.segments = k}.solve(c, budget);
        CHECK(r.ok() == (peaks[static_cast<std::size_t>(k - 1)] <= budget));
        if (r.ok() && r->predicted_time < best) {
          best = r->predicted_time;
          best_k = k;
        }
      }
      const auto r = periodic{}.solve(c, budget);
      if (best_k == 0) {
        REQUIRE(r.code() == status::budget_too_small);
        CHECK(r.err().minimum_budget == lo);
        continue;
      }
      REQUIRE_MESSAGE(r.ok(), r.message());
      CHECK(r->predicted_time == best);
      CHECK(r->predicted_peak <= budget);
      CHECK(test::chain_ops(c, *r) == periodic::program(c, best_k));
      if (best_k > 1 && best_k < n) ++strictly_between;
    }
  }
  CHECK(strictly_between > 50);
}

TEST_CASE(
    "revolve: homogeneous chains, Griewank's forward counts, more snapshots never cost more") {
  for (int n = 1; n <= 40; ++n) {
    const chain c = homogeneous(n);
    int previous_forwards = std::numeric_limits<int>::max();
    double previous_time = std::numeric_limits<double>::infinity();
    for (int snaps = 0; snaps <= n; ++snaps) {
      INFO("N = ", n, ", snapshots = ", snaps);
      const auto r = revolve{.snapshots = snaps}.solve(c, unlimited_bytes);
      REQUIRE(r.ok());
      const auto rep = sim::simulate(c, *r);
      CHECK(rep.valid);
      CHECK(rep.peak == r->predicted_peak);
      CHECK(close(rep.makespan, r->predicted_time));
      const int forwards = count_forwards(c, *r);
      CHECK(count_backwards(c, *r) == n);
      // Besides the N leaf F_all's, Griewank's t(N, c+1): the input is the extra snapshot.
      CHECK(forwards - n == griewank_forwards(n, snaps + 1));
      CHECK(forwards <= previous_forwards);
      CHECK(r->predicted_time <= previous_time);
      previous_forwards = forwards;
      previous_time = r->predicted_time;
    }
    // With N-2 free snapshots (or more) nothing is recomputed beyond Revolve's one advance per
    // stage: 2N-1 forwards.
    CHECK(count_forwards(c, *revolve{.snapshots = n}.solve(c, unlimited_bytes)) ==
          std::max(1, 2 * n - 1));
  }
  // The table of docs/chain-dps.md §8.5.
  // The table (rows l = 1..10, columns m = 3..8 slots: m-3 free snapshots), for a chain of
  // l+1 stages whose last is a free loss: t(l+1, m-2) forwards.
  const long table[][6] = {{1, 1, 1, 1, 1, 1},  {3, 2, 2, 2, 2, 2},  {6, 4, 3, 3, 3, 3},
                           {10, 6, 5, 4, 4, 4}, {15, 8, 7, 6, 5, 5}, {21, 11, 9, 8, 7, 6}};
  for (int l = 1; l <= 6; ++l)
    for (int m = 3; m <= 8; ++m) {
      INFO("l = ", l, ", m = ", m);
      CHECK(griewank_forwards(l + 1, m - 2) == table[l - 1][m - 3]);
      const auto r = revolve{.snapshots = m - 3}.solve(homogeneous(l + 1), unlimited_bytes);
      CHECK(count_forwards(homogeneous(l + 1), *r) - (l + 1) == table[l - 1][m - 3]);
    }
}

TEST_CASE("revolve: snapshots = -1 picks the fastest snapshot count that fits") {
  chain_generator gen(13);
  for (int i = 0; i < 150; ++i) {
    const chain c = gen({.min_length = 2, .max_length = 14});
    INFO(remat::testing::describe(c));
    const int n = c.length();
    const graph g = test::graph_of(c);
    std::vector<bytes> peaks;
    for (int s = 0; s <= std::max(0, n - 2); ++s)
      peaks.push_back(sim::simulate(g, test::program(c, revolve::program(c, s))).peak);
    const bytes lo = *std::min_element(peaks.begin(), peaks.end());
    const bytes hi = *std::max_element(peaks.begin(), peaks.end());
    for (int j = -1; j <= 6; ++j) {
      const bytes budget = j < 0 ? lo - 1 : lo + (hi - lo) * j / 6;
      INFO("budget ", budget);
      double best = std::numeric_limits<double>::infinity();
      for (int s = 0; s <= std::max(0, n - 2); ++s)
        if (const auto r = revolve{.snapshots = s}.solve(c, budget); r.ok())
          best = std::min(best, r->predicted_time);
      const auto r = revolve{}.solve(c, budget);
      if (best == std::numeric_limits<double>::infinity()) {
        REQUIRE(r.code() == status::budget_too_small);
        CHECK(r.err().minimum_budget == lo);
      } else {
        REQUIRE_MESSAGE(r.ok(), r.message());
        CHECK(r->predicted_time == best);
      }
    }
  }
}
