#pragma once
// remat::milp: a small sparse MILP model builder, the solution and options types shared by every
// backend, and the MilpBackend concept; milp::unavailable names a backend that is never there.
// Standard library only: the solver backends live in their own opt-in headers
// (<remat/milp/lpsolve.hpp>, <remat/milp/cbc.hpp>). docs/milp.md.

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>

namespace remat::milp {

inline constexpr double infinity = std::numeric_limits<double>::infinity();

enum class var_type { continuous, integer, binary };

inline constexpr std::string_view to_string(var_type t) {
  switch (t) {
    case var_type::continuous:
      return "continuous";
    case var_type::integer:
      return "integer";
    case var_type::binary:
      return "binary";
  }
  return "unknown";
}

/// A handle to a variable of one model: its index in model::variables() and solution::values.
/// A default-constructed handle names no variable (validation reports it).
struct variable {
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::size_t index = none;
};

/// One coefficient of a sparse linear expression.
struct term {
  std::size_t index;  ///< variable index
  double coef;
};

/// A sparse affine expression sum(coef * x) + constant. Variables and numbers convert to it
/// implicitly, so that `x + 2 * y - z`, `3 * (x - y) + 1` and `sum(xs)` read as written.
/// Terms may repeat a variable; constraints and objectives merge them.
struct linear_expr {
  std::vector<term> terms;
  double constant = 0;

  linear_expr() = default;
  linear_expr(double c) : constant(c) {}                  // NOLINT: implicit by design
  linear_expr(variable v) : terms{term{v.index, 1.0}} {}  // NOLINT: implicit by design

  /// Adds coef * v.
  linear_expr& add(variable v, double coef = 1.0) {
    terms.push_back({v.index, coef});
    return *this;
  }
  linear_expr& operator+=(const linear_expr& e) {
    terms.insert(terms.end(), e.terms.begin(), e.terms.end());
    constant += e.constant;
    return *this;
  }
  linear_expr& operator-=(const linear_expr& e) {
    terms.reserve(terms.size() + e.terms.size());
    for (const term& t : e.terms) terms.push_back({t.index, -t.coef});
    constant -= e.constant;
    return *this;
  }
  linear_expr& operator*=(double k) {
    for (term& t : terms) t.coef *= k;
    constant *= k;
    return *this;
  }
  linear_expr& operator/=(double k) { return *this *= 1.0 / k; }

  /// The value at an assignment indexed by variable; throws std::out_of_range for an index the
  /// assignment does not have.
  [[nodiscard]] double value(std::span<const double> x) const {
    double v = constant;
    for (const term& t : terms) {
      if (t.index >= x.size())
        throw std::out_of_range("remat::milp: the expression uses variable #" +
                                std::to_string(t.index) + " but the assignment has " +
                                std::to_string(x.size()) + " values");
      v += t.coef * x[t.index];
    }
    return v;
  }

  /// Sorts the terms by variable, merges repeated variables and drops zero coefficients.
  void normalize() {
    std::sort(terms.begin(), terms.end(),
              [](const term& a, const term& b) { return a.index < b.index; });
    std::size_t out = 0;
    for (std::size_t i = 0; i < terms.size();) {
      term t = terms[i++];
      while (i < terms.size() && terms[i].index == t.index) t.coef += terms[i++].coef;
      if (t.coef != 0 || std::isnan(t.coef))
        terms[out++] = t;  // keep NaN so that validation sees it
    }
    terms.resize(out);
  }
};

inline linear_expr operator+(linear_expr a, const linear_expr& b) { return a += b; }
inline linear_expr operator-(linear_expr a, const linear_expr& b) { return a -= b; }
inline linear_expr operator-(linear_expr a) { return a *= -1.0; }
inline linear_expr operator+(linear_expr a) { return a; }
inline linear_expr operator*(double k, linear_expr a) { return a *= k; }
inline linear_expr operator*(linear_expr a, double k) { return a *= k; }
inline linear_expr operator/(linear_expr a, double k) { return a /= k; }

/// sum(xs): the sum of a range of variables or expressions.
template <std::ranges::input_range R>
requires std::convertible_to<std::ranges::range_reference_t<R>, linear_expr> linear_expr
sum(R&& r) {
  linear_expr e;
  if constexpr (std::ranges::sized_range<R>) e.terms.reserve(std::ranges::size(r));
  for (auto&& x : r) e += linear_expr(x);
  return e;
}

/// sum(r, f): the sum of f(x) over a range, e.g. sum(items, [&](int i) { return w[i] * x[i]; }).
template <std::ranges::input_range R, class F>
requires std::convertible_to<std::invoke_result_t<F&, std::ranges::range_reference_t<R>>,
                             linear_expr>
    linear_expr sum(R&& r, F f) {
  linear_expr e;
  for (auto&& x : r) e += linear_expr(std::invoke(f, x));
  return e;
}

enum class relation { less_equal, greater_equal, equal };

inline constexpr std::string_view to_string(relation r) {
  switch (r) {
    case relation::less_equal:
      return "<=";
    case relation::greater_equal:
      return ">=";
    case relation::equal:
      return "==";
  }
  return "?";
}

/// A linear constraint `sum(terms) rel rhs`, made by comparing two expressions
/// (`x + y <= 1`); the constants of both sides end up in rhs.
struct constraint {
  linear_expr lhs;  ///< constant 0 once made by a comparison
  relation rel = relation::less_equal;
  double rhs = 0;
  std::string name;

