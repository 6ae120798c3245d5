#pragma once
// JSON of remat's own results (nlohmann_json; link remat::json): a solution of any policy of the
// catalogue, a simulator report and a sweep. remat-plan writes its --json output with these, and
// docs/json-format.md describes every field.
//   to_json(solution, program)  makespan, peak_bytes, optimal, solve_seconds, bound, notes, the
//                               policy's details and the program (io/json.hpp's to_json of it)
//   write_details(j, details)   a policy's details into j: a customization point, one overload
//                               per details type (found by argument-dependent lookup)
//   to_json(sim::report)        valid, peak_bytes, host_peak_bytes, makespan, violation
//   to_json(sweep_result)       the points of every policy at every budget

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/io/json.hpp>
#include <remat/policy/best_of.hpp>
#include <remat/policy/details.hpp>
#include <remat/policy/solution.hpp>
#include <remat/sim/report.hpp>
#include <remat/sweep_result.hpp>

namespace remat {

/// A transfer rate in JSON: bytes per second, null for infinity (instantaneous transfers).
inline nlohmann::ordered_json rate_json(double v) {
  return std::isinf(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v);
}

// The details of the catalogue's policies. They live in namespace remat, beside the types, so
// that a policy of a user's own namespace adds its overload beside its own details type.

inline void write_details(nlohmann::ordered_json&, const no_details&) {}

/// rotor, rotor_floating: "method" (store_all, dp, minimum_memory), and "dp_slots" for dp.
inline void write_details(nlohmann::ordered_json& j, const chain_dp_details& d) {
  j["method"] = std::string(to_string(d.how));
  if (d.how == chain_dp_details::method::dp) j["dp_slots"] = d.slots;
}

inline void write_details(nlohmann::ordered_json& j, const periodic_details& d) {
  j["segments"] = d.segments;
}

inline void write_details(nlohmann::ordered_json& j, const revolve_details& d) {
  j["snapshots"] = d.snapshots;
}

/// The multi-chain DP: its slots, m_min, forwards and program in the thesis' operations.
inline void write_details(nlohmann::ordered_json& j, const multi_chain_details& d) {
  j["slots"] = d.slots;
  j["minimum_slots"] = d.minimum_slots;
  j["forwards"] = d.forwards;
  j["ops"] = to_string(d.ops);
}

/// The offloading policies: "offload": {rates, what moved, model and program times}.
inline void write_details(nlohmann::ordered_json& j, const offload_details& d) {
  nlohmann::ordered_json off;
  off["bandwidth_d2h"] = rate_json(d.hw.device_to_host);
  off["bandwidth_h2d"] = rate_json(d.hw.host_to_device);
  off["offloaded"] = d.offloaded;
  off["offloaded_bytes"] = d.offloaded_bytes;
  off["model_time"] = d.model_time;
  off["compute_time"] = d.compute_time;
  off["transfer_time"] = d.transfer_time;
  off["idle_time"] = d.idle_time;
  off["overlap"] = d.overlap();
  j["offload"] = std::move(off);
}

/// rockmate: "rockmate": {kinds of blocks, the options' time, every block}.
inline void write_details(nlohmann::ordered_json& j, const rockmate_details& d) {
  nlohmann::ordered_json r;
  r["kinds_of_blocks"] = d.kinds;
  r["options_seconds"] = d.options_time;
  nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < d.blocks.size(); ++k) {
    const rockmate_block& b = d.blocks[k];
    nlohmann::ordered_json x;
    x["name"] = k < d.block_chain.stages.size() ? d.block_chain.stages[k].name : std::string();
    x["forward_nodes"] = b.forwards;
    x["kind"] = b.kind;
    x["options"] = b.options;
    x["chosen_option"] = b.chosen;
    x["forward_runs"] = b.forward_runs;
    blocks.push_back(std::move(x));
  }
  r["blocks"] = std::move(blocks);
  if (d.whole_graph_plans > 0) {
    nlohmann::ordered_json w;
    w["plans"] = d.whole_graph_plans;
    w["makespan"] = d.whole_graph_time ? nlohmann::ordered_json(*d.whole_graph_time)
                                       : nlohmann::ordered_json(nullptr);
    w["chosen"] = d.whole_graph_chosen;
    r["whole_graph"] = std::move(w);
  }
  j["rockmate"] = std::move(r);
}

