#pragma once
// What every MILP backend shares: request checks, the model in the solvers' form (minimisation,
// compressed rows), the throttled progress sink, and the final solution (integers rounded,
// objective recomputed from the values, bound on the right side).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/milp/model.hpp>

namespace remat::milp::detail {

class stopwatch {
 public:
  stopwatch() : start_(std::chrono::steady_clock::now()) {}
  [[nodiscard]] double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

/// The model and the options as a solver may take them; the first problem as invalid_problem.
inline result<void> check_request(const model& m, const options& o) {
  if (auto v = m.validate(); !v) return v;
  auto bad = [](std::string msg) {
    return error{status::invalid_problem, "remat::milp: " + std::move(msg), {}};
  };
  if (std::isnan(o.time_limit) || o.time_limit <= 0)
    return bad("options::time_limit must be > 0 seconds (infinity for none), not " +
               std::to_string(o.time_limit));
  if (!(o.relative_gap >= 0) || !std::isfinite(o.relative_gap))
    return bad("options::relative_gap must be a finite number >= 0, not " +
               std::to_string(o.relative_gap));
  if (o.threads < 0) return bad("options::threads must be >= 0 (0 or 1: one thread)");
  if (o.node_limit < 0)
    return bad("options::node_limit must be >= 0 nodes (0 for none), not " +
               std::to_string(o.node_limit));
  if (!(o.progress_interval >= 0)) return bad("options::progress_interval must be >= 0 seconds");
  if (o.warm_start) {
    if (o.warm_start->size() != m.num_variables())
      return bad("options::warm_start has " + std::to_string(o.warm_start->size()) +
                 " values but the model has " + std::to_string(m.num_variables()) + " variables");
    for (std::size_t j = 0; j < o.warm_start->size(); ++j)
      if (!std::isfinite((*o.warm_start)[j]))
        return bad("options::warm_start gives variable " + m.name_of(variable{j}) +
                   " the non-finite value " + std::to_string((*o.warm_start)[j]));
  }
  return {};
}

/// The model as solvers take it: minimise sign * objective, rows in compressed form.
struct flat_model {
  double sign = 1;      ///< -1 when the model maximises
  double constant = 0;  ///< objective constant, in the solver's (minimisation) sense
  std::vector<double> obj, lower, upper;
  std::vector<char> integer;
  std::vector<std::size_t> row_start{0};
  std::vector<int> col;
  std::vector<double> val;
  std::vector<relation> rel;
  std::vector<double> rhs;
  /// An empty constraint that cannot hold (0 <= -1), by index; the model is then infeasible.
  std::size_t violated_empty_row = variable::none;
  /// A constraint that the bounds of its variables (with those set by single-variable rows)
  /// cannot meet, by index; the model is then infeasible.
  std::size_t impossible_row = variable::none;
  /// Constraints left out: single-variable rows (made bounds) and rows the bounds imply.
  std::size_t dropped_rows = 0;