  /// How far an assignment violates the constraint (0 when satisfied).
  [[nodiscard]] double violation(std::span<const double> x) const {
    const double v = lhs.value(x) - rhs;
    switch (rel) {
      case relation::less_equal:
        return std::max(0.0, v);
      case relation::greater_equal:
        return std::max(0.0, -v);
      case relation::equal:
        return std::abs(v);
    }
    return 0;
  }
};

namespace detail {
inline constraint make_constraint(linear_expr diff, relation rel) {
  const double rhs = -diff.constant;
  diff.constant = 0;
  return constraint{std::move(diff), rel, rhs, {}};
}
}  // namespace detail

inline constraint operator<=(linear_expr a, const linear_expr& b) {
  return detail::make_constraint(a -= b, relation::less_equal);
}
inline constraint operator>=(linear_expr a, const linear_expr& b) {
  return detail::make_constraint(a -= b, relation::greater_equal);
}
inline constraint operator==(linear_expr a, const linear_expr& b) {
  return detail::make_constraint(a -= b, relation::equal);
}

enum class objective_sense { minimize, maximize };

/// A mixed-integer linear program: variables with bounds and types, linear constraints and a
/// linear objective. Building never fails; validate() (which every backend calls first) reports
/// the first malformed piece with its name.
class model {
 public:
  struct variable_info {
    var_type type = var_type::continuous;
    double lower = 0;
    double upper = infinity;
    std::string name;
  };

  variable add_variable(var_type type, double lower, double upper, std::string name = {}) {
    vars_.push_back({type, lower, upper, std::move(name)});
    return variable{vars_.size() - 1};
  }
  variable add_continuous(double lower = 0, double upper = infinity, std::string name = {}) {
    return add_variable(var_type::continuous, lower, upper, std::move(name));
  }
  variable add_integer(double lower = 0, double upper = infinity, std::string name = {}) {
    return add_variable(var_type::integer, lower, upper, std::move(name));
  }
  variable add_binary(std::string name = {}) {
    return add_variable(var_type::binary, 0, 1, std::move(name));
  }
  /// n variables of one kind; with a prefix, named prefix0, prefix1, ...
  std::vector<variable> add_variables(std::size_t n, var_type type, double lower = 0,
                                      double upper = infinity, std::string_view prefix = {}) {
    std::vector<variable> v;
    v.reserve(n);
    vars_.reserve(vars_.size() + n);
    for (std::size_t i = 0; i < n; ++i)
      v.push_back(
          add_variable(type, lower, upper,
                       prefix.empty() ? std::string() : std::string(prefix) + std::to_string(i)));
    return v;
  }
  std::vector<variable> add_binaries(std::size_t n, std::string_view prefix = {}) {
    return add_variables(n, var_type::binary, 0, 1, prefix);
  }

  /// Adds a constraint (repeated variables merged, zero coefficients dropped); returns its index.
  std::size_t add(constraint c) {
    c.lhs.normalize();
    c.rhs += -c.lhs.constant;
    c.lhs.constant = 0;
    cons_.push_back(std::move(c));
    return cons_.size() - 1;
  }
  std::size_t add(constraint c, std::string name) {
    c.name = std::move(name);
    return add(std::move(c));
  }

  void minimize(linear_expr e) { set_objective(objective_sense::minimize, std::move(e)); }
  void maximize(linear_expr e) { set_objective(objective_sense::maximize, std::move(e)); }
  void set_objective(objective_sense s, linear_expr e) {
    e.normalize();
    sense_ = s;
    obj_ = std::move(e);
  }

  void set_bounds(variable v, double lower, double upper) {
    auto& i = at(v);
    i.lower = lower;
    i.upper = upper;
  }
  void set_type(variable v, var_type t) { at(v).type = t; }

