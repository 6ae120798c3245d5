#pragma once
// remat::milp::cbc: the MILP backend over COIN-OR CBC (target remat::cbc; Debian
// coinor-libcbc-dev). Opt-in: no other remat header includes this one. It uses CBC's C++ API (the
// driver behind Cbc_solve with CBC's default cuts and heuristics) for its event handler, which
// reports progress and stops at the time limit; CBC is not thread-safe across models, so solves
// are serialised. docs/milp.md, "CBC".

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/milp/detail/backend.hpp>
#include <remat/milp/model.hpp>

namespace remat::milp {

namespace detail::cbc_impl {
inline result<solution> run(const model& m, const options& o, bool preprocess,
                            const std::vector<std::string>& parameters);
inline bool available();
}  // namespace detail::cbc_impl

/// COIN-OR CBC: branch and cut with CBC's default cuts and heuristics, optionally threaded.
/// The default choice when it is available (far faster than lp_solve on Checkmate's MILPs).
struct cbc {
  static constexpr std::string_view name = "cbc";
  /// CBC's preprocessing (CglPreProcess). Off by default: with it, CBC 2.10.8 returned a wrong
  /// optimum or a false "infeasible" on 13 of 10000 random small MILPs (integer and continuous
  /// variables) and a wrong optimum on 5 of 20000 small integer programs checked by enumeration,
  /// where CBC without it (and lp_solve) got all of them right. It speeds up some hard models;
  /// turn it on only for models you have checked it on.
  bool preprocess = false;
  /// More CBC settings in the form of its command line, passed after ours and before "-solve"
  /// (so they win), e.g. {"-cuts", "off"} or {"-strongBranching", "0"}. CBC ignores what it does
  /// not know, with a message at verbosity 1 and up.
  std::vector<std::string> parameters = {};

  /// True when the CBC libraries answer (they are linked in through remat::cbc).
  [[nodiscard]] static bool available() { return detail::cbc_impl::available(); }
  [[nodiscard]] result<solution> solve(const model& m, const options& o = {}) const {
    return detail::cbc_impl::run(m, o, preprocess, parameters);
  }
};

}  // namespace remat::milp

// CBC's headers last: only this backend sees them.
#include <CbcEventHandler.hpp>
#include <CbcHeuristicDive.hpp>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

namespace remat::milp::detail::cbc_impl {

inline bool available() {
  OsiClpSolverInterface probe;
  return probe.getNumCols() == 0;
}

/// CbcMain1 keeps global state: one solve at a time per process.
inline std::mutex& solve_mutex() {
  static std::mutex m;
  return m;
}

/// What the event handlers (one per CBC model copy) share with run().
struct shared_state {
  const stopwatch* clock;
  progress_sink* sink;
  double limit;
  double constant;  ///< objective constant in CBC's (minimisation) sense
  double relative_gap = 0;
  std::atomic<bool> timed_out = false;
  std::atomic<bool> gap_reached = false;
};

/// Reports the main search's progress and stops it at the time limit. CBC clones the handler
/// into every model it derives (the search's model, heuristics' sub-models, threads), so the
/// clone shares the state and skips the sub-models (those with a parent model).
class event_handler final : public CbcEventHandler {
 public:
  explicit event_handler(shared_state* s) : s_(s) {}
  [[nodiscard]] CbcEventHandler* clone() const override { return new event_handler(*this); }