  [[nodiscard]] std::size_t rows() const { return rel.size(); }
  [[nodiscard]] std::size_t cols() const { return obj.size(); }
  [[nodiscard]] bool has_integers() const {
    return std::any_of(integer.begin(), integer.end(), [](char c) { return c != 0; });
  }
};

inline flat_model flatten(const model& m) {
  flat_model f;
  const std::size_t n = m.num_variables();
  f.sign = m.sense() == objective_sense::maximize ? -1.0 : 1.0;
  f.constant = f.sign * m.objective().constant;
  f.obj.assign(n, 0.0);
  for (const term& t : m.objective().terms) f.obj[t.index] += f.sign * t.coef;
  f.lower.reserve(n);
  f.upper.reserve(n);
  f.integer.reserve(n);
  for (const auto& v : m.variables()) {
    f.lower.push_back(v.lower);
    f.upper.push_back(v.upper);
    f.integer.push_back(v.type != var_type::continuous ? 1 : 0);
  }
  // A light presolve, so that solvers (node LPs in branch and bound above all) see only the
  // rows that matter: a single-variable row becomes a bound (rounded inwards for an integer
  // variable), and a row that the bounds imply whatever the values is left out. Neither changes
  // the feasible set; the columns stay as they are.
  const auto& cons = m.constraints();
  constexpr double eps = 1e-9;
  auto tol = [](double v) { return eps * (1 + std::abs(v)); };
  for (std::size_t i = 0; i < cons.size(); ++i) {
    const constraint& c = cons[i];
    if (c.lhs.terms.size() != 1) continue;
    const term t = c.lhs.terms.front();
    if (t.coef == 0 || !std::isfinite(t.coef) || !std::isfinite(c.rhs)) continue;  // kept as is
    const double v = c.rhs / t.coef;
    const bool upper = (c.rel == relation::less_equal) == (t.coef > 0);
    double& lo = f.lower[t.index];
    double& hi = f.upper[t.index];
    if (c.rel == relation::equal || upper) hi = std::min(hi, v);
    if (c.rel == relation::equal || !upper) lo = std::max(lo, v);
    if (f.integer[t.index]) {
      hi = std::floor(hi + tol(hi));
      lo = std::ceil(lo - tol(lo));
    }
    if (lo > hi + tol(hi) && f.impossible_row == variable::none) f.impossible_row = i;
  }
  std::size_t nnz = 0;
  for (const auto& c : cons) nnz += c.lhs.terms.size();
  f.col.reserve(nnz);
  f.val.reserve(nnz);
  for (std::size_t i = 0; i < cons.size(); ++i) {
    const constraint& c = cons[i];
    if (c.lhs.terms.empty()) {  // 0 rel rhs: decided here, so that no solver sees an empty row
      const bool holds = (c.rel == relation::less_equal && 0 <= c.rhs) ||
                         (c.rel == relation::greater_equal && 0 >= c.rhs) ||
                         (c.rel == relation::equal && c.rhs == 0);
      if (!holds && f.violated_empty_row == variable::none) f.violated_empty_row = i;
      ++f.dropped_rows;
      continue;
    }
    const bool single = c.lhs.terms.size() == 1 && c.lhs.terms.front().coef != 0 &&
                        std::isfinite(c.lhs.terms.front().coef) && std::isfinite(c.rhs);
    // The row's least and greatest value over the bounds.
    double least = 0, most = 0;
    for (const term& t : c.lhs.terms) {
      const double a = t.coef * f.lower[t.index], b = t.coef * f.upper[t.index];
      least += std::isnan(a) || std::isnan(b) ? -infinity : std::min(a, b);
      most += std::isnan(a) || std::isnan(b) ? infinity : std::max(a, b);
    }
    const bool le_holds = most <= c.rhs + tol(c.rhs), ge_holds = least >= c.rhs - tol(c.rhs);
    const bool implied = single || (c.rel == relation::less_equal && le_holds) ||
                         (c.rel == relation::greater_equal && ge_holds) ||
                         (c.rel == relation::equal && le_holds && ge_holds);
    const bool impossible = (c.rel != relation::greater_equal && least > c.rhs + tol(c.rhs)) ||
                            (c.rel != relation::less_equal && most < c.rhs - tol(c.rhs));
    if (impossible && f.impossible_row == variable::none) f.impossible_row = i;
    if (implied) {
      ++f.dropped_rows;
      continue;
    }
    for (const term& t : c.lhs.terms) {
      f.col.push_back(static_cast<int>(t.index));
      f.val.push_back(t.coef);
    }
    f.row_start.push_back(f.col.size());
    f.rel.push_back(c.rel);
    f.rhs.push_back(c.rhs);
  }
  return f;
}

/// Forwards a solver's progress (in its minimisation sense) to options::progress: at each new
/// incumbent (at most every 50 ms) and every progress_interval, under a mutex so that the
/// callback never runs twice at once. An exception from the callback is kept, stop() turns
/// true so that the backend can abort the search, and rethrow() raises it after the solver
/// returned (it must not cross the solver's C frames).
class progress_sink {
 public:
  progress_sink(const options& o, double sign, const stopwatch& clock)
      : cb_(o.progress), interval_(o.progress_interval), sign_(sign), clock_(clock) {}

  [[nodiscard]] bool wanted() const { return static_cast<bool>(cb_); }
  [[nodiscard]] bool stop() const { return failed_; }

