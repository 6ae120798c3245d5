// remat-plan --processors: pipelined model parallelism. The chain (JSON, with weight_bytes) is
// planned on P processors of --memory each, linked at --bandwidth, by a pipeline policy of the
// catalogue (policy/pipeline_catalogue.hpp: pipedream, madpipe); the plan is replayed by the
// pipeline simulator (its period and peaks are printed) and printed as its stages and its
// periodic pattern, or as one JSON object.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/io/json.hpp>
#include <remat/policy/pipeline_catalogue.hpp>
#include <remat/sim/pipeline.hpp>

#include "policies.hpp"
#include "remat_plan.hpp"

namespace remat_plan {

namespace {

std::string op_text(const remat::pipeline_op& op) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s%d@%.6g/h%+d",
                op.kind == remat::pipeline_op_kind::forward           ? "F"
                : op.kind == remat::pipeline_op_kind::backward        ? "B"
                : op.kind == remat::pipeline_op_kind::send_activation ? "A"
                                                                      : "G",
                op.stage, op.start, op.shift);
  return buf;
}

std::string rate_text(double bytes_per_second) {
  if (std::isinf(bytes_per_second)) return "infinite bandwidth (free transfers)";
  return remat::format_size(static_cast<remat::bytes>(bytes_per_second)) + "/s";
}

template <class P>
int plan_with(const options& o, const remat::pipeline_problem& problem) {
  P policy{};
  if constexpr (requires { policy.time_limit; })
    if (o.time_limit) policy.time_limit = *o.time_limit;
  if constexpr (requires { policy.progress; })
    if (o.progress)
      policy.progress = [](const auto& p) {
        if constexpr (requires { p.iteration; })
          std::cerr << "remat-plan: " << P::name << " run " << p.iteration << ": target "
                    << remat::format_seconds(p.target) << ", best " << remat::format_seconds(p.best)
                    << " after " << remat::format_seconds(p.elapsed) << '\n';
      };
  const auto s = policy.solve(problem);
  if (!s) return fail(o, &problem.layers, s.err());
  // The referee: replay the plan here, whatever the policy says.
  const remat::sim::pipeline_report r = remat::sim::simulate_pipeline(problem, s->plan);
  if (!r.valid)
    return fail(o, &problem.layers,
                remat::error{remat::status::solver_error,
                             std::string(P::name) +
                                 " returned a plan the pipeline simulator rejects (a bug in "
                                 "remat; please report it with the chain): " +
                                 (r.first_violation ? r.first_violation->message : std::string()),
                             {}});
  const auto& plan = s->plan;
  double total_work = 0;
  for (int l = 1; l <= problem.layers.length(); ++l)
    total_work += problem.layers.uf(l) + problem.layers.ub(l);
  if (o.json) {
    nlohmann::ordered_json j;
    j["status"] = "ok";
    j["policy"] = std::string(P::name);
    j["chain"] = problem.layers.name;
    j["processors"] = problem.processors;
    j["memory_bytes"] = problem.memory;
    j["bandwidth"] = problem.bandwidth;
    j["copies"] = problem.copies;
    j["period"] = r.normalized_period;
    j["pattern_period"] = r.period;
    j["k"] = r.k;
    j["predicted_period"] = s->predicted_period;
    j["scheduler"] = s->scheduler;
    j["planning_seconds"] = s->planning_seconds;
    j["sequential_time"] = total_work;
    auto stages = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < plan.stages.size(); ++i) {
      const auto& st = plan.stages[i];
      nlohmann::ordered_json e;
      e["first"] = st.first;
      e["last"] = st.last;
      e["processor"] = st.processor;
      e["concurrent_activations"] = r.nca[i];
      e["recompute"] = st.recompute.has_value();
      stages.push_back(e);
    }
    j["stages"] = stages;
    j["peak_bytes"] = r.processor_peaks;
    auto pattern = nlohmann::ordered_json::array();
    for (const auto& op : plan.ops)
      pattern.push_back({{"op", remat::to_string(op.kind)},
                         {"stage", op.stage},
                         {"start", op.start},
                         {"shift", op.shift}});
    j["pattern"] = pattern;
    print_json_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_ok;
  }
  std::cout << "chain     " << problem.layers.name << " (" << problem.layers.length()
            << " layers, the loss included)\n"
            << "policy    " << P::name << " (scheduled by " << s->scheduler << ", planned in "
            << remat::format_seconds(s->planning_seconds) << ")\n"
            << "machine   " << problem.processors << " processors of "
            << remat::format_bytes(problem.memory) << ", links of " << rate_text(problem.bandwidth)
            << ", " << problem.copies << " copies of the weights\n"
            << "period    " << remat::format_seconds(r.normalized_period)
            << " per mini-batch simulated (T = " << remat::format_seconds(r.period)
            << ", k = " << r.k << "); the DP predicted "
            << remat::format_seconds(s->predicted_period) << "; one processor would take "
            << remat::format_seconds(total_work) << " (speed-up "
            << (r.normalized_period > 0 ? total_work / r.normalized_period : 0) << "x)\n";
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const auto& st = plan.stages[i];
    std::cout << (i == 0 ? "stages    " : "          ") << i + 1 << ": layers " << st.first << ".."
              << st.last << " on processor " << st.processor << ", " << r.nca[i] << " activation"
              << (r.nca[i] == 1 ? "" : "s") << " in flight"
              << (st.recompute ? ", recomputes in its backward" : "") << '\n';
  }
  for (int p = 0; p < problem.processors; ++p)
    std::cout << (p == 0 ? "peaks     " : "          ") << "processor " << p << ": "
              << remat::format_bytes(r.processor_peaks[static_cast<std::size_t>(p)])
              << " simulated\n";
  std::vector<std::string> ops;
  for (const auto& op : plan.ops) ops.push_back(op_text(op));
  std::cout << "pattern   " << ops.size()
            << " ops, each <op><stage>@<start in the period>/h<shift>: F forward, B backward,\n"
            << "          A activation sent to the next stage, G gradient sent back\n";
  print_ops(ops);
  return exit_ok;
}

}  // namespace

int run_pipeline(const options& o) {
  const auto c = remat::io::load_chain(o.chain_path);
  if (!c) return fail(o, nullptr, c.err());
  remat::pipeline_problem problem;
  problem.layers = *c;
  problem.processors = *o.processors;
  if (o.memory) problem.memory = *o.memory;
  if (o.bandwidth) problem.bandwidth = o.bandwidth->value;
  if (o.copies) problem.copies = *o.copies;
  int status = exit_failed;
  bool found = false;
  auto run = [&]<class M>(std::type_identity<M>) {
    found = remat::with_policy<remat::pipeline_policies<M>>(
        o.policy, [&]<class P>(std::type_identity<P>) { status = plan_with<P>(o, problem); });
  };
  if (!o.solver.empty() && !with_solver(o.solver, run)) run(std::type_identity<naming_milp>{});
  if (o.solver.empty()) run(std::type_identity<naming_milp>{});
  if (!found)
    return fail(o, &problem.layers,
                remat::error{remat::status::invalid_problem,
                             "--policy " + o.policy + " is not a pipeline policy",
                             {}});
  return status;
}

}  // namespace remat_plan