  [[nodiscard]] std::size_t num_variables() const { return vars_.size(); }
  [[nodiscard]] std::size_t num_constraints() const { return cons_.size(); }
  [[nodiscard]] std::size_t num_integers() const {
    return static_cast<std::size_t>(
        std::count_if(vars_.begin(), vars_.end(),
                      [](const variable_info& i) { return i.type != var_type::continuous; }));
  }
  [[nodiscard]] std::span<const variable_info> variables() const { return vars_; }
  [[nodiscard]] std::span<const constraint> constraints() const { return cons_; }
  [[nodiscard]] const variable_info& info(variable v) const {
    if (v.index >= vars_.size()) throw std::out_of_range(unknown(v));
    return vars_[v.index];
  }
  [[nodiscard]] const linear_expr& objective() const { return obj_; }
  [[nodiscard]] objective_sense sense() const { return sense_; }
  /// "x" or, for an unnamed variable, "#3".
  [[nodiscard]] std::string name_of(variable v) const {
    if (v.index < vars_.size() && !vars_[v.index].name.empty())
      return "'" + vars_[v.index].name + "'";
    return "#" + std::to_string(v.index);
  }
  [[nodiscard]] std::string constraint_name(std::size_t i) const {
    if (i < cons_.size() && !cons_[i].name.empty()) return "'" + cons_[i].name + "'";
    return "#" + std::to_string(i);
  }

  /// The LP relaxation: the same model with every integrality requirement dropped (binary
  /// variables keep their [0, 1] bounds).
  [[nodiscard]] model relax() const {
    model r = *this;
    for (auto& v : r.vars_) v.type = var_type::continuous;
    return r;
  }

  /// Checks what a solver cannot be handed: non-finite coefficients or right-hand sides, NaN
  /// bounds, lower > upper, infinite bounds on the wrong side, binary bounds outside [0, 1], and
  /// variables that are not in this model. The message names the variable or constraint.
  [[nodiscard]] result<void> validate() const {
    auto bad = [](std::string msg) {
      return error{status::invalid_problem, "remat::milp: " + std::move(msg), {}};
    };
    for (std::size_t j = 0; j < vars_.size(); ++j) {
      const auto& v = vars_[j];
      const std::string who = "variable " + name_of(variable{j});
      if (std::isnan(v.lower) || std::isnan(v.upper)) return bad(who + " has a NaN bound");
      if (v.lower == infinity || v.upper == -infinity)
        return bad(who + " has bounds [" + num(v.lower) + ", " + num(v.upper) +
                   "]: a lower bound of +inf or an upper bound of -inf leaves no value");
      if (v.lower > v.upper)
        return bad(who + " has lower bound " + num(v.lower) + " above its upper bound " +
                   num(v.upper));
      if (v.type == var_type::binary && (v.lower < 0 || v.upper > 1))
        return bad(
            who + " is binary but has bounds [" + num(v.lower) + ", " + num(v.upper) +
            "]; a binary variable's bounds must lie within [0, 1] (use an integer variable)");
    }
    auto check_expr = [&](const linear_expr& e, const std::string& where) -> std::optional<error> {
      for (const term& t : e.terms) {
        if (t.index >= vars_.size())
          return bad(where + " uses variable #" +
                     (t.index == variable::none ? std::string("<none>") : std::to_string(t.index)) +
                     ", which is not in this model (it has " + std::to_string(vars_.size()) +
                     " variables; a default-constructed or another model's variable?)");
        if (!std::isfinite(t.coef))
          return bad(where + " has coefficient " + num(t.coef) + " on variable " +
                     name_of(variable{t.index}) + "; coefficients must be finite");
      }
      if (!std::isfinite(e.constant))
        return bad(where + " has a non-finite constant " + num(e.constant));
      return std::nullopt;
    };
    if (auto e = check_expr(obj_, "the objective")) return *e;
    for (std::size_t i = 0; i < cons_.size(); ++i) {
      const std::string where = "constraint " + constraint_name(i);
      if (auto e = check_expr(cons_[i].lhs, where)) return *e;
      if (!std::isfinite(cons_[i].rhs))
        return bad(where + " has right-hand side " + num(cons_[i].rhs) + "; it must be finite");
    }
    return {};
  }

  /// The objective (constant included) at an assignment.
  [[nodiscard]] double objective_value(std::span<const double> x) const { return obj_.value(x); }