  /// incumbent: +inf when none; bound: -inf when none (both in the solver's minimisation sense).
  void report(double incumbent, double bound) noexcept {
    if (!cb_ || failed_) return;
    std::lock_guard lock(mu_);
    const double now = clock_.elapsed();
    const bool better = incumbent < best_ - 1e-9 * std::max(1.0, std::abs(incumbent));
    if (!((better && now - last_ >= 0.05) || now - last_ >= interval_)) return;
    call(incumbent, bound, now);
  }
  /// The last call, with the final numbers.
  void finish(double incumbent, double bound) noexcept {
    if (!cb_ || failed_) return;
    std::lock_guard lock(mu_);
    call(incumbent, bound, clock_.elapsed());
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void call(double incumbent, double bound, double now) noexcept {
    if (!std::isfinite(incumbent) || std::abs(incumbent) >= 1e29) incumbent = infinity;
    if (std::isnan(bound) || bound <= -1e29) bound = -infinity;
    bound = std::min(bound, incumbent);
    best_ = std::min(best_, incumbent);
    last_ = now;
    progress_report r;
    r.incumbent = sign_ * incumbent + 0.0;
    r.bound = sign_ * bound + 0.0;
    r.elapsed = now;
    try {
      cb_(r);
    } catch (...) {
      error_ = std::current_exception();
      failed_ = true;
    }
  }

  const std::function<void(const progress_report&)>& cb_;
  double interval_;
  double sign_;
  const stopwatch& clock_;
  std::mutex mu_;
  double last_ = -infinity;
  double best_ = infinity;
  std::exception_ptr error_;
  std::atomic<bool> failed_ = false;
};

/// Where an assignment breaks the model by more than the solvers' tolerances (relative to the
/// magnitudes involved), as a message; nullopt when it satisfies every bound, integrality
/// requirement and constraint. Backends check what a solver returns with it, so that a solver
/// bug surfaces as solver_error instead of a wrong answer.
inline std::optional<std::string> violation_of(const model& m, const std::vector<double>& x) {
  constexpr double tol = 1e-6;
  const auto vars = m.variables();
  char buf[160];
  for (std::size_t j = 0; j < vars.size(); ++j) {
    const auto& v = vars[j];
    const double slack = tol * (1 + std::abs(x[j]));
    if (!std::isfinite(x[j]) || x[j] < v.lower - slack || x[j] > v.upper + slack ||
        (v.type != var_type::continuous && x[j] != std::round(x[j]))) {
      std::snprintf(buf, sizeof buf, " = %.10g, outside its bounds [%g, %g] or not integral", x[j],
                    v.lower, v.upper);
      return "variable " + m.name_of(variable{j}) + buf;
    }
  }
  for (std::size_t i = 0; i < m.num_constraints(); ++i) {
    const constraint& c = m.constraints()[i];
    // Relative to the row's magnitudes: its right-hand side, its terms' values and its
    // coefficients (solvers scale rows by their coefficients: lp_solve left an equality row with
    // coefficients up to 1.2e4 off by 5e-4, 4e-8 of its largest coefficient).
    double scale = std::abs(c.rhs);
    for (const term& t : c.lhs.terms)
      scale = std::max({scale, std::abs(t.coef * x[t.index]), std::abs(t.coef)});
    const double by = c.violation(x);
    if (by > tol * (1 + scale)) {
      std::snprintf(buf, sizeof buf, " by %.10g", by);
      return "constraint " + m.constraint_name(i) + buf;
    }
  }
  return std::nullopt;
}

/// The solution in the model's terms from a solver's raw values: integer variables rounded to
/// the nearest integer, the objective recomputed from the values, the bound (given in the
/// solver's minimisation sense, constant excluded or included as the caller says) turned to the
/// model's sense and kept on the right side of the objective.
inline solution make_solution(const model& m, const flat_model& f, solve_status st,
                              std::vector<double> values, double raw_bound, double seconds,
                              std::string message) {
  solution s;
  s.status = st;
  s.seconds = seconds;
  s.message = std::move(message);
  double bound = raw_bound;  // minimisation sense, constant included
  if (std::isnan(bound) || bound <= -1e29) bound = -infinity;
  if (s.has_values()) {
    for (std::size_t j = 0; j < values.size(); ++j)
      if (f.integer[j]) values[j] = std::round(values[j]) + 0.0;
    if (auto bad = violation_of(m, values)) {  // never hand out a point the model rejects
      s.status = solve_status::error;
      s.message +=
          "; the solver's point violates " + *bad + " (a solver bug: try the other backend)";
      s.bound = std::numeric_limits<double>::quiet_NaN();
      return s;
    }
    s.values = std::move(values);
    s.objective = m.objective_value(s.values);
    const double obj_min = f.sign * s.objective;
    if (st == solve_status::optimal && !std::isfinite(bound)) bound = obj_min;
    bound = std::min(bound, obj_min);
  }
  s.bound = f.sign * bound + 0.0;
  return s;
}

/// What needs no solver: an empty constraint that cannot hold (infeasible), or no variables.
inline std::optional<solution> trivial(const model& m, const flat_model& f,
                                       const stopwatch& clock) {
  if (f.violated_empty_row != variable::none) {
    const constraint& c = m.constraints()[f.violated_empty_row];
    solution s;
    s.status = solve_status::infeasible;
    s.seconds = clock.elapsed();
    s.message = "constraint " + m.constraint_name(f.violated_empty_row) +
                " has no variables and reads 0 " + std::string(to_string(c.rel)) + " " +
                std::to_string(c.rhs);
    return s;
  }
  if (f.impossible_row != variable::none) {
    solution s;
    s.status = solve_status::infeasible;
    s.seconds = clock.elapsed();
    s.message = "constraint " + m.constraint_name(f.impossible_row) +
                " cannot hold within the bounds of its variables";
    return s;
  }
  if (m.num_variables() == 0)
    return make_solution(m, f, solve_status::optimal, {}, std::numeric_limits<double>::quiet_NaN(),
                         clock.elapsed(), "the model has no variables");
  return std::nullopt;
}

}  // namespace remat::milp::detail
