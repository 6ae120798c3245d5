#pragma once
// MILP instances for the backend tests and bench/bench_milp.cpp: random knapsacks, set covers,
// market splits (Cornuéjols-Dawande: tiny, and hard for branch and bound), random small MILPs,
// and brute force over tiny binary programs.

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <remat/milp/model.hpp>

namespace remat::milp::testing {

/// max sum v_i x_i s.t. sum w_i x_i <= capacity (half the total weight), x binary. Strongly
/// correlated (v_i = w_i + 10) when asked: harder for branch and bound.
inline model knapsack(int n, std::uint32_t seed, bool correlated = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> w(10, 100);
  model m;
  const auto x = m.add_binaries(static_cast<std::size_t>(n), "x");
  linear_expr weight, value;
  double total = 0;
  for (int i = 0; i < n; ++i) {
    const double wi = w(rng);
    const double vi = correlated ? wi + 10 : w(rng);
    weight.add(x[static_cast<std::size_t>(i)], wi);
    value.add(x[static_cast<std::size_t>(i)], vi);
    total += wi;
  }
  m.add(weight <= std::floor(total / 2), "capacity");
  m.maximize(value);
  return m;
}

/// min sum c_j y_j s.t. every row is covered by a chosen column, each row in about density *
/// cols columns (at least one), y binary.
inline model set_cover(int rows, int cols, double density, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<int> cost(1, 20), pick(0, cols - 1);
  model m;
  const auto y = m.add_binaries(static_cast<std::size_t>(cols), "y");
  for (int r = 0; r < rows; ++r) {
    linear_expr cover;
    for (int c = 0; c < cols; ++c)
      if (u(rng) < density) cover.add(y[static_cast<std::size_t>(c)]);
    if (cover.terms.empty()) cover.add(y[static_cast<std::size_t>(pick(rng))]);
    m.add(cover >= 1, "row" + std::to_string(r));
  }
  m.minimize(sum(y, [&](variable v) { return cost(rng) * linear_expr(v); }));
  return m;
}

/// Market split: sum_j a_ij x_j + s+_i - s-_i = floor(sum_j a_ij / 2), minimise the slacks.
/// With m = 4 rows and 30 columns it takes branch and bound far longer than a test may wait.
inline model market_split(int rows, int cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> a(0, 99);
  model m;
  const auto x = m.add_binaries(static_cast<std::size_t>(cols), "x");
  linear_expr slack;
  for (int i = 0; i < rows; ++i) {
    const auto plus = m.add_continuous(0, infinity, "sp" + std::to_string(i));
    const auto minus = m.add_continuous(0, infinity, "sm" + std::to_string(i));
    linear_expr row;
    double total = 0;
    for (int j = 0; j < cols; ++j) {
      const double aij = a(rng);
      row.add(x[static_cast<std::size_t>(j)], aij);
      total += aij;
    }
    m.add(row + plus - minus == std::floor(total / 2), "split" + std::to_string(i));
    slack += plus + minus;
  }
  m.minimize(slack);
  return m;
}

/// A feasibility problem with a known solution: sum_j a_ij x_j = sum_j a_ij p_j for a random binary
/// p, x binary, objective 0. Finding any solution is a market split (hard for branch and bound);
/// p given as a warm start is optimal at once.
struct planted {
  model m;
  std::vector<double> solution;
};
inline planted planted_split(int rows, int cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> a(0, 99), bit(0, 1);
  planted p;
  const auto x = p.m.add_binaries(static_cast<std::size_t>(cols), "x");
  for (int j = 0; j < cols; ++j) p.solution.push_back(bit(rng));
  for (int i = 0; i < rows; ++i) {
    linear_expr row;
    double rhs = 0;
    for (int j = 0; j < cols; ++j) {
      const double aij = a(rng);
      row.add(x[static_cast<std::size_t>(j)], aij);
      rhs += aij * p.solution[static_cast<std::size_t>(j)];
    }
    p.m.add(row == rhs, "split" + std::to_string(i));
  }
  p.m.minimize(linear_expr(0.0));
  return p;
}

/// A small random MILP: integer and continuous variables with finite bounds, <=, >= and ==
/// constraints, either sense. May be infeasible (then both backends must say so).
inline model random_milp(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> coef(-6, 9), nvar(3, 8), nrow(2, 6), kind(0, 9), ub(1, 6);
  model m;
  const int n = nvar(rng);
  std::vector<variable> v;
  for (int j = 0; j < n; ++j) {
    const int k = kind(rng);
    if (k < 4)
      v.push_back(m.add_binary());
    else if (k < 7)
      v.push_back(m.add_integer(-1, ub(rng)));
    else
      v.push_back(m.add_continuous(0, ub(rng) + 0.5));
  }
  const int rows = nrow(rng);
  for (int i = 0; i < rows; ++i) {
    linear_expr e;
    for (const auto& x : v)
      if (kind(rng) < 6) e.add(x, coef(rng));
    const double rhs = coef(rng) + 4;
    const int r = kind(rng);
    m.add(r < 6 ? (e <= rhs) : r < 9 ? (e >= rhs - 8) : (e == std::round(rhs / 2)));
  }
  linear_expr obj = coef(rng) / 2.0;
  for (const auto& x : v) obj.add(x, coef(rng));
  if (kind(rng) < 5)
    m.minimize(obj);
  else
    m.maximize(obj);
  return m;
}

/// A tiny binary program (n <= 10): random <= constraints and objective.
inline model tiny_binary(int n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> coef(-5, 7), nrow(1, 4);
  model m;
  const auto x = m.add_binaries(static_cast<std::size_t>(n));
  const int rows = nrow(rng);
  for (int i = 0; i < rows; ++i) {
    linear_expr e;
    for (const auto& v : x) e.add(v, coef(rng));
    m.add(e <= coef(rng) + 2);
  }
  linear_expr obj;
  for (const auto& v : x) obj.add(v, coef(rng));
  if (seed % 2 == 0)
    m.minimize(obj);
  else
    m.maximize(obj);
  return m;
}

/// The optimum of a pure binary model by enumerating all 2^n assignments; nullopt if none is
/// feasible.
inline std::optional<double> brute_force_binary(const model& m) {
  const std::size_t n = m.num_variables();
  const bool maximize = m.sense() == objective_sense::maximize;
  std::optional<double> best;
  std::vector<double> x(n);
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << n); ++bits) {
    for (std::size_t j = 0; j < n; ++j) x[j] = static_cast<double>((bits >> j) & 1U);
    if (m.max_violation(x) > 1e-9) continue;
    const double v = m.objective_value(x);
    if (!best || (maximize ? v > *best : v < *best)) best = v;
  }
  return best;
}

}  // namespace remat::milp::testing