  /// The largest violation of a bound, an integrality requirement or a constraint by an
  /// assignment of all variables (0 when feasible); +inf for an assignment of the wrong size.
  [[nodiscard]] double max_violation(std::span<const double> x) const {
    if (x.size() != vars_.size()) return infinity;
    double worst = 0;
    for (std::size_t j = 0; j < vars_.size(); ++j) {
      const auto& v = vars_[j];
      if (std::isnan(x[j])) return infinity;
      worst = std::max({worst, v.lower - x[j], x[j] - v.upper});
      if (v.type != var_type::continuous)
        worst = std::max(worst, std::abs(x[j] - std::round(x[j])));
    }
    for (const auto& c : cons_) worst = std::max(worst, c.violation(x));
    return worst;
  }

 private:
  static std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  [[nodiscard]] std::string unknown(variable v) const {
    return "remat::milp: variable #" + std::to_string(v.index) + " is not in this model (it has " +
           std::to_string(vars_.size()) + " variables)";
  }
  variable_info& at(variable v) {
    if (v.index >= vars_.size()) throw std::out_of_range(unknown(v));
    return vars_[v.index];
  }

  std::vector<variable_info> vars_;
  std::vector<constraint> cons_;
  linear_expr obj_;
  objective_sense sense_ = objective_sense::minimize;
};

/// How a solve ended. A result<solution> that is ok holds optimal or feasible; the others are
/// the error's status (see to_result).
enum class solve_status {
  optimal,     ///< proven optimal (within options::relative_gap)
  feasible,    ///< the best solution found when the time limit stopped the search
  infeasible,  ///< no assignment satisfies the constraints
  unbounded,   ///< the objective improves without limit (or the relaxation does: see message)
  time_limit,  ///< the time limit passed before any feasible solution was found
  error,       ///< the solver failed (numerical trouble, out of memory, ...)
};

inline constexpr std::string_view to_string(solve_status s) {
  switch (s) {
    case solve_status::optimal:
      return "optimal";
    case solve_status::feasible:
      return "feasible";
    case solve_status::infeasible:
      return "infeasible";
    case solve_status::unbounded:
      return "unbounded";
    case solve_status::time_limit:
      return "time_limit";
    case solve_status::error:
      return "error";
  }
  return "unknown";
}

struct solution {
  solve_status status = solve_status::error;
  /// One value per variable (by index); integer and binary variables hold exact integers.
  std::vector<double> values;
  /// The model's objective at values (constant included), in the model's own sense.
  double objective = std::numeric_limits<double>::quiet_NaN();
  /// The best proven bound on the optimum, in the model's sense: <= objective when minimising,
  /// >= when maximising; equal to objective when proven optimal with no gap. -inf (+inf when
  /// maximising) when the solver proved nothing.
  double bound = std::numeric_limits<double>::quiet_NaN();
  /// Wall-clock seconds of the solve.
  double seconds = 0;
  /// What the solver said, e.g. "CBC: stopped on the time limit".
  std::string message;
  /// The search stopped at options::node_limit (not at the time limit).
  bool node_limit_reached = false;

