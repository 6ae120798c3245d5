#pragma once
// remat-plan's pieces: the options (options.cpp), the commands (plan.cpp, simulate.cpp,
// find_minimum.cpp, sweep.cpp) and what they print (output.cpp). main.cpp runs one command.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/io/svg.hpp>
#include <remat/policy/details.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/sim/report.hpp>

#include "progress.hpp"

namespace remat_plan {

enum exit_code : int { exit_ok = 0, exit_failed = 1, exit_usage = 2 };

/// A bandwidth option: bytes per second (0: no link, infinity: instantaneous) and the text given.
struct bandwidth_arg {
  double value = 0;
  std::string text;
};

/// The command line, read.
struct options {
  std::string chain_path;
  std::string graph_path;
  std::string multi_chain_path;        ///< --multi-chain: chains joined at a loss (multi_chain.cpp)
  std::optional<int> processors;       ///< --processors: a pipeline's P (pipeline.cpp)
  std::optional<remat::bytes> memory;  ///< --memory: each processor's, with --processors
  std::optional<int> copies;           ///< --copies: of the weights, with --processors
  std::string solver;  ///< the MILP solver of checkmate and rockmate (filled with the default)
  bool relax = false;
  bool no_portfolio = false;  ///< pofo: its DP's own plan
  bool find_minimum = false;
  std::string budget_text;
  remat::bytes budget = 0;
  std::string policy;
  std::optional<std::int64_t> slots;
  std::optional<double> tolerance;
  std::optional<int> segments;
  std::optional<int> snapshots;
  std::optional<double> time_limit;
  std::optional<std::pair<int, int>> grid;  ///< rockmate: peak and save budgets per block
  /// hiremate: the most nodes of a cluster below the top, and of the top
  std::optional<std::pair<int, int>> cluster_limits;
  std::optional<int> threads;
  std::optional<std::string> simulate;         ///< --simulate: the program text, or @FILE
  std::optional<bandwidth_arg> bandwidth;      ///< --bandwidth: bytes per second, each way
  std::optional<bandwidth_arg> bandwidth_d2h;  ///< --bandwidth-d2h: offloads
  std::optional<bandwidth_arg> bandwidth_h2d;  ///< --bandwidth-h2d: prefetches
  std::optional<remat::bytes> host_memory;     ///< --host-memory: the host's bytes for the plan
  std::optional<int> max_batch;                ///< --max-batch: batch sizes to consider
  std::optional<remat::mixed_search> search;   ///< --search: mixed_mode's DP search
  std::optional<double> dynamic_overhead;      ///< --dynamic-overhead: seconds per dynamic op
  std::optional<std::string> heuristic;        ///< --heuristic: the eviction heuristic's name
  std::optional<std::string> trace;            ///< --trace FILE: the Chrome trace of the plan
  bool json = false;
  bool progress = false;
  bool quiet = false;
  bool help = false;
  bool sweep = false;          ///< --sweep: every chain policy at many budgets
  std::optional<int> budgets;  ///< --budgets: how many, with --sweep
  std::string svg;             ///< --svg FILE: the picture to write ("" = none)

  /// --find-minimum without --budget: the command that finds the policy's smallest budget.
  [[nodiscard]] bool finds_minimum() const { return find_minimum && budget_text.empty(); }
  /// The machine the bandwidth and host-memory options describe, from `base` (a policy's own).
  [[nodiscard]] remat::machine machine_from(remat::machine base) const;
};

/// A usage error: the reason, printed on stderr, exit status 2.
struct usage_error {
  std::string reason;
};

/// Reads argv (options.cpp).
std::variant<options, usage_error> parse_args(int argc, char** argv);
/// The text of --help (options.cpp).
std::string help_text();

// The commands; each returns the exit status.
int run_plan(const options& o);          ///< --policy with --budget (plan.cpp)
int run_simulate(const options& o);      ///< --simulate (simulate.cpp)
int run_find_minimum(const options& o);  ///< --find-minimum without --budget (find_minimum.cpp)
int run_sweep(const options& o);         ///< --sweep (sweep.cpp)
int run_multi_chain(const options& o);   ///< --multi-chain (multi_chain.cpp)
int run_pipeline(const options& o);      ///< --processors (pipeline.cpp)

// --- shared by the commands (output.cpp) ----------------------------------------------------

/// The problem of --graph (its graph), or of --chain (the chain and its graph).
struct loaded_problem {
  std::optional<remat::chain> chain;
  remat::result<remat::graph> graph = remat::error{remat::status::invalid_problem, "", {}};
};
loaded_problem load_problem(const options& o);
/// The chain of --chain alone (--sweep).
remat::result<remat::chain> load_chain(const options& o);

/// Prints a failure (stderr always; stdout one JSON object with --json) and returns 1.
int fail(const options& o, const remat::chain* c, const remat::error& err);
/// A library message in remat-plan's terms (find_minimum is the flag --find-minimum).
std::string in_cli_terms(std::string msg);

/// Prints a JSON object on stdout (one line).
void print_json_line(const std::string& dumped);

/// Transfer rates in words: "1.2e+10 bytes/s each way", "instantaneous each way", "none (...)".
std::string describe_rates(double d2h, double h2d);
/// "+28.1%" over `ideal`, or "n/a".
std::string format_overhead(double time, double ideal);
/// The ops on lines of at most ~96 columns, indented, separated by `sep`.
void print_ops(const std::vector<std::string>& ops, std::string_view sep = " ");

/// --svg FILE of one plan or program: the memory timeline of its replay (with the program's
/// phases and instruction names when `labels` has them); the summary's line about it, or why the
/// file could not be written.
remat::result<std::string> write_timeline(const options& o, const remat::sim::report& r,
                                          remat::io::timeline_labels labels);
/// --trace FILE: writes `trace` (a Chrome trace's text, io/trace.hpp); why it could not.
std::optional<remat::error> write_trace_text(const options& o,
                                             const remat::result<std::string>& trace);

/// Where the solve's progress goes (progress.hpp): a line that overwrites itself on stderr when
/// stdout and stderr are terminals (nothing when the output goes to a file or a pipe); with
/// --progress also to a log; never with --quiet, nor for a policy with nothing to report.
remat_cli::progress_display::mode progress_mode(const options& o, bool reports);

}  // namespace remat_plan