/// hiremate: "hiremate": {levels, the times below and at the top, how often the top was solved
/// again, whether the top's plan is proven optimal and its gap, the partition's note, and per
/// cluster its level, ops, identical cluster, options, solve time, solves and those unproven,
/// and the option the top chose}.
inline void write_details(nlohmann::ordered_json& j, const hiremate_details& d) {
  nlohmann::ordered_json h;
  h["levels"] = d.levels;
  h["options_seconds"] = d.options_time;
  h["top_seconds"] = d.top_time;
  h["tightened"] = d.tightened;
  h["top_optimal"] = d.top_optimal;
  h["top_gap"] =
      std::isfinite(d.top_gap) ? nlohmann::ordered_json(d.top_gap) : nlohmann::ordered_json();
  h["top_from_start"] = d.top_from_start;
  if (!d.over_limit.empty()) h["over_limit"] = d.over_limit;
  nlohmann::ordered_json clusters = nlohmann::ordered_json::array();
  for (const hiremate_cluster_summary& c : d.clusters) {
    nlohmann::ordered_json x;
    x["level"] = c.level;
    x["forward_nodes"] = c.forwards;
    x["same_as"] = c.same_as >= 0 ? nlohmann::ordered_json(c.same_as) : nlohmann::ordered_json();
    x["options"] = c.options;
    x["solve_seconds"] = c.solve_seconds;
    x["solves"] = c.solves;
    x["unproven"] = c.unproven;
    x["chosen_option"] =
        c.chosen >= 0 ? nlohmann::ordered_json(c.chosen) : nlohmann::ordered_json();
    clusters.push_back(std::move(x));
  }
  h["clusters"] = std::move(clusters);
  j["hiremate"] = std::move(h);
}

/// offmate: "offmate": {the machine, the O-ILP's fractional makespan, the host's peak, and per
/// block its option and where its parameters, optimizer states and updates are}.
inline void write_details(nlohmann::ordered_json& j, const offmate_details& d) {
  nlohmann::ordered_json o;
  o["bandwidth_d2h"] = rate_json(d.hw.device_to_host);
  o["bandwidth_h2d"] = rate_json(d.hw.host_to_device);
  o["cpu_optimizer_speed"] = rate_json(d.hw.cpu_optimizer_speed);
  o["gpu_optimizer_speed"] = rate_json(d.hw.gpu_optimizer_speed);
  o["step_overhead"] = d.hw.step_overhead;
  o["fractional_makespan"] = d.fractional_makespan;
  o["host_peak_bytes"] = d.host_peak_bytes;
  o["run_length"] = d.run_length;
  o["batch"] = d.batch;
  if (d.continuous_batch) o["continuous_batch"] = *d.continuous_batch;
  if (d.time_per_sample) o["time_per_sample"] = *d.time_per_sample;
  nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
  for (const offmate_block_summary& b : d.blocks) {
    nlohmann::ordered_json x;
    x["name"] = b.name;
    x["forward_nodes"] = b.forwards;
    x["option"] = b.option;
    x["parameter_bytes"] = b.parameter_bytes;
    x["offloaded_parameter_bytes"] = b.offloaded_bytes;
    x["state_bytes"] = b.state_bytes;
    x["states_on_host_bytes"] = b.states_on_host_bytes;
    x["cpu_update_bytes"] = b.cpu_update_bytes;
    x["gpu_update_bytes"] = b.gpu_update_bytes;
    blocks.push_back(std::move(x));
  }
  o["blocks"] = std::move(blocks);
  j["offmate"] = std::move(o);
}

/// mixed_mode: "mixed_mode": {the search, the slots, and per segment its stages, mode, share,
/// time and the dynamic runtime's overhead the DP counted}.
inline void write_details(nlohmann::ordered_json& j, const mixed_mode_details& d) {
  nlohmann::ordered_json m;
  m["search"] = std::string(to_string(d.search));
  m["slots"] = d.slots;
  nlohmann::ordered_json segments = nlohmann::ordered_json::array();
  for (const auto& sg : d.segments)
    segments.push_back({{"first", sg.first},
                        {"last", sg.last},
                        {"mode", std::string(to_string(sg.mode))},
                        {"share_bytes", sg.share},
                        {"time", sg.time},
                        {"overhead", sg.overhead}});
  m["segments"] = std::move(segments);
  j["mixed_mode"] = std::move(m);
}

