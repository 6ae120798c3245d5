#pragma once
// remat::milp::lpsolve: the MILP backend over lp_solve 5.5 (target remat::lpsolve; Debian
// liblpsolve55-dev + lp-solve). Opt-in: no other remat header includes this one. lp_solve's header
// defines some 500 macros: it is included last here, and every macro name it can define is
// restored afterwards, so code after this header sees none of them. docs/milp.md, "lp_solve".

#include <algorithm>
#include <climits>  // CHAR_BIT and NULL, which lp_solve defines too, exist before the save below
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/milp/detail/backend.hpp>
#include <remat/milp/model.hpp>

namespace remat::milp {

namespace detail::lpsolve_impl {
inline result<solution> run(const model& m, const options& o);
inline bool available();
}  // namespace detail::lpsolve_impl

/// lp_solve 5.5: exact branch and bound, single-threaded. Fine for small MILPs; slow on hard ones
/// (Checkmate's 20-node chain takes minutes where CBC takes a fraction of a second).
struct lpsolve {
  static constexpr std::string_view name = "lpsolve";
  /// True when the lp_solve library answers (it is linked in through remat::lpsolve).
  [[nodiscard]] static bool available() { return detail::lpsolve_impl::available(); }
  [[nodiscard]] result<solution> solve(const model& m, const options& o = {}) const {
    return detail::lpsolve_impl::run(m, o);
  }
};

}  // namespace remat::milp

// lp_solve last: its macros are visible only from here to the restore at the end.
// Every name lp_solve can define is saved first (#pragma push_macro takes the name as a string
// literal, which only _Pragma can build from the list; #name, never name, so that a user's macro
// of that name is not expanded), and the names lp_solve defines only where undefined (REAL,
// MYBOOL, ...) are then undefined, so that lp_lib.h declares what liblpsolve55 was built with.
// The code below never spells those: when the user included <lp_lib.h> first, the #include here
// does nothing and they stay undefined until the restore.
#define REMAT_DETAIL_LPSOLVE_PRAGMA(x) _Pragma(#x)
#define REMAT_LPSOLVE_MACRO(name) REMAT_DETAIL_LPSOLVE_PRAGMA(push_macro(#name))
#define REMAT_LPSOLVE_UNDEF_DEFAULTS
#include <remat/milp/detail/lpsolve_macro_names.hpp>
#undef REMAT_LPSOLVE_UNDEF_DEFAULTS
#undef REMAT_LPSOLVE_MACRO
#include <lp_lib.h>

