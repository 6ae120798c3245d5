#pragma once
// Random heterogeneous chains for the policy tests (seeded, the same on every platform).
//
// std::uniform_*_distribution differ between standard libraries, so draws are made directly from
// std::mt19937_64's output, whose sequence the standard fixes.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include <remat/problem/chain.hpp>

namespace remat::testing {

/// What a random chain looks like.
struct chain_shape {
  int min_length = 1;
  int max_length = 12;
  /// Nonzero sizes are drawn log-uniformly from [1, max_bytes].
  bytes max_bytes = bytes{1} << 20;
  double p_zero_size = 0.15;            ///< chance that a size (or abar's extra over a) is 0
  double p_overhead = 0.5;              ///< chance that an overhead is nonzero
  double p_zero_time = 0.15;            ///< chance that a time is 0
  bool positive_forward_times = false;  ///< every u_F > 0 (for the no-recompute threshold)
};

class chain_generator {
 public:
  explicit chain_generator(std::uint64_t seed) : rng_(seed) {}

  /// Uniform in [0, 1).
  double unit() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  /// Uniform in [lo, hi].
  int between(int lo, int hi) {
    return lo + static_cast<int>(rng_() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return unit() < p; }

  /// 0 with probability p_zero, otherwise log-uniform in [1, max].
  bytes size(bytes max, double p_zero) {
    if (max <= 0 || chance(p_zero)) return 0;
    const double v = std::exp(unit() * std::log(static_cast<double>(max) + 1.0));
    const auto b = static_cast<bytes>(v);
    return b < 1 ? 1 : (b > max ? max : b);
  }

  /// 0 with probability p_zero, otherwise uniform in [0.01, 1) seconds.
  seconds time(double p_zero) { return chance(p_zero) ? 0.0 : 0.01 + 0.99 * unit(); }

  chain operator()(const chain_shape& sh, std::string name = "random") {
    chain c;
    c.name = std::move(name);
    c.input_bytes = size(sh.max_bytes, sh.p_zero_size);
    const int n = between(sh.min_length, sh.max_length);
    for (int l = 1; l <= n; ++l) {
      stage s;
      s.name = "s" + std::to_string(l);
      s.forward_time = sh.positive_forward_times ? time(0.0) : time(sh.p_zero_time);
      s.backward_time = time(sh.p_zero_time);
      s.output_bytes = size(sh.max_bytes, sh.p_zero_size);
      s.saved_bytes = s.output_bytes + size(sh.max_bytes, 0.3);
      s.forward_overhead_bytes = chance(sh.p_overhead) ? size(sh.max_bytes, 0.0) : 0;
      s.backward_overhead_bytes = chance(sh.p_overhead) ? size(sh.max_bytes, 0.0) : 0;
      if (chance(sh.p_overhead / 2)) s.forward_save_overhead_bytes = size(sh.max_bytes, 0.3);
      c.stages.push_back(std::move(s));
    }
    return c;
  }

 private:
  std::mt19937_64 rng_;
};

/// One line per stage, enough to rebuild a failing case by hand.
inline std::string describe(const chain& c) {
  std::string s = "a0=" + std::to_string(c.input_bytes) + " [uF uB a abar oF oB oF_all]:";
  for (const auto& st : c.stages) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " (%.17g %.17g %lld %lld %lld %lld %lld)", st.forward_time,
                  st.backward_time, static_cast<long long>(st.output_bytes),
                  static_cast<long long>(st.saved_bytes),
                  static_cast<long long>(st.forward_overhead_bytes),
                  static_cast<long long>(st.backward_overhead_bytes),
                  static_cast<long long>(c.of_all(static_cast<int>(&st - c.stages.data()) + 1)));
    s += buf;
  }
  return s;
}

/// Small integer chains for exhaustive comparisons (the offloading oracle and its DPs): n stages,
/// sizes 0..4 with abar = a + 0..2, times 0..3, overheads 0/1, a quarter of the stages with
/// F^all's own overhead 0..2. Integer data keeps the DPs' computed transfers exact.
inline chain small_integer_chain(chain_generator& g, int n) {
  chain c{"random", g.between(0, 4), {}};
  for (int l = 1; l <= n; ++l) {
    const bytes a = g.between(0, 4);
    const bytes abar = a + g.between(0, 2);
    c.stages.push_back({"s" + std::to_string(l), static_cast<double>(g.between(0, 3)),
                        static_cast<double>(g.between(0, 3)), a, abar, g.between(0, 1),
                        g.between(0, 1)});
    if (g.between(0, 3) == 0) c.stages.back().forward_save_overhead_bytes = g.between(0, 2);
  }
  return c;
}

}  // namespace remat::testing