/// best_of: "portfolio": {the chosen member, every member's outcome}, then the chosen member's
/// own details.
template <class... Ds>
void write_details(nlohmann::ordered_json& j, const portfolio_details<Ds...>& d) {
  nlohmann::ordered_json p;
  p["chosen"] = d.chosen;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const portfolio_entry& e : d.entries) {
    nlohmann::ordered_json x;
    x["policy"] = e.policy;
    x["status"] = std::string(to_string(e.code));
    if (e.code == status::ok) {
      x["makespan"] = e.makespan;
      x["peak_bytes"] = e.peak;
      x["optimal"] = e.optimal;
    } else {
      x["message"] = e.message;
    }
    x["solve_seconds"] = e.solve_seconds;
    entries.push_back(std::move(x));
  }
  p["entries"] = std::move(entries);
  j["portfolio"] = std::move(p);
  std::visit([&](const auto& chosen) { write_details(j, chosen); }, d.chosen_details);
}

namespace io {

/// A solution as JSON: its figures (the program's predicted makespan and peak, which the
/// simulator set), what is known of its quality, the notes, the policy's details, and
/// "schedule": `program_json` (to_json(program) or to_json(program, chain), io/json.hpp).
template <class D>
nlohmann::ordered_json to_json(const solution<D>& s, nlohmann::json program_json) {
  nlohmann::ordered_json j;
  j["makespan"] = s.program.predicted_time;
  j["peak_bytes"] = s.program.predicted_peak;
  j["optimal"] = s.optimal;
  j["solve_seconds"] = s.solve_seconds;
  if (s.bound && std::isfinite(*s.bound)) j["bound"] = *s.bound;
  if (!s.notes.empty()) j["notes"] = s.notes;
  write_details(j, s.details);
  j["schedule"] = std::move(program_json);
  if (s.program.parameters.managed) j["parameter_plan"] = to_json(s.program.parameters);
  return j;
}

/// A replay's outcome: valid, peak_bytes, host_peak_bytes, makespan, and violation (its message,
/// or null).
inline nlohmann::ordered_json to_json(const sim::report& r) {
  nlohmann::ordered_json j;
  j["valid"] = r.valid;
  j["peak_bytes"] = r.peak;
  j["host_peak_bytes"] = r.host_peak;
  j["makespan"] = r.makespan;
  j["violation"] = r.first_violation ? nlohmann::ordered_json(r.first_violation->message)
                                     : nlohmann::ordered_json(nullptr);
  return j;
}

/// A sweep: the chain, store-all's figures, the transfer planners' machine, the budgets, the
/// policies, every point (policy-major) and the notes.
inline nlohmann::ordered_json to_json(const sweep_result& sw) {
  nlohmann::ordered_json j;
  j["chain"] = sw.problem;
  j["store_all_time"] = sw.store_all_time;
  j["store_all_peak_bytes"] = sw.store_all_peak;
  j["bandwidth_d2h"] = rate_json(sw.hw.device_to_host);
  j["bandwidth_h2d"] = rate_json(sw.hw.host_to_device);
  j["budgets"] = sw.budgets;
  j["policies"] = sw.policies;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const auto& p : sw.points) {
    nlohmann::ordered_json x;
    x["policy"] = p.policy;
    x["budget_bytes"] = p.budget;
    x["status"] = std::string(to_string(p.code));
    if (p.ok()) {
      x["peak_bytes"] = p.peak;
      x["makespan"] = p.makespan;
      x["overhead"] = p.overhead;
    } else {
      x["peak_bytes"] = nullptr;
      x["makespan"] = nullptr;
      x["overhead"] = nullptr;
      x["message"] = p.message;
    }
    points.push_back(std::move(x));
  }
  j["points"] = std::move(points);
  j["notes"] = sw.notes;
  return j;
}

}  // namespace io
}  // namespace remat