namespace remat::milp::detail::lpsolve_impl {

// lp_solve's constants, translated once.
inline constexpr int row_type(relation r) {
  switch (r) {
    case relation::less_equal:
      return LE;
    case relation::greater_equal:
      return GE;
    case relation::equal:
      return EQ;
  }
  return LE;
}

inline constexpr int verbosity_level(int v) {
  return v <= 0 ? NEUTRAL : v == 1 ? NORMAL : DETAILED;
}

inline std::string_view code_name(int code) {
  switch (code) {
    case NOMEMORY:
      return "NOMEMORY";
    case OPTIMAL:
      return "OPTIMAL";
    case SUBOPTIMAL:
      return "SUBOPTIMAL";
    case INFEASIBLE:
      return "INFEASIBLE";
    case UNBOUNDED:
      return "UNBOUNDED";
    case DEGENERATE:
      return "DEGENERATE";
    case NUMFAILURE:
      return "NUMFAILURE";
    case USERABORT:
      return "USERABORT";
    case TIMEOUT:
      return "TIMEOUT";
    case PRESOLVED:
      return "PRESOLVED";
    case NOFEASFOUND:
      return "NOFEASFOUND";
    case NOBFP:
      return "NOBFP";
    case ACCURACYERROR:
      return "ACCURACYERROR";
    default:
      return "unknown";
  }
}

inline std::string version() {
  int major = 0, minor = 0, release = 0, build = 0;
  lp_solve_version(&major, &minor, &release, &build);
  return "lp_solve " + std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(release) + "." + std::to_string(build);
}

inline bool available() {
  lprec* lp = make_lp(0, 0);
  if (lp == nullptr) return false;
  delete_lp(lp);
  return true;
}

/// What the callbacks share with run(); values in lp_solve's (minimisation) sense, constant
/// excluded.
struct callback_state {
  const stopwatch* clock;
  progress_sink* sink;
  double limit;
  double constant;
  double incumbent = infinity;
  double root_bound = -infinity;
  bool root_seen = false;
  bool timed_out = false;
  std::int64_t node_limit = 0;  ///< 0: none
  bool node_limited = false;
  double next_poll = 0;
};

inline int __WINAPI on_abort(lprec* lp, void* handle) {
  auto& s = *static_cast<callback_state*>(handle);
  const double now = s.clock->elapsed();
  if (now > s.limit) {
    s.timed_out = true;
    return TRUE;
  }
  // Counted at the same points on every run: a stop that does not depend on the clock.
  if (s.node_limit > 0 && static_cast<std::int64_t>(get_total_nodes(lp)) >= s.node_limit) {
    s.node_limited = true;
    return TRUE;
  }
  if (s.sink->stop()) return TRUE;
  if (now >=
      s.next_poll) {  // the callback runs at every simplex iteration: report at most every ms
    s.next_poll = now + 1e-3;
    s.sink->report(s.incumbent + s.constant, s.root_bound + s.constant);
  }
  return FALSE;
}

inline void __WINAPI on_message(lprec* lp, void* handle, int msg) {
  auto& s = *static_cast<callback_state*>(handle);
  if ((msg & MSG_LPOPTIMAL) != 0 && !s.root_seen) {  // the first LP optimum is the root relaxation
    s.root_seen = true;
    s.root_bound = get_working_objective(lp);
  }
  if ((msg & (MSG_MILPFEASIBLE | MSG_MILPBETTER)) != 0) {
    s.incumbent = std::min(s.incumbent, static_cast<double>(get_working_objective(lp)));
    s.sink->report(s.incumbent + s.constant, s.root_bound + s.constant);
  }
}

inline result<solution> run(const model& m, const options& o) {
  const stopwatch clock;
  if (auto r = check_request(m, o); !r) return r.err();
  const flat_model f = flatten(m);
  if (auto t = trivial(m, f, clock)) return to_result(std::move(*t), "lp_solve");

  const int n = static_cast<int>(f.cols());
  const int rows = static_cast<int>(f.rows());
  // The rows first, empty, then the columns one by one: lp_solve stores the matrix by columns,
  // and rows added in row-entry mode after the objective shift it at every row (a 200-stage
  // chain's checkmate MILP took 60 s to load that way, past any time limit).
  std::unique_ptr<lprec, void (*)(lprec*)> owner(make_lp(rows, 0), [](lprec* p) { delete_lp(p); });
  lprec* lp = owner.get();
  if (lp == nullptr)
    return error{status::solver_error,
                 "lp_solve: make_lp failed for " + std::to_string(rows) + " rows (out of memory?)",
                 {}};
  set_verbose(lp, verbosity_level(o.verbosity));
  set_minim(lp);

  const double big = get_infinite(lp);
  auto clamp = [big](double v) { return std::isinf(v) ? (v > 0 ? big : -big) : v; };
  const bool limited = std::isfinite(o.time_limit);
  auto out_of_time = [&] {
    return to_result(
        make_solution(m, f, solve_status::time_limit, {}, std::numeric_limits<double>::quiet_NaN(),
                      clock.elapsed(), "lp_solve: the time limit passed while loading the model"),
        "lp_solve");
  };
  {
    std::vector<double> rh(static_cast<std::size_t>(rows) + 1, 0.0);
    for (int i = 0; i < rows; ++i) {
      const auto k = static_cast<std::size_t>(i);
      set_constr_type(lp, i + 1, row_type(f.rel[k]));
      rh[k + 1] = f.rhs[k];
    }
    set_rh_vec(lp, rh.data());
    // The matrix by columns (row 0: the objective).
    std::vector<std::size_t> start(static_cast<std::size_t>(n) + 1, 0);
    for (const int c : f.col) ++start[static_cast<std::size_t>(c) + 1];
    for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) start[j + 1] += start[j];
    std::vector<double> cval(f.val.size());
    std::vector<int> crow(f.val.size());
    std::vector<std::size_t> fill(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < f.rows(); ++i)
      for (std::size_t k = f.row_start[i]; k < f.row_start[i + 1]; ++k) {
        const std::size_t at = fill[static_cast<std::size_t>(f.col[k])]++;
        cval[at] = f.val[k];
        crow[at] = static_cast<int>(i) + 1;
      }
    std::vector<double> val;
    std::vector<int> row;
    for (int j = 0; j < n; ++j) {
      const auto k = static_cast<std::size_t>(j);
      if (limited && j % 1024 == 0 && clock.elapsed() > o.time_limit) return out_of_time();
      val.clear();
      row.clear();
      if (f.obj[k] != 0) {
        val.push_back(f.obj[k]);
        row.push_back(0);
      }
      val.insert(val.end(), cval.begin() + static_cast<std::ptrdiff_t>(start[k]),
                 cval.begin() + static_cast<std::ptrdiff_t>(start[k + 1]));
      row.insert(row.end(), crow.begin() + static_cast<std::ptrdiff_t>(start[k]),
                 crow.begin() + static_cast<std::ptrdiff_t>(start[k + 1]));
      if (!add_columnex(lp, static_cast<int>(val.size()), val.data(), row.data()))
        return error{status::solver_error,
                     "lp_solve: add_columnex failed on column " + std::to_string(j),
                     {}};
      if (!set_bounds(lp, j + 1, clamp(f.lower[k]), clamp(f.upper[k])))
        return error{
            status::solver_error, "lp_solve: set_bounds failed on column " + std::to_string(j), {}};
      if (f.integer[k]) set_int(lp, j + 1, TRUE);
    }
  }

