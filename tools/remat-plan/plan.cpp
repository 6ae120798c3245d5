// remat-plan's plan command: one path for every policy of the catalogue. The policy plans the
// chain (a chain policy on --chain) or the training graph; its schedule is replayed by the
// simulator on the machine the policy planned for (the referee: the printed makespan and peak
// are the simulator's), and the solution is printed as a summary or as one JSON object
// (io/solution_json.hpp).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/io/json.hpp>
#include <remat/io/solution_json.hpp>
#include <remat/io/trace.hpp>
#include <remat/policy/solution.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

#include "cli.hpp"
#include "policies.hpp"
#include "remat_plan.hpp"

namespace remat_plan {

namespace {

/// The policy's description in the summary: its name and the knobs in use.
template <class P>
std::string label_of(const options& o, const P& p) {
  std::vector<std::string> knobs;
  if constexpr (requires { p.inner; })
    knobs.push_back("blocks by " + std::string(decltype(p.inner)::name));
  if constexpr (uses_milp<P>)
    knobs.push_back(o.solver + (o.relax ? ", LP relaxation + rounding" : ", exact MILP"));
  if constexpr (requires {
                  p.large_block_ops;
                  p.large.relax;
                })
    if (p.large_block_ops > 0 && p.large.relax)
      knobs.push_back("blocks of more than " + std::to_string(p.large_block_ops) +
                      " forward ops by its LP relaxation");
  if constexpr (requires { p.slots; })
    knobs.push_back("slots " + std::to_string(p.slots) + (p.slots == 0 ? ", exact" : ""));
  if constexpr (requires { p.segments; })
    if (p.segments) knobs.push_back(std::to_string(*p.segments) + " segments");
  if constexpr (requires { p.snapshots; })
    if (p.snapshots) knobs.push_back(std::to_string(*p.snapshots) + " snapshots");
  if (o.time_limit) knobs.push_back("time limit " + remat::format_seconds(*o.time_limit));
  std::string s = o.policy;
  for (std::size_t i = 0; i < knobs.size(); ++i) s += (i == 0 ? " (" : ", ") + knobs[i];
  return knobs.empty() ? s : s + ")";
}

/// The policy's progress, shown on the display.
template <class P>
void show_progress(P& p, remat_cli::progress_display& display) {
  if (!display.on()) return;
  if constexpr (requires { p.progress = std::function<void(double)>{}; }) {
    p.progress = [&display](double f) { display.percent(f); };
  } else if constexpr (requires {
                         p.progress = std::function<void(const remat::milp::progress_report&)>{};
                       }) {
    p.progress = [&display](const remat::milp::progress_report& r) {
      display.report({.incumbent = r.incumbent, .bound = r.bound});
    };
  } else if constexpr (requires {
                         p.progress = std::function<void(const remat::rockmate_progress&)>{};
                       }) {
    p.progress = [&display](const remat::rockmate_progress& r) {
      display.report(
          {.blocks = std::pair{r.done, r.kinds}, .solves = std::pair{r.solves_done, r.solves}});
    };
  } else if constexpr (requires {
                         p.progress = std::function<void(const remat::hiremate_progress&)>{};
                       }) {
    p.progress = [&display](const remat::hiremate_progress& r) {
      display.report(
          {.blocks = std::pair{r.done, r.kinds},
           .solves = std::pair{r.solves_done, r.solves},
           .step = "level " + std::to_string(r.level) + " of " + std::to_string(r.levels)});
    };
  } else if constexpr (requires {
                         p.progress = std::function<void(const remat::portfolio_progress&)>{};
                       }) {
    p.progress = [&display](const remat::portfolio_progress& r) {
      display.report({.step = std::string(r.policy) + " (" + std::to_string(r.index + 1) + " of " +
                              std::to_string(r.count) + ")"});
    };
  }
}

template <class P>
constexpr bool reports_progress = requires(P p) {
  p.progress;
};

// --- what the summary says of each kind of details ------------------------------------------
// Nothing, unless an overload below says more.
template <class D>
std::optional<std::string> method_text(const D&) {
  return std::nullopt;
}
template <class D>
void print_after_makespan(const D&) {}
template <class D>
void print_after_peak(const D&) {}

/// How the plan was reached, when the details say (rotor's method).
inline std::optional<std::string> method_text(const remat::chain_dp_details& d) {
  using method = remat::chain_dp_details::method;
  if (d.how == method::dp && !d.exact_sizes)
    return "optimal for sizes rounded up to its slots, within --tolerance of the optimum at "
           "exact sizes unless the table grew too large to refine (--slots 0: exact sizes)";
  if (d.how == method::minimum_memory)
    return "not proven optimal: the fastest minimum-memory schedule (the budget is within "
           "rounding of the minimum at every affordable slot count; a slightly larger budget "
           "gets the DP's plan)";
  return std::nullopt;
}
template <class... Ds>
std::optional<std::string> method_text(const remat::portfolio_details<Ds...>& d) {
  return std::visit([](const auto& x) { return method_text(x); }, d.chosen_details);
}

template <class D>
std::string describe_optimality(const remat::solution<D>& s, bool optimal) {
  std::string text =
      optimal ? "proven optimal" : method_text(s.details).value_or("not proven optimal");
  if (!optimal && s.bound && std::isfinite(*s.bound)) {
    text += " (lower bound " + remat::format_seconds(*s.bound);
    if (*s.bound > 0) {
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.2f%%", 100.0 * (s.program.predicted_time / *s.bound - 1.0));
      text += std::string(", within ") + pct;
    }
    text += ")";
  }
  return text + ", solved in " + remat::format_seconds(s.solve_seconds);
}

/// The details' own lines of the summary (after the makespan, and after the peak).
inline void print_after_makespan(const remat::offload_details& d) {
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * d.overlap());
  std::string moved;
  for (std::size_t k = 0; k < d.offloaded.size(); ++k) {
    if (k == 16) {
      moved += " ... (" + std::to_string(d.offloaded.size() - k) + " more)";
      break;
    }
    moved += " a_" + std::to_string(d.offloaded[k]);
  }
  std::cout << "time      compute " << remat::format_seconds(d.compute_time) << ", transfers "
            << remat::format_seconds(d.transfer_time) << " (both lanes), idle "
            << remat::format_seconds(d.idle_time) << " (compute waiting for transfers)\n"
            << "overlap   "
            << (d.transfer_time > 0
                    ? std::string(pct) + " of the transfer time hidden behind compute"
                    : std::string("no transfers"))
            << "\noffloaded ";
  if (d.offloaded.empty())
    std::cout << "nothing\n";
  else
    std::cout << d.offloaded.size()
              << (d.offloaded.size() == 1 ? " activation, " : " activations, ")
              << remat::format_bytes(d.offloaded_bytes) << ":" << moved << '\n';
}
template <class... Ds>
void print_after_makespan(const remat::portfolio_details<Ds...>& d) {
  std::visit([](const auto& x) { print_after_makespan(x); }, d.chosen_details);
}

inline void print_after_peak(const remat::rockmate_details& d) {
  int recomputed = 0;
  for (const auto& b : d.blocks) recomputed += b.forward_runs > 1;
  std::cout << "blocks    " << d.blocks.size() << " blocks of " << d.kinds
            << " kinds (identical blocks solved once), options made in "
            << remat::format_seconds(d.options_time) << "; " << recomputed
            << " blocks recomputed whole\n";
  for (std::size_t k = 0; k < d.blocks.size() && k < d.block_chain.stages.size(); ++k)
    std::cout << "          " << d.block_chain.stages[k].name << ": kind " << d.blocks[k].kind + 1
              << ", option " << d.blocks[k].chosen << " of " << d.blocks[k].options
              << ", forward runs " << d.blocks[k].forward_runs << '\n';
  if (d.whole_graph_plans > 0)
    std::cout << "whole     " << d.whole_graph_plans
              << " plans of the whole graph by the inner policy's relaxation (one block is most "
                 "of it); the fastest that fits: "
              << (d.whole_graph_time ? remat::format_seconds(*d.whole_graph_time) : "none")
              << (d.whole_graph_chosen ? ", returned" : "") << '\n';
}
inline void print_after_peak(const remat::offmate_details& d) {
  if (d.continuous_batch)
    std::cout << "batch     " << d.batch
              << " times the graph's (the batch-size variant's 1/r: " << *d.continuous_batch
              << ", at best " << remat::format_seconds(d.time_per_sample.value_or(0))
              << " per unit of batch); the plan is for the graph at that batch\n";
  std::cout << "host      " << remat::format_bytes(d.host_peak_bytes)
            << " simulated (parameters, optimizer states, gradients, activations offloaded)\n"
            << "fractions " << remat::format_seconds(d.fractional_makespan)
            << " the O-ILP's plan in fractions of parameter groups (whole tensors above)\n"
            << "blocks    " << d.blocks.size() << " blocks (" << d.run_length
            << " of the graph's cut each at most); bytes of the parameters each block reads "
               "first:\n";
  std::vector<std::vector<std::string>> rows = {{"block", "option", "parameters", "leave GPU",
                                                 "states", "on host", "CPU update", "GPU update"}};
  auto size = [](remat::bytes b) { return b == 0 ? std::string("-") : remat::format_size(b); };
  for (const auto& b : d.blocks)
    rows.push_back({b.name, b.option, size(b.parameter_bytes), size(b.offloaded_bytes),
                    size(b.state_bytes), size(b.states_on_host_bytes), size(b.cpu_update_bytes),
                    size(b.gpu_update_bytes)});
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  for (const auto& r : rows) {
    std::cout << "         ";
    for (std::size_t i = 0; i < r.size(); ++i)
      std::cout << ' ' << (i < 2 ? std::left : std::right) << std::setw(static_cast<int>(width[i]))
                << r[i];
    std::cout << std::right << '\n';
  }
}
inline void print_after_peak(const remat::mixed_mode_details& d) {
  std::cout << "segments  " << d.segments.size() << " (" << remat::to_string(d.search)
            << " search, shares of " << d.slots << " slots):\n";
  for (const auto& sg : d.segments) {
    std::cout << "          stages " << sg.first << ".." << sg.last << " "
              << remat::to_string(sg.mode) << ", share " << remat::format_size(sg.share) << ", "
              << remat::format_seconds(sg.time);
    if (sg.overhead > 0)
      std::cout << " (+ " << remat::format_seconds(sg.overhead) << " runtime overhead)";
    std::cout << '\n';
  }
}
template <class... Ds>
void print_after_peak(const remat::portfolio_details<Ds...>& d) {
  std::cout << "portfolio " << d.chosen << "'s plan is the fastest of " << d.entries.size()
            << " policies:\n";
  for (const auto& e : d.entries) {
    std::cout << "          " << e.policy << ": ";
    if (e.code == remat::status::ok)
      std::cout << remat::format_seconds(e.makespan) << ", peak " << remat::format_size(e.peak)
                << (e.optimal ? ", proven optimal" : "");
    else
      std::cout << remat::to_string(e.code);
    std::cout << " (" << remat::format_seconds(e.solve_seconds) << ")\n";
  }
  std::visit([](const auto& x) { print_after_peak(x); }, d.chosen_details);
}

/// Plans with P on the chain (when P has a detailed chain solve and the input is a chain) or
/// on the training graph, and prints the plan.
template <class P>
int plan_with(const options& o, const loaded_problem& lp) {
  const remat::chain* c = lp.chain ? &*lp.chain : nullptr;
  const remat::graph& input = *lp.graph;
  P p = configured<P>(o);
  // A portfolio on a graph runs MILPs: a minute unless --time-limit says otherwise.
  if constexpr (detail::is_best_of<P>)
    if (!o.time_limit && !c) p.time_limit = 60;
  remat_cli::progress_display display(o.policy, progress_mode(o, reports_progress<P>));
  show_progress(p, display);
  auto run = [&](const auto& problem) {
    auto r = p.solve_detailed(problem, o.budget);
    display.done(r.ok());
    return r;
  };
  auto finish = [&](auto planned, bool on_chain) -> int {
    if (!planned) return fail(o, c, planned.err());
    const auto& s = *planned;
    // The graph the program is for: the input's, or the input's at the batch chosen.
    std::optional<remat::graph> scaled;
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(s.details)>, remat::offmate_details>)
      if (s.details.batch > 1) scaled = remat::at_batch(input, s.details.batch);
    const remat::graph& g = scaled ? *scaled : input;
    const remat::machine hw = remat::machine_of(p);
    const bool record = o.trace.has_value() || !o.svg.empty();
    const remat::sim::report r =
        on_chain ? remat::sim::simulate(*c, s.program,
                                        {.budget = o.budget, .record_timeline = record, .hw = hw})
                 : remat::sim::simulate(g, s.program,
                                        {.budget = o.budget, .record_timeline = record, .hw = hw});
    if (!r.valid)
      return fail(
          o, c,
          remat::error{remat::status::solver_error,
                       o.policy +
                           " returned a schedule the simulator rejects (a bug in remat; "
                           "please report it with the " +
                           (on_chain ? "chain" : "graph") + "): " + r.first_violation->message,
                       {}});
    const remat::schedule all{remat::store_all_program(g), g.ideal_time(), 0};
    const remat::bytes store_all_peak =
        remat::sim::simulate(g, all, {.record_timeline = false}).peak;
    const double ideal = g.ideal_time();
    const bool optimal = s.optimal || r.makespan <= ideal;
    const std::string label = label_of(o, p);
    if (o.trace) {
      const auto t = remat::io::chrome_trace(
          on_chain ? remat::io::trace_of(*c, s.program, r, "planned: " + o.policy, o.budget)
                   : remat::io::trace_of(g, s.program, r, "planned: " + o.policy, o.budget));
      if (auto e = write_trace_text(o, t)) return fail(o, c, *e);
    }
    std::string picture;
    if (!o.svg.empty()) {
      const remat::io::timeline_labels named{c ? c->name : g.name, on_chain ? label : o.policy};
      auto w = write_timeline(
          o, r, on_chain ? named.with_program(*c, s.program) : named.with_program(g, s.program));
      if (!w) return fail(o, c, w.err());
      picture = *w;
    }
    if (o.json) {
      nlohmann::ordered_json j;
      j["status"] = "ok";
      j["policy"] = o.policy;
      if constexpr (uses_milp<P>) {
        j["solver"] = o.solver;
        j["relaxed"] = o.relax;
      }
      if (c) j["chain"] = c->name;
      if (!on_chain) j["graph"] = g.name;
      j["budget_bytes"] = o.budget;
      const nlohmann::ordered_json sol = remat::io::to_json(
          s, on_chain ? remat::io::to_json(s.program, *c) : remat::io::to_json(s.program));
      for (const auto& [key, value] : sol.items()) {
        if (key == "makespan") {
          j["makespan"] = r.makespan;  // the referee's
        } else if (key == "peak_bytes") {
          j["peak_bytes"] = r.peak;
          if constexpr (remat::PlansTransfers<P>) j["host_peak_bytes"] = r.host_peak;
          j["store_all_time"] = ideal;
          j["store_all_peak_bytes"] = store_all_peak;
        } else if (key == "optimal") {
          j["optimal"] = optimal;
        } else {
          j[key] = value;
        }
      }
      print_json_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return exit_ok;
    }
    constexpr bool transfers = remat::PlansTransfers<P>;
    if (on_chain)
      std::cout << "chain     " << c->name << " (" << c->length() << " stages, input "
                << remat::format_size(c->input_bytes) << ")\n";
    else if (c)
      std::cout << "chain     " << c->name << " (" << c->length()
                << " stages), planned as its training graph\n";
    if (!on_chain)
      std::cout << "graph     " << g.name << " (" << g.compute_count() << " compute nodes, "
                << g.data_count() << " data nodes)\n";
    std::cout << "policy    " << label << '\n';
    if constexpr (transfers)
      std::cout << "transfers " << describe_rates(hw.device_to_host, hw.host_to_device) << '\n';
    std::cout << "budget    " << remat::format_bytes(o.budget) << '\n'
              << "makespan  " << remat::format_seconds(r.makespan)
              << (transfers ? " program (simulated), " : " predicted, ")
              << format_overhead(r.makespan, ideal) << " over store-all ("
              << remat::format_seconds(ideal) << ")\n";
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(s.details)>, remat::offload_details>)
      std::cout << "          " << remat::format_seconds(s.details.model_time)
                << " model time (pofo's model, docs/offloading.md; whole-tensor copies may cost "
                   "the program more, not waiting at the loss may save)\n";
    std::cout << "          " << describe_optimality(s, optimal) << '\n';
    print_after_makespan(s.details);
    std::cout << "peak      " << remat::format_bytes(r.peak) << " simulated; store-all needs "
              << remat::format_bytes(store_all_peak) << '\n';
    print_after_peak(s.details);
    for (const auto& n : s.notes) std::cout << "note      " << in_cli_terms(n) << '\n';
    if (!picture.empty()) std::cout << picture << '\n';
    std::vector<std::string> ops;
    if (on_chain) {
      // The chain notation where the program is the lowering of chain ops (every chain
      // policy's but those whose runtime evicts parts of what a backward needs: mixed_mode).
      if (const auto chain_ops = remat::to_chain_ops(c->length(), s.program)) {
        for (const auto& i : *chain_ops) ops.push_back(remat::to_string(i));
        std::cout << "schedule  " << ops.size()
                  << " ops; F<l>_none keeps only stage l's output, F<l>_ck also its input,\n"
                  << "          F<l>_all also all that the backward B<l> needs";
        if (transfers)
          std::cout << "; O<k> offloads a_k to the host,\n"
                    << "          P<k> prefetches it back, W<k> waits for its transfer";
      } else {
        for (const auto& i : s.program.ops) ops.push_back(remat::to_string(i));
        std::cout << "schedule  " << ops.size()
                  << " instructions of the chain's training graph: C<n> runs node n (\"_ff\": "
                     "a forward\n          without what its backward needs), D<d> frees datum "
                     "d (docs/training-graph.md)";
      }
      std::cout << '\n';
      print_ops(ops);
    } else {
      for (const auto& i : s.program.ops) ops.push_back(remat::to_string(g, i));
      std::cout << "schedule  " << ops.size()
                << " ops: run a node (\"[ff]\": a forward without what its backward needs),\n"
                << "          or free a data node\n";
      print_ops(ops, "; ");
    }
    return exit_ok;
  };
  if constexpr (remat::DetailedPolicy<P, remat::chain>) {
    if (c) return finish(run(*c), true);
  }
  if constexpr (remat::DetailedPolicy<P, remat::graph>) {
    return finish(run(input), false);
  } else {
    return fail(o, c,
                remat::error{remat::status::invalid_problem,
                             o.policy + " plans chains only; for --graph use a graph policy",
                             {}});
  }
}

}  // namespace

int run_plan(const options& o) {
  const loaded_problem lp = load_problem(o);
  if (!lp.graph) return fail(o, lp.chain ? &*lp.chain : nullptr, lp.graph.err());
  int code = exit_failed;
  const bool graph = !lp.chain;
  if (!with_policy(o, graph, [&]<class P>(std::type_identity<P>) { code = plan_with<P>(o, lp); }))
    return fail(o, nullptr,
                remat::error{remat::status::invalid_problem,
                             "the policy '" + o.policy + "' is not in this build",
                             {}});
  return code;
}

}  // namespace remat_plan
