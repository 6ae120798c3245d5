// What remat-plan's commands share: loading the problem, failing, and writing the pieces of a
// summary and the pictures.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#ifdef _WIN32
#include <io.h>
#define REMAT_PLAN_ISATTY(fd) _isatty(fd)
#else
#include <unistd.h>
#define REMAT_PLAN_ISATTY(fd) isatty(fd)
#endif

#include <nlohmann/json.hpp>

#include <remat/io/file.hpp>
#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>
#include <remat/io/svg.hpp>
#include <remat/problem/builder.hpp>

#include "cli.hpp"
#include "remat_plan.hpp"

namespace remat_plan {

namespace {
/// A file that does not load as what its option says: when it is the other kind (a chain
/// profile given to --graph, a forward DAG to --chain), the message says which option takes it.
remat::error with_kind_hint(remat::error e, bool as_graph, const std::string& path) {
  const bool other = as_graph ? remat::io::load_chain(path).ok() : remat::io::load_graph(path).ok();
  if (other)
    e.message += as_graph ? "; it is a chain profile: give it with --chain"
                          : "; it is a forward DAG: give it with --graph";
  return e;
}
}  // namespace

loaded_problem load_problem(const options& o) {
  loaded_problem p;
  if (!o.graph_path.empty()) {
    p.graph = remat::io::load_graph(o.graph_path);
    if (!p.graph) p.graph = with_kind_hint(p.graph.err(), true, o.graph_path);
  } else if (auto lc = remat::io::load_chain(o.chain_path); !lc) {
    p.graph = with_kind_hint(lc.err(), false, o.chain_path);
  } else {
    p.chain = std::move(*lc);
    p.graph = remat::build_graph(*p.chain);
  }
  return p;
}

remat::result<remat::chain> load_chain(const options& o) {
  auto loaded = remat::io::load_chain(o.chain_path);
  if (!loaded) return with_kind_hint(loaded.err(), false, o.chain_path);
  return loaded;
}

std::string in_cli_terms(std::string msg) {
  auto replace_all = [&msg](std::string_view from, std::string_view to) {
    for (auto at = msg.find(from); at != std::string::npos; at = msg.find(from, at + to.size()))
      msg.replace(at, from.size(), to);
  };
  replace_all("set find_minimum = true", "add --find-minimum");
  replace_all("set find_minimum", "add --find-minimum");
  replace_all(" find_minimum", " --find-minimum");
  replace_all("(portfolio = false: the DP's)", "(--no-portfolio: the DP's)");
  // The knobs whose "unset" is a value on the command line.
  if (msg.rfind("periodic: segments", 0) == 0)
    replace_all("or leave it unset to pick the best", "or 0 to pick the best");
  if (msg.rfind("revolve: snapshots", 0) == 0)
    replace_all("or leave it unset to pick the best", "or -1 to pick the best");
  return msg;
}

void print_json_line(const std::string& dumped) { std::cout << dumped << '\n'; }

int fail(const options& o, const remat::chain* c, const remat::error& err) {
  remat::error e = err;
  e.message = in_cli_terms(std::move(e.message));
  if (e.code == remat::status::infeasible && o.policy == "checkmate" && !o.find_minimum &&
      e.message.find("--find-minimum") == std::string::npos)
    e.message += "; add --find-minimum to find the smallest budget that fits";
  std::cerr << "remat-plan: " << e.message << '\n';
  if (o.json) {
    nlohmann::ordered_json j;
    j["status"] = std::string(remat::to_string(e.code));
    if (!o.policy.empty()) j["policy"] = o.policy;
    if (c) j["chain"] = c->name;
    if (!o.graph_path.empty()) j["graph"] = o.graph_path;
    if (o.processors) {  // a pipeline: each processor's memory, and the smallest that plans
      if (o.memory) j["memory_bytes"] = *o.memory;
      j["message"] = e.message;
      if (e.code == remat::status::budget_too_small && e.minimum_budget)
        j["minimum_memory_bytes"] = *e.minimum_budget;
    } else {
      j["budget_bytes"] = o.budget;
      j["message"] = e.message;
      if (e.code == remat::status::budget_too_small && e.minimum_budget)
        j["minimum_budget_bytes"] = *e.minimum_budget;
    }
    print_json_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return exit_failed;
}

std::string describe_rates(double d2h, double h2d) {
  auto one = [](double v) {
    if (std::isinf(v)) return std::string("instantaneous");
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.6g bytes/s", v);
    return std::string(buf);
  };
  if (!(d2h > 0 && h2d > 0)) return "none (a bandwidth of 0: nothing is offloaded)";
  if (d2h == h2d) return one(d2h) + " each way";
  return one(d2h) + " to the host, " + one(h2d) + " back";
}

std::string format_overhead(double time, double ideal) {
  char buf[64];
  if (ideal > 0)
    std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * (time - ideal) / ideal);
  else
    std::snprintf(buf, sizeof buf, "n/a");
  return buf;
}

void print_ops(const std::vector<std::string>& ops, std::string_view sep) {
  std::string line = "  ";
  for (const auto& op : ops) {
    if (line.size() > 2 && line.size() + op.size() + sep.size() > 96) {
      std::cout << line << '\n';
      line = "  ";
    }
    if (line.size() > 2) line += sep;
    line += op;
  }
  if (line.size() > 2) std::cout << line << '\n';
}

remat::result<std::string> write_timeline(const options& o, const remat::sim::report& r,
                                          remat::io::timeline_labels labels) {
  labels.budget = o.budget;
  const auto written = remat::io::write_text_file(o.svg, remat::io::memory_timeline_svg(r, labels));
  if (!written) return written.err();
  return "svg       " + o.svg + ": device memory over time against the budget (" +
         std::to_string(*written) + " bytes)";
}

std::optional<remat::error> write_trace_text(const options& o,
                                             const remat::result<std::string>& trace) {
  if (!o.trace) return std::nullopt;
  if (!trace) return trace.err();
  if (auto why = remat_cli::write_file(*o.trace, *trace))
    return remat::error{remat::status::invalid_problem, "--trace: " + *why, {}};
  return std::nullopt;
}

remat_cli::progress_display::mode progress_mode(const options& o, bool reports) {
  using mode = remat_cli::progress_display::mode;
  if (o.quiet || !reports) return mode::off;
  const bool terminal = REMAT_PLAN_ISATTY(2) != 0;
  if (o.progress) return terminal ? mode::terminal : mode::log;
  return terminal && REMAT_PLAN_ISATTY(1) != 0 ? mode::terminal : mode::off;
}

}  // namespace remat_plan