  CbcAction event(CbcEvent e) override {
    if (model_ == nullptr || model_->parentModel() != nullptr) return noAction;
    // CBC's diving heuristics run to their own limit (60 CPU seconds each) without an event:
    // one ran 1.5 s past a 1 s limit on a 12-stage chain's checkmate MILP. Each event gives
    // them what is left of ours.
    if (std::isfinite(s_->limit))
      for (int i = 0; i < model_->numberHeuristics(); ++i)
        if (auto* dive = dynamic_cast<CbcHeuristicDive*>(model_->heuristic(i)))
          dive->setMaxTime(std::max(1e-3, s_->limit - s_->clock->elapsed()));
    const bool node_event = e == node || e == treeStatus;
    // Also between the root's cut passes and heuristics, which can take long on large models.
    const bool may_stop =
        node_event || e == generatedCuts || e == heuristicPass || e == afterHeuristic;
    if (may_stop && s_->clock->elapsed() > s_->limit) {
      s_->timed_out = true;
      return stop;
    }
    if (node_event && s_->sink->stop()) return stop;
    // CBC checks -ratioGap between nodes only, not during the root's cut passes and heuristics,
    // where its bound can sit within the gap for seconds (a 14-op graph's checkmate MILP: 0.5 %
    // from 0.56 s, stopped at 3.8 s); checked here at every event, which no clock decides.
    if (may_stop && s_->relative_gap > 0 && model_->bestSolution() != nullptr) {
      const double incumbent = model_->getObjValue() + s_->constant;
      const double bound = model_->getBestPossibleObjValue() + s_->constant;
      if (incumbent - bound <= s_->relative_gap * std::max(1e-9, std::abs(incumbent))) {
        s_->gap_reached = true;
        return stop;
      }
    }
    if (node_event || e == solution || e == heuristicSolution || e == endSearch)
      s_->sink->report(model_->getObjValue() + s_->constant,
                       model_->getBestPossibleObjValue() + s_->constant);
    return noAction;
  }