  // lp_solve 5.5.2 infers the objective's smallest step from its integer coefficients
  // (MIP_stepOF) and prunes every node that cannot improve by that step; the inference can be
  // too large (a step of 3 for costs -5, 7, 3, 3, -5), so that optima are pruned: 26 of 30000
  // random tiny binary programs came back with a wrong "optimal" value. With a solution limit
  // other than 1 lp_solve leaves the step at 0, and none of 60000 did.
  set_solutionlimit(lp, 2);
  if (o.relative_gap > 0) set_mip_gap(lp, FALSE, o.relative_gap);
  if (std::isfinite(o.time_limit)) set_timeout(lp, static_cast<long>(std::ceil(o.time_limit)) + 1);

  // A feasible warm start becomes a cutoff (lp_solve 5.5 has no MIP start).
  std::vector<double> start;
  double start_obj = infinity;  // lp_solve's sense, constant excluded
  if (o.warm_start && f.has_integers()) {
    std::vector<double> w = *o.warm_start;
    for (std::size_t j = 0; j < w.size(); ++j)
      if (f.integer[j]) w[j] = std::round(w[j]);
    if (m.max_violation(w) <= 1e-6) {
      start = std::move(w);
      start_obj = f.sign * m.objective_value(start) - f.constant;
      set_obj_bound(lp,
                    start_obj - 1e-9 * std::max(1.0, std::abs(start_obj)));  // strictly better only
    }
  }

  progress_sink sink(o, f.sign, clock);
  callback_state cs{&clock, &sink, std::isfinite(o.time_limit) ? o.time_limit : infinity,
                    f.constant};
  cs.incumbent = start_obj;
  cs.node_limit = o.node_limit;
  put_abortfunc(lp, on_abort, &cs);
  put_msgfunc(lp, on_message, &cs, MSG_LPOPTIMAL | MSG_MILPFEASIBLE | MSG_MILPBETTER);

  const int code = ::solve(lp);
  sink.rethrow();  // the progress callback threw: the search was aborted for it