  [[nodiscard]] bool is_optimal() const { return status == solve_status::optimal; }
  [[nodiscard]] bool has_values() const {
    return status == solve_status::optimal || status == solve_status::feasible;
  }
  [[nodiscard]] double value(variable v) const { return values.at(v.index); }
  [[nodiscard]] double operator[](variable v) const { return value(v); }
  [[nodiscard]] double value(const linear_expr& e) const { return e.value(values); }
  /// |objective - bound| / max(1, |objective|); 0 when proven optimal without gap.
  [[nodiscard]] double gap() const {
    if (!std::isfinite(objective) || !std::isfinite(bound)) return infinity;
    return std::abs(objective - bound) / std::max(1.0, std::abs(objective));
  }
};

/// What a progress callback receives, in the model's sense.
struct progress_report {
  /// Best objective found so far; +inf (-inf when maximising) before the first one.
  double incumbent = infinity;
  /// Best proven bound so far; never on the wrong side of incumbent.
  double bound = -infinity;
  /// Seconds since the solve started.
  double elapsed = 0;
  [[nodiscard]] bool has_incumbent() const { return std::isfinite(incumbent); }
};

struct options {
  /// Wall-clock limit of the solve in seconds; not finite = none. The solve returns within about
  /// a tenth of a second after it (the best solution found, or status::time_limit).
  double time_limit = infinity;
  /// Branch-and-bound nodes after which the search stops (0 = none), with the best solution
  /// found (not proven optimal) or status::time_limit, as at the time limit. Unlike the time
  /// limit it stops at the same point on every run (with one thread), so the answer does not
  /// depend on the machine's speed or load.
  std::int64_t node_limit = 0;
  /// Stop when (incumbent - bound) / |incumbent| <= relative_gap; the solution is then reported
  /// optimal. 0 = prove optimality up to the solver's own tolerances (about 1e-9).
  double relative_gap = 0;
  /// Solver threads; 0 or 1: one. CBC runs its parallel tree search from 2 on; lp_solve always
  /// uses one.
  int threads = 1;
  /// Called during the solve with {incumbent, bound, elapsed}: at each new incumbent (at most
  /// every 50 ms) and every progress_interval seconds, never from two threads at once, and once
  /// more at the end. An exception thrown by the callback stops the solve and is rethrown by
  /// solve().
  std::function<void(const progress_report&)> progress = {};
  double progress_interval = 1.0;
  /// A starting assignment of all variables (by index), such as a heuristic's solution. Backends
  /// that support MIP starts use it when it is feasible; see each backend.
  std::optional<std::vector<double>> warm_start = std::nullopt;
  /// 0: silent; 1: the solver's summary; 2: the solver's full log (on stdout/stderr).
  int verbosity = 0;
};

/// A solver backend: a copyable type with a static name, a runtime availability check and a
/// const solve. Backends map the solver's outcome onto result<solution> with to_result().
template <class B>
concept MilpBackend = std::copyable<B> && std::default_initializable<B> &&
    requires(const B& b, const model& m, const options& o) {
  { B::name } -> std::convertible_to<std::string_view>;
  { B::available() } -> std::same_as<bool>;
  { b.solve(m, o) } -> std::same_as<result<solution>>;
};

/// A backend that is never available: it names the MILP policies in a build without a solver
/// library (remat-plan lists them, and says what to install when one is asked for).
struct unavailable {
  static constexpr std::string_view name = "none";
  [[nodiscard]] static bool available() { return false; }
  [[nodiscard]] result<solution> solve(const model&, const options&) const {
    return error{status::solver_error,
                 "no MILP solver in this build (install coinor-libcbc-dev or liblpsolve55-dev and "
                 "rebuild with remat::cbc or remat::lpsolve)",
                 {}};
  }
};

/// Use in MILP-based policies: stops a type that is not a backend with a message that names
/// the requirement.
template <class B>
inline constexpr bool require_milp_backend = [] {
  static_assert(MilpBackend<B>,
                "remat: the MILP backend must satisfy remat::milp::MilpBackend (a copyable, "
                "default-constructible type with a static `name`, `static bool available()` and "
                "`result<milp::solution> solve(const milp::model&, const milp::options&) const`); "
                "use remat::milp::lpsolve or remat::milp::cbc");
  return true;
}();

/// Solves with backend B (e.g. solve<remat::milp::cbc>(m, {.time_limit = 5})).
template <class B>
result<solution> solve(const model& m, const options& o = {}, const B& backend = B{}) {
  static_assert(require_milp_backend<B>);
  return backend.solve(m, o);
}

/// Maps a solver's outcome onto result: optimal and feasible are ok; infeasible, time_limit and
/// error become the status of the same name (solver_error for error); unbounded becomes
/// invalid_problem, since an unbounded objective means the model lacks a bound.
inline result<solution> to_result(solution s, std::string_view solver) {
  auto fail = [&](status code, std::string what) {
    return error{
        code,
        std::string(solver) + ": " + what + (s.message.empty() ? "" : " (" + s.message + ")"),
        {}};
  };
  char t[64];
  std::snprintf(t, sizeof t, "%.3g s", s.seconds);
  switch (s.status) {
    case solve_status::optimal:
    case solve_status::feasible:
      return s;
    case solve_status::infeasible:
      return fail(status::infeasible,
                  "the MILP is infeasible: no assignment satisfies all constraints and bounds");
    case solve_status::unbounded:
      return fail(
          status::invalid_problem,
          "the MILP is unbounded (or its relaxation is): the objective improves without limit; "
          "bound the variables it uses");
    case solve_status::time_limit: {
      std::string msg = "no feasible solution found within the time limit (" + std::string(t) + ")";
      if (std::isfinite(s.bound)) {
        char b[64];
        std::snprintf(b, sizeof b, "; best bound %.10g", s.bound);
        msg += b;
      }
      if (s.node_limit_reached) {
        msg = "no feasible solution found within the node limit";
        return fail(status::time_limit, msg + "; raise options::node_limit");
      }
      return fail(status::time_limit, msg + "; raise options::time_limit");
    }
    case solve_status::error:
      return fail(status::solver_error, "the solver failed");
  }
  return fail(status::solver_error, "unknown outcome");
}

}  // namespace remat::milp