 private:
  shared_state* s_;
};

/// CbcMain1's hook; at 3 (just before branch and bound) it switches off Clp's "crunch" (node LPs
/// shrunk by dropping fixed rows and columns), which fails an assertion that aborts the process
/// on small models in CBC 2.10.8 (coin-or/Cbc#684, coin-or/Clp#288: two variables and a
/// singleton row are enough). CbcMain1 sets the solver's options itself, hence the hook.
inline int before_search(CbcModel* model, int where_from) {
  if (where_from == 3)
    if (auto* clp = dynamic_cast<OsiClpSolverInterface*>(model->solver()))
      clp->setSpecialOptions((clp->specialOptions() & ~1U) | 2048U);
  return 0;
}

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// The same random numbers for every solve, whatever ran before in the process: Clp perturbs
/// degenerate LPs with CoinDrand48's process-wide generator, which CBC's searches advance, so an
/// LP relaxation's optimal vertex (and checkmate's roundings of it) depended on the solves before
/// it (bench_checkmate's residual_relaxed/20: 176.5 alone, 292.5 after six exact solves).
inline void same_random_state(ClpSimplex& clp) {
  CoinSeedRandom(1234567);
  clp.setRandomSeed(1234567);
}

/// Whether Clp's presolve, which does not look at the clock, may run with `left` seconds to go:
/// when that is five times a generous estimate of its time (2 microseconds per nonzero; it took
/// 1.7 s on the 2.0 million nonzeros of a 200-stage chain's checkmate LP). Without it, a
/// degenerate LP may end at another optimal vertex: checkmate's roundings of the LP relaxation of
/// bench_checkmate's 20-block residual net gave 292.5 instead of 176.5 without presolve.
inline bool presolve_fits(const flat_model& f, double left) {
  return left >= 5 * 2e-6 * static_cast<double>(f.val.size());
}

/// A continuous model: Clp alone.
inline solution solve_lp(const model& m, const flat_model& f, OsiClpSolverInterface& solver,
                         const options& o, const stopwatch& clock, progress_sink& sink) {
  ClpSimplex* clp = solver.getModelPtr();
  same_random_state(*clp);
  if (std::isfinite(o.time_limit)) {
    // Wall-clock seconds, and no presolve unless there is ample time for it (see presolve_fits).
    clp->setMaximumWallSeconds(std::max(1e-3, o.time_limit - clock.elapsed()));
    if (!presolve_fits(f, o.time_limit - clock.elapsed()))
      solver.setHintParam(OsiDoPresolveInInitial, false, OsiHintDo);
  }
  solver.initialSolve();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string who = std::string("Clp ") + CLP_VERSION;
  solution s;
  if (solver.isProvenOptimal()) {
    const double* x = solver.getColSolution();
    s = make_solution(m, f, solve_status::optimal, std::vector<double>(x, x + f.cols()), nan,
                      clock.elapsed(), who + ": optimal");
  } else if (solver.isProvenPrimalInfeasible()) {
    s = make_solution(m, f, solve_status::infeasible, {}, nan, clock.elapsed(),
                      who + ": primal infeasible");
  } else if (solver.isProvenDualInfeasible()) {
    s = make_solution(m, f, solve_status::unbounded, {}, nan, clock.elapsed(),
                      who + ": dual infeasible (unbounded)");
  } else if (clp->status() == 3) {  // stopped on iterations or time
    s = make_solution(m, f, solve_status::time_limit, {}, nan, clock.elapsed(),
                      who + ": stopped on the time limit");
  } else {
    s = make_solution(m, f, solve_status::error, {}, nan, clock.elapsed(),
                      who + ": status " + std::to_string(clp->status()) + " (numerical trouble?)");
  }
  if (s.has_values())
    sink.finish(f.sign * s.objective, f.sign * s.bound);
  else
    sink.finish(infinity, -infinity);
  return s;
}

inline result<solution> run(const model& m, const options& o, bool preprocess,
                            const std::vector<std::string>& parameters) {
  const stopwatch clock;
  if (auto r = check_request(m, o); !r) return r.err();
  const flat_model f = flatten(m);
  if (auto t = trivial(m, f, clock)) return to_result(std::move(*t), "CBC");

  // Columns with their bounds and costs, rows as lower <= a x <= upper, matrix by rows.
  const std::size_t n = f.cols();
  const double big = COIN_DBL_MAX;
  std::vector<double> row_lower, row_upper;
  row_lower.reserve(f.rows());
  row_upper.reserve(f.rows());
  for (std::size_t i = 0; i < f.rows(); ++i) {
    row_lower.push_back(f.rel[i] == relation::less_equal ? -big : f.rhs[i]);
    row_upper.push_back(f.rel[i] == relation::greater_equal ? big : f.rhs[i]);
  }
  std::vector<CoinBigIndex> starts(f.row_start.begin(), f.row_start.end());
  std::vector<int> lengths;
  lengths.reserve(f.rows());
  for (std::size_t i = 0; i < f.rows(); ++i)
    lengths.push_back(static_cast<int>(f.row_start[i + 1] - f.row_start[i]));
  const CoinPackedMatrix matrix(false, static_cast<int>(n), static_cast<int>(f.rows()),
                                static_cast<CoinBigIndex>(f.val.size()), f.val.data(), f.col.data(),
                                starts.data(), lengths.data());
  std::vector<double> lower(f.lower), upper(f.upper);
  for (auto& v : lower) v = std::max(v, -big);
  for (auto& v : upper) v = std::min(v, big);

  std::lock_guard serial(solve_mutex());
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(o.verbosity <= 0 ? 0 : o.verbosity == 1 ? 1 : 3);
  solver.loadProblem(matrix, lower.data(), upper.data(), f.obj.data(), row_lower.data(),
                     row_upper.data());
  solver.setObjSense(1.0);
  for (std::size_t j = 0; j < n; ++j)
    if (f.integer[j]) solver.setInteger(static_cast<int>(j));

  progress_sink sink(o, f.sign, clock);
  // Out of time before branch and bound: the warm start, if any, is the answer.
  auto out_of_time = [&](const char* where) {
    const std::string why =
        std::string("CBC ") + CBC_VERSION + ": stopped on the time limit " + where;
    solution s =
        o.warm_start
            ? make_solution(m, f, solve_status::feasible, *o.warm_start, -infinity, clock.elapsed(),
                            why + "; the warm start is the best schedule")
            : make_solution(m, f, solve_status::time_limit, {}, std::nan(""), clock.elapsed(), why);
    if (s.has_values())
      sink.finish(f.sign * s.objective, -infinity);
    else
      sink.finish(infinity, -infinity);
    sink.rethrow();
    return to_result(std::move(s), "CBC");
  };
  if (std::isfinite(o.time_limit) && clock.elapsed() > o.time_limit)
    return out_of_time("while loading the model");
  if (!f.has_integers()) {
    solution s = solve_lp(m, f, solver, o, clock, sink);
    sink.rethrow();
    return to_result(std::move(s), "CBC");
  }

  // MIP start by column names (CBC's interface for it). Rows are named too: with column names
  // and none for the rows, Clp's presolve in CBC's last resolve (after a stop on the time limit)
  // read past the empty row-name list and crashed (CBC 2.10.8, a known Clp bug).
  std::vector<std::pair<std::string, double>> start;
  if (o.warm_start) {
    for (std::size_t i = 0; i < f.rows(); ++i)
      solver.setRowName(static_cast<int>(i), "r" + std::to_string(i));
    start.reserve(n);
    for (std::size_t j = 0; j < n; ++j) {
      std::string col_name = "x" + std::to_string(j);
      solver.setColName(static_cast<int>(j), col_name);
      const double v = (*o.warm_start)[j];
      start.emplace_back(std::move(col_name), f.integer[j] ? std::round(v) : v);
    }
  }

  // The root LP first, under Clp's own wall-clock limit and without Clp's presolve (which does
  // not look at the clock): CbcMain1 solves it without a limit (a 40-stage chain's checkmate MILP
  // took 5 s in that one call with a 1 s limit), and CBC starts from the optimal basis this
  // leaves in the solver. (With presolve here when time allows, bench_checkmate's 20-op chain
  // took 3.9 s instead of 0.9 s.)
  if (std::isfinite(o.time_limit)) {
    // Clp sets up (factorises) before it first looks at the clock: about 0.3 microseconds per
    // nonzero (0.5-0.9 s on a 250-stage chain's 3 million); with less than a microsecond per
    // nonzero left, the root LP is not started.
    if (o.time_limit - clock.elapsed() < 1e-6 * static_cast<double>(f.val.size()))
      return out_of_time("before the root LP (too little time left to start it)");
    ClpSimplex* clp = solver.getModelPtr();
    clp->setMaximumWallSeconds(std::max(1e-3, o.time_limit - clock.elapsed()));
    solver.setHintParam(OsiDoPresolveInInitial, false, OsiHintDo);
    solver.initialSolve();
    clp->setMaximumWallSeconds(-1);
    if (solver.isProvenPrimalInfeasible()) {
      solution s = make_solution(
          m, f, solve_status::infeasible, {}, std::nan(""), clock.elapsed(),
          std::string("CBC ") + CBC_VERSION + ": the LP relaxation is infeasible (Clp)");
      sink.finish(infinity, -infinity);
      sink.rethrow();
      return to_result(std::move(s), "CBC");
    }
    if (!solver.isProvenOptimal() && clp->status() == 3) return out_of_time("in the root LP");
  }

  same_random_state(*solver.getModelPtr());
  CbcModel cbc_model(solver);
  CbcSolverUsefulData data;
  CbcMain0(cbc_model, data);
  data.noPrinting_ = o.verbosity <= 0;
  data.useSignalHandler_ = false;
  cbc_model.setLogLevel(o.verbosity <= 0 ? 0 : o.verbosity == 1 ? 1 : 3);
  if (!start.empty()) cbc_model.setMIPStart(start);

  shared_state state{&clock, &sink, std::isfinite(o.time_limit) ? o.time_limit : infinity,
                     f.constant, o.relative_gap};
  const event_handler handler(&state);
  cbc_model.passInEventHandler(&handler);

  const std::string log = std::to_string(o.verbosity <= 0 ? 0 : o.verbosity == 1 ? 1 : 3);
  const std::string secs = num(std::max(1e-3, o.time_limit - clock.elapsed()));
  const std::string gap = num(o.relative_gap);
  const std::string threads = std::to_string(o.threads);
  const std::string nodes = std::to_string(o.node_limit);
  std::vector<const char*> argv{"remat", "-log", log.c_str(), "-timeMode", "elapsed"};
  if (std::isfinite(o.time_limit)) argv.insert(argv.end(), {"-sec", secs.c_str()});
  if (o.relative_gap > 0) argv.insert(argv.end(), {"-ratioGap", gap.c_str()});
  if (o.threads > 1) argv.insert(argv.end(), {"-threads", threads.c_str()});
  if (o.node_limit > 0) argv.insert(argv.end(), {"-maxNodes", nodes.c_str()});
  if (!preprocess) argv.insert(argv.end(), {"-preprocess", "off"});
  for (const auto& p : parameters) argv.push_back(p.c_str());
  argv.insert(argv.end(), {"-solve", "-quit"});
  try {
    CbcMain1(static_cast<int>(argv.size()), argv.data(), cbc_model, before_search, data);
  } catch (const CoinError& e) {
    sink.rethrow();
    return error{status::solver_error,
                 "CBC: " + e.className() + "::" + e.methodName() + ": " + e.message(),
                 {}};
  }
  sink.rethrow();

  const std::string who = std::string("CBC ") + CBC_VERSION;
  const std::string said = who + ": status " + std::to_string(cbc_model.status()) +
                           ", secondary status " + std::to_string(cbc_model.secondaryStatus());
  const double* best = cbc_model.bestSolution();
  const double bound = cbc_model.getBestPossibleObjValue() + f.constant;
  const bool stopped = state.timed_out || cbc_model.isSecondsLimitReached() ||
                       cbc_model.status() == 1 || cbc_model.secondaryStatus() == 4 ||
                       cbc_model.secondaryStatus() == 5;
  const bool node_limited = !state.timed_out && !state.gap_reached &&
                            !cbc_model.isSecondsLimitReached() &&
                            (cbc_model.isNodeLimitReached() || cbc_model.secondaryStatus() == 3);
  const std::string why = node_limited ? " (stopped on the node limit of " + nodes + " nodes)"
                                       : " (stopped on the time limit)";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  solution s;
  if (best != nullptr && (cbc_model.isProvenOptimal() || state.gap_reached)) {
    s = make_solution(m, f, solve_status::optimal, std::vector<double>(best, best + n), bound,
                      clock.elapsed(),
                      said + (state.gap_reached ? " (within the relative gap)" : " (optimal)"));
  } else if (best != nullptr && stopped) {
    s = make_solution(m, f, solve_status::feasible, std::vector<double>(best, best + n), bound,
                      clock.elapsed(), said + why);
  } else if (best == nullptr && stopped) {
    s = make_solution(m, f, solve_status::time_limit, {}, bound, clock.elapsed(), said + why);
  } else if (cbc_model.isProvenInfeasible()) {
    s = make_solution(m, f, solve_status::infeasible, {}, nan, clock.elapsed(),
                      said + " (infeasible)");
  } else if (cbc_model.isContinuousUnbounded() || cbc_model.secondaryStatus() == 7) {
    s = make_solution(m, f, solve_status::unbounded, {}, nan, clock.elapsed(),
                      said + " (relaxation unbounded)");
  } else {
    s = make_solution(m, f, solve_status::error, {}, nan, clock.elapsed(),
                      said + (cbc_model.isAbandoned() ? " (abandoned: numerical trouble)" : ""));
  }
  s.node_limit_reached = node_limited && stopped;
  if (s.has_values())
    sink.finish(f.sign * s.objective, f.sign * s.bound);
  else
    sink.finish(infinity, std::isfinite(s.bound) ? f.sign * s.bound : -infinity);
  return to_result(std::move(s), "CBC");
}

}  // namespace remat::milp::detail::cbc_impl