  const std::string said =
      version() + " returned " + std::string(code_name(code)) + " (" + std::to_string(code) + ")";
  auto values = [&] {
    std::vector<double> x(static_cast<std::size_t>(n));
    get_variables(lp, x.data());
    return x;
  };
  const double root = cs.root_seen ? cs.root_bound + f.constant : -infinity;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // With a warm start as cutoff, lp_solve may end without a solution of its own
  // (get_solutioncount 0) when nothing beats the start, and says so in several ways: OPTIMAL
  // (with meaningless values), INFEASIBLE, or ACCURACYERROR when the cutoff already cuts off the
  // root relaxation. The start is then optimal if the search completed or the root relaxation's
  // bound reaches it, and the best known solution otherwise.
  const bool have_start = !start.empty();
  const bool start_stands =
      have_start && get_solutioncount(lp) == 0 && code != UNBOUNDED && code != NOMEMORY;
  const bool root_reaches_start =
      have_start && cs.root_seen &&
      cs.root_bound >= start_obj - 1e-9 * std::max(1.0, std::abs(start_obj));
  solution s;
  if (start_stands && code == ACCURACYERROR && !root_reaches_start && !cs.timed_out &&
      clock.elapsed() < o.time_limit) {
    // Unproven only because the cutoff troubled lp_solve's root LP (seen on Checkmate's MILPs
    // fed their own optimum): solve again without the cutoff in the time left, and keep the
    // better of the two.
    options again = o;
    again.warm_start = std::nullopt;
    if (std::isfinite(o.time_limit)) again.time_limit = o.time_limit - clock.elapsed();
    auto r = run(m, again);
    if (r && r->is_optimal()) {
      if (f.sign * r->objective >=
          f.sign * m.objective_value(start) - 1e-9 * std::max(1.0, std::abs(start_obj)))
        r->values = start;  // the start is as good: return it, as proven
      r->objective = m.objective_value(r->values);
      r->seconds = clock.elapsed();
      r->message = said + "; solved again without the warm start's cutoff: " + r->message;
      return r;
    }
  }
  if (start_stands) {
    const bool proven =
        code == OPTIMAL || code == PRESOLVED || code == INFEASIBLE || root_reaches_start;
    s = make_solution(
        m, f, proven ? solve_status::optimal : solve_status::feasible, start, proven ? nan : root,
        clock.elapsed(),
        said + (proven ? "; nothing beats the warm start: it is optimal"
                       : "; nothing better than the warm start found in time: returning it"));
  } else {
    switch (code) {
      case OPTIMAL:
      case PRESOLVED:
        s = make_solution(m, f, solve_status::optimal, values(), o.relative_gap > 0 ? root : nan,
                          clock.elapsed(), said);
        break;
      case SUBOPTIMAL:  // stopped (time limit) with an incumbent
        s = make_solution(m, f, solve_status::feasible, values(), root, clock.elapsed(),
                          said + (cs.timed_out      ? ", stopped on the time limit"
                                  : cs.node_limited ? ", stopped on the node limit"
                                                    : ""));
        break;
      case ACCURACYERROR:  // numerical trouble; a solution it found is still checked and usable
        s = make_solution(m, f,
                          get_solutioncount(lp) > 0 ? solve_status::feasible : solve_status::error,
                          get_solutioncount(lp) > 0 ? values() : std::vector<double>{}, root,
                          clock.elapsed(), said + " (numerical accuracy)");
        break;
      case INFEASIBLE:
        s = make_solution(m, f, solve_status::infeasible, {}, nan, clock.elapsed(), said);
        break;
      case UNBOUNDED:
        s = make_solution(m, f, solve_status::unbounded, {}, nan, clock.elapsed(), said);
        break;
      case USERABORT:
      case TIMEOUT:
        if (cs.node_limited && get_solutioncount(lp) > 0)
          s = make_solution(m, f, solve_status::feasible, values(), root, clock.elapsed(),
                            said + ", stopped on the node limit");
        else
          s = make_solution(m, f, solve_status::time_limit, {}, root, clock.elapsed(), said);
        break;
      default:
        s = make_solution(m, f, solve_status::error, {}, nan, clock.elapsed(), said);
        break;
    }
  }
  s.node_limit_reached = cs.node_limited;
  if (s.has_values())
    sink.finish(f.sign * s.objective, f.sign * s.bound);
  else
    sink.finish(infinity, root);
  return to_result(std::move(s), "lp_solve");
}

}  // namespace remat::milp::detail::lpsolve_impl

// lp_solve's macros end here: every name back to what it was before this header.
#define REMAT_LPSOLVE_MACRO(name) REMAT_DETAIL_LPSOLVE_PRAGMA(pop_macro(#name))
#include <remat/milp/detail/lpsolve_macro_names.hpp>
#undef REMAT_LPSOLVE_MACRO
#undef REMAT_DETAIL_LPSOLVE_PRAGMA
