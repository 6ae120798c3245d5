// remat-plan: plan a chain's or a graph's training within a memory budget from the command line.
//
//   remat-plan --chain examples/chains/resnet_like.json --budget 1GiB --policy rotor [--json]
//   remat-plan --graph examples/graphs/residual_net.json --budget 4MiB --policy checkmate
//              --solver cbc --time-limit 60 [--relax] [--json]
//   remat-plan --chain examples/chains/resnet_like.json --budget 1.2GiB --policy pofo
//              [--bandwidth 12e9] [--bandwidth-d2h B] [--bandwidth-h2d B] [--json]
//   remat-plan --chain FILE --budget 1GiB --simulate "F1_ck F2_all B2 F1_all B1"
//              [--bandwidth 12e9] [--json]
//   remat-plan ... --trace plan.json   (the plan's timeline for ui.perfetto.dev, io/trace.hpp)
//
// It loads a chain profile or a forward DAG (JSON, docs/json-format.md), runs one policy,
// re-simulates the schedule with remat::sim::simulate (the referee: the printed makespan and peak
// are the simulator's, not the policy's claim), and prints a summary or one JSON object. Graph
// policies (store_all, checkmate) also plan a chain, through the chain's training graph. Chain
// plans print in the chain notation (F3_ck, B3, O3, ...), graph plans as programs (C3, C3_ff,
// D5, ...). The offloading policies (pofo, offload_dynprog, offload_greedy, offload_autocapper:
// docs/offloading.md) plan chains with transfers at --bandwidth; their plans are re-simulated on
// that machine and the summary adds their model time, compute, transfer and idle time and the
// offloaded set. With --simulate it plans nothing: it replays a given program (either notation) and
// reports whether it is valid, its peak and makespan, and the first violation. With --sweep it
// plans a chain with every chain policy at evenly spaced budgets (remat::sweep, <remat/sweep.hpp>)
// and prints the budget -> overhead table (--json: the points); --svg FILE writes that curve, or,
// without --sweep, the memory timeline of the one plan or program
// (<remat/io/svg.hpp>).
// Exit status: 0 planned (or a valid program), 1 planning failed or the program is invalid
// (reason on stderr), 2 usage error.

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <variant>
#include <vector>

#ifdef _WIN32
#include <io.h>
#define REMAT_PLAN_ISATTY(fd) _isatty(fd)
#else
#include <unistd.h>
#define REMAT_PLAN_ISATTY(fd) isatty(fd)
#endif

#include <nlohmann/json.hpp>
#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>
#include <remat/io/svg.hpp>
#include <remat/io/trace.hpp>
#include <remat/policy/offload.hpp>
#include <remat/remat.hpp>
#include <remat/sweep.hpp>
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
#include <remat/policy/checkmate.hpp>
#include <remat/policy/rockmate.hpp>
#endif
#ifdef REMAT_HAS_CBC
#include <remat/milp/cbc.hpp>
#endif
#ifdef REMAT_HAS_LPSOLVE
#include <remat/milp/lpsolve.hpp>
#endif

#include "cli.hpp"
#include "progress.hpp"

namespace {

constexpr std::string_view usage_text =
    R"(usage: remat-plan (--chain FILE | --graph FILE) --budget BYTES --policy NAME [options]
       remat-plan (--chain FILE | --graph FILE) --budget BYTES --simulate PROGRAM
                  [--bandwidth BYTES_PER_S] [--json]
       remat-plan --chain FILE --sweep [--budgets N] [--bandwidth BYTES_PER_S]
                  [--svg FILE] [--json]

Plans a chain's or a graph's training (a JSON chain profile or forward DAG, see
docs/json-format.md) within a memory budget, re-simulates the schedule, and prints
the plan. Chain plans are written in the chain notation (F<l>_none, F<l>_ck,
F<l>_all, B<l>, O<k>, P<k>, W<k>), graph plans (checkmate's, and every plan of
--graph) as programs over the training graph (C<c>, C<c>_ff, D<d>, O<d>, P<d>,
W<d>, 0-based node indices).

required:
  --chain FILE          the chain profile (JSON), or
  --graph FILE          the forward DAG (JSON) of a network that is not a chain
  --budget BYTES        memory budget for the activations: plain bytes, or a number
                        with a suffix KiB, MiB, GiB, TiB (also K, M, G, T), e.g.
                        6GiB, 512MiB, 1.5GiB
  --policy NAME         chains: store_all | periodic | revolve | rotor | rotor_floating
                        | checkmate | rockmate | pofo | offload_dynprog |
                        offload_greedy | offload_autocapper; graphs: store_all |
                        checkmate | rockmate (graph policies plan a chain through its
                        training graph; pofo and the offload_ policies offload
                        activations to the host, chains only: docs/offloading.md)

policy knobs (each for the policies named):
  --slots N             rotor, rotor_floating, rockmate, pofo, offload_dynprog:
                        memory slots of the DP (default 500, pofo 50; 0 = one per
                        byte, exact)
  --segments K          periodic: number of segments (default 0 = the best that fits)
  --snapshots C         revolve: free snapshot slots (default -1 = the best that fits)
  --time-limit SECONDS  every policy but offload_greedy: wall-clock limit of the
                        solve (kept within a small margin); checkmate returns the
                        best schedule found by then (not proven optimal) or fails
                        if it found none, the others fail with "time limit"
                        (store_all is linear and always within it)
  --solver NAME         checkmate, rockmate: the MILP solver, cbc | lpsolve (default:
                        cbc when this build has it, else lpsolve)
  --find-minimum        checkmate: when no schedule fits, find the smallest budget
                        that has one (several MILP solves)
  --no-portfolio        pofo: return its DP's own plan (by default pofo also plans
                        rotor, DYNPROG and autocapper and returns the fastest program)
  --relax               checkmate (and rockmate's blocks): solve the LP relaxation and
                        round it (Checkmate's two-phase rounding) instead of the
                        exact MILP; for large graphs, not optimal
  --grid P,S            rockmate: the budget grid of each block's solves, P peak
                        budgets and S saved-memory budgets per peak (default 10,10)
  --threads N           rockmate: threads for the blocks' solves (default: all cores)
  --bandwidth BYTES_PER_S
                        pofo and the offload_ policies: the speed of offloads
                        and prefetches, each way, in bytes per second: a number
                        (e.g. 12e9) or one with a suffix KiB, MiB, GiB, TiB,
                        optionally "/s" (e.g. 12GiB/s); 0 = no transfers (pofo is
                        then rotor), inf = instantaneous ones; default 12e9 (PCIe 3
                        x16)
  --bandwidth-d2h BYTES_PER_S, --bandwidth-h2d BYTES_PER_S
                        the same, for offloads (device to host) or prefetches (host
                        to device) alone, when they differ

replaying a program (instead of --policy):
  --simulate PROGRAM    replay PROGRAM in the simulator within the budget and print
                        whether it is valid, its peak, its makespan and the first
                        violation. PROGRAM is the text of a program, or @FILE to read
                        it from FILE: with --chain, the chain notation ("F1_ck F2_all
                        B2 F1_all B1", told apart by its F and B words) or a program
                        over the chain's training graph ("C0 C1_ff D2 ..."); with
                        --graph, a program. --json prints {"status": "ok" |
                        "invalid_schedule", "valid", "peak_bytes", "makespan",
                        "violation" (a string or null), "budget_bytes", ...}
  --bandwidth BYTES_PER_S
                        with --simulate: the speed of offloads and prefetches (O, P),
                        each way, in bytes per second: a number >= 1 (e.g. 12e9) or
                        one with a suffix KiB, MiB, GiB, TiB, optionally "/s" (e.g.
                        12GiB/s); default: instantaneous transfers. --bandwidth-d2h
                        and --bandwidth-h2d set the offloads' and the prefetches'
                        apart

every policy at many budgets (instead of --policy and --budget):
  --sweep               plan the chain with every chain policy (store_all, periodic,
                        revolve, rotor, rotor_floating up to 24 stages, pofo,
                        offload_dynprog, offload_greedy, offload_autocapper) at
                        evenly spaced budgets from 90% of the smallest that rotor
                        or pofo plans with up to store-all's peak, simulate every
                        plan and print the time overhead over store-all of each
                        (- : no plan at that budget). checkmate and rockmate are not
                        swept (a MILP per budget): plan them one budget at a time.
                        --json prints {"status", "chain", "store_all_time",
                        "store_all_peak_bytes", "budgets", "policies", "points":
                        [{"policy", "budget_bytes", "status", "peak_bytes",
                        "makespan", "overhead", "message"}], "notes"}
  --budgets N           with --sweep: how many budgets (default 12, 2 to 200)
  --bandwidth BYTES_PER_S
                        with --sweep: the offloading policies' transfers each way
                        (default 12e9; 0 leaves them out)
  --time-limit SECONDS  with --sweep: each solve's limit

output:
  --json                print one JSON object instead of the summary
  --svg FILE            write a picture (SVG): with --sweep, the budget -> overhead
                        curve of every policy; otherwise the device memory over
                        time of the plan (or --simulate's program) against the
                        budget, transfers on a band of their own
  --trace FILE          also write the plan's timeline (with --simulate: the
                        replay's, up to a violation) as a Chrome trace to FILE:
                        open it in ui.perfetto.dev or chrome://tracing (lanes
                        compute, device->host, host->device; device memory and
                        the budget as counters)
  --progress            report the solve's progress on stderr even when stdout or
                        stderr is not a terminal (a line per step on a log); by
                        default a line that overwrites itself is shown while a
                        solve runs when both are terminals: elapsed time and the
                        DP's percent, checkmate's best makespan, bound and gap,
                        rockmate's kinds of blocks and block solves done
  --quiet               no progress display at all
  -h, --help            print this help and exit

Options also take the form --option=VALUE.
exit status: 0 planned (with --simulate: the program is valid); 1 planning failed
(budget too small, time limit, invalid chain, ...) or, with --simulate, the
program is invalid (over the budget, a broken rule, a word that is not an
instruction); the reason is on stderr; 2 usage error.
)";

constexpr std::array<std::string_view, 11> policy_names = {
    "store_all", "periodic", "revolve",         "rotor",          "rotor_floating",    "checkmate",
    "rockmate",  "pofo",     "offload_dynprog", "offload_greedy", "offload_autocapper"};

/// Policies that plan training graphs (and chains through their graph).
bool is_graph_policy(std::string_view p) {
  return p == "store_all" || p == "checkmate" || p == "rockmate";
}

/// The offloading policies (policy/offload.hpp, docs/offloading.md): chains, with transfers.
bool is_offload_policy(std::string_view p) {
  return p == "pofo" || p == "offload_dynprog" || p == "offload_greedy" ||
         p == "offload_autocapper";
}

/// The MILP solvers this build has, in order of preference.
std::vector<std::string_view> solvers_built() {
  std::vector<std::string_view> v;
#ifdef REMAT_HAS_CBC
  v.push_back("cbc");
#endif
#ifdef REMAT_HAS_LPSOLVE
  v.push_back("lpsolve");
#endif
  return v;
}

enum exit_code : int { exit_ok = 0, exit_failed = 1, exit_usage = 2 };

/// A bandwidth option: bytes per second (0: no transfers, infinity: instantaneous ones; where
/// each applies is checked once the policy is known) and the text given.
struct bandwidth_arg {
  double value = 0;
  std::string text;
};

struct options {
  std::string chain_path;
  std::string graph_path;
  std::string solver;  ///< checkmate: the MILP solver (filled with the default)
  bool relax = false;
  bool no_portfolio = false;  ///< pofo: its DP's own plan
  bool find_minimum = false;
  std::string budget_text;
  remat::bytes budget = 0;
  std::string policy;
  std::optional<std::int64_t> slots;
  std::optional<int> segments;
  std::optional<int> snapshots;
  std::optional<double> time_limit;
  std::optional<std::pair<int, int>> grid;     ///< rockmate: peak and save budgets per block
  std::optional<int> threads;                  ///< rockmate
  std::optional<std::string> simulate;         ///< --simulate: the program text, or @FILE
  std::optional<bandwidth_arg> bandwidth;      ///< --bandwidth: bytes per second, each way
  std::optional<bandwidth_arg> bandwidth_d2h;  ///< --bandwidth-d2h: offloads
  std::optional<bandwidth_arg> bandwidth_h2d;  ///< --bandwidth-h2d: prefetches
  std::optional<std::string> trace;            ///< --trace FILE: the Chrome trace of the plan
  bool json = false;
  bool progress = false;
  bool quiet = false;
  bool help = false;
  bool sweep = false;          ///< --sweep: every chain policy at many budgets
  std::optional<int> budgets;  ///< --budgets: how many, with --sweep
  std::string svg;             ///< --svg FILE: the picture to write ("" = none)
};

/// A usage error: the reason, printed on stderr, exit status 2.
struct usage_error {
  std::string reason;
};

std::string all_policies() {
  std::string s;
  for (auto p : policy_names) s += (s.empty() ? "" : ", ") + std::string(p);
  return s;
}

using remat::format_bytes;

/// "18.4 MiB"
std::string format_size(remat::bytes b) {
  const std::string full = format_bytes(b);  // "N bytes (x.y U)" or "N bytes"
  const auto open = full.find('(');
  return open == std::string::npos ? full : full.substr(open + 1, full.size() - open - 2);
}

std::string format_number(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string format_seconds(double s) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g s", s);
  return buf;
}

/// Transfer rates (bytes per second, offloads and prefetches) in words: "1.2e+10 bytes/s each
/// way", "instantaneous each way", "none (...)" when either is 0.
std::string describe_rates(double d2h, double h2d) {
  auto one = [](double v) {
    return std::isinf(v) ? std::string("instantaneous") : format_number(v) + " bytes/s";
  };
  if (!(d2h > 0 && h2d > 0)) return "none (a bandwidth of 0: nothing is offloaded)";
  if (d2h == h2d) return one(d2h) + " each way";
  return one(d2h) + " to the host, " + one(h2d) + " back";
}

using remat_cli::parse_int;

/// The text in lower case.
std::string lowercase(std::string_view s) {
  std::string low(s);
  for (auto& ch : low) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return low;
}

/// log2 of a binary unit in lower case: "" or "b" 0, "kib"/"k" 10, ... "tib"/"t" 40; -1 if none.
int binary_shift(std::string_view low) {
  if (low.empty() || low == "b") return 0;
  if (low == "kib" || low == "k") return 10;
  if (low == "mib" || low == "m") return 20;
  if (low == "gib" || low == "g") return 30;
  if (low == "tib" || low == "t") return 40;
  return -1;
}

/// BYTES: digits, or a decimal number followed by a binary suffix (KiB = 2^10 ... TiB = 2^40).
std::optional<remat::bytes> parse_budget(std::string_view s, std::string& why) {
  std::size_t k = 0;
  while (k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '.')) ++k;
  const std::string_view number = s.substr(0, k);
  std::string_view suffix = s.substr(k);
  if (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  const std::string low = lowercase(suffix);
  const int shift = binary_shift(low);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".") {
    why = "'" + std::string(s) +
          "' is not a byte count; give bytes (e.g. 1073741824) or a number "
          "with a suffix KiB, MiB, GiB, TiB (e.g. 6GiB, 512MiB, 1.5GiB)";
    return std::nullopt;
  }
  if (shift < 0) {
    why = "'" + std::string(s) + "' has an unknown unit '" + std::string(suffix) + "'";
    if (low == "kb" || low == "mb" || low == "gb" || low == "tb")
      why += " (ambiguous: powers of 1000 or 1024?)";
    why += "; use KiB, MiB, GiB or TiB (powers of 1024), or plain bytes";
    return std::nullopt;
  }
  constexpr remat::bytes limit = remat::unlimited_bytes;
  if (number.find('.') == std::string_view::npos) {
    const auto v = parse_int<remat::bytes>(number);
    if (!v || *v > (limit >> shift)) {
      why = "'" + std::string(s) + "' is too large for a budget";
      return std::nullopt;
    }
    return *v << shift;
  }
  if (shift == 0) {
    why = "'" + std::string(s) +
          "': a byte count is a whole number; use a suffix for fractions "
          "(e.g. 1.5GiB)";
    return std::nullopt;
  }
  double v = 0;
  const auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || p != number.data() + number.size() || !std::isfinite(v)) {
    why = "'" + std::string(s) + "' is not a number";
    return std::nullopt;
  }
  const double b = std::round(std::ldexp(v, shift));
  if (b > static_cast<double>(limit)) {
    why = "'" + std::string(s) + "' is too large for a budget";
    return std::nullopt;
  }
  return static_cast<remat::bytes>(b);
}

/// --bandwidth, --bandwidth-d2h, --bandwidth-h2d: bytes per second, a number ("12e9") or one
/// with a binary suffix ("12GiB"), optionally followed by "/s". 0 and "inf" are read here; where
/// they apply is checked once the policy is known (check_bandwidths). NaN and negative numbers
/// are refused.
std::optional<double> parse_bandwidth(std::string_view s, std::string& why) {
  std::string_view t = s;
  if (t.size() >= 2 && t.substr(t.size() - 2) == "/s") t.remove_suffix(2);
  double v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  const std::string expect =
      "; give bytes per second, a number (e.g. 12e9) or one with a suffix KiB, MiB, GiB, TiB "
      "(e.g. 12GiB/s)";
  if (ec != std::errc() || p == t.data()) {
    why = "'" + std::string(s) + "' is not a bandwidth" + expect;
    return std::nullopt;
  }
  std::string_view suffix(p, static_cast<std::size_t>(t.data() + t.size() - p));
  if (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  const std::string low = lowercase(suffix);
  const int shift = binary_shift(low);
  if (shift < 0) {
    why = "'" + std::string(s) + "' has an unknown unit '" + std::string(suffix) + "'" + expect;
    return std::nullopt;
  }
  if (std::isnan(v)) {
    why = "'" + std::string(s) + "' is not a number" + expect;
    return std::nullopt;
  }
  if (v < 0) {
    why = "'" + std::string(s) + "' is negative" + expect;
    return std::nullopt;
  }
  if (v == 0) return 0.0;  // also "-0"
  return std::ldexp(v, shift);
}

/// Where the bandwidth options apply: --simulate (a number >= 1: the simulator's transfers) and
/// the offloading policies (also 0, no transfers, and inf, instantaneous ones); nowhere else.
std::optional<usage_error> check_bandwidths(const options& o) {
  for (const auto& [arg, name] :
       {std::pair{&o.bandwidth, "--bandwidth"}, std::pair{&o.bandwidth_d2h, "--bandwidth-d2h"},
        std::pair{&o.bandwidth_h2d, "--bandwidth-h2d"}}) {
    if (!*arg) continue;
    const double v = (*arg)->value;
    const std::string given = std::string(name) + " '" + (*arg)->text + "'";
    if (o.simulate) {
      // At least a byte per second: slower transfers of 2^52-byte tensors would not end in a
      // finite makespan.
      if (!std::isfinite(v) || !(v >= 1))
        return usage_error{
            given +
            " is not a bandwidth for --simulate; give bytes per second, a number >= 1 "
            "(e.g. 12e9 or 12GiB/s; without it transfers are instantaneous)"};
    } else if (is_offload_policy(o.policy)) {
      if (v > 0 && v < 1)
        return usage_error{
            given +
            " is below 1 byte per second; give 0 (no transfers), a number >= 1 (e.g. "
            "12e9 or 12GiB/s) or inf (instantaneous transfers)"};
    } else {
      return usage_error{
          std::string(name) +
          " applies to --simulate and to the offloading policies (pofo, offload_dynprog, "
          "offload_greedy, offload_autocapper) only, not to --policy " +
          o.policy};
    }
  }
  return std::nullopt;
}

/// The knobs of one policy that were given (the options named), in the order of --help.
std::vector<std::string_view> policy_knobs_given(const options& o) {
  std::vector<std::string_view> given;
  for (const auto& [is, opt] :
       {std::pair{o.slots.has_value(), "--slots"}, std::pair{!o.solver.empty(), "--solver"},
        std::pair{o.relax, "--relax"}, std::pair{o.no_portfolio, "--no-portfolio"},
        std::pair{o.find_minimum, "--find-minimum"},
        std::pair{o.segments.has_value(), "--segments"},
        std::pair{o.snapshots.has_value(), "--snapshots"}, std::pair{o.grid.has_value(), "--grid"},
        std::pair{o.threads.has_value(), "--threads"}})
    if (is) given.push_back(opt);
  return given;
}

/// --sweep's options: a chain, no single policy or budget; --bandwidth (one rate, both ways),
/// --time-limit, --budgets, --svg, --json apply.
std::variant<options, usage_error> check_sweep(const options& o) {
  if (!o.graph_path.empty())
    return usage_error{
        "--sweep plans chains (the chain policies at many budgets); give --chain FILE. For "
        "--graph, plan one budget at a time with --policy checkmate, rockmate or store_all"};
  if (!o.policy.empty())
    return usage_error{"--sweep plans with every chain policy: give --sweep or --policy, not both"};
  if (o.simulate) return usage_error{"give --sweep or --simulate, not both"};
  if (o.trace)
    return usage_error{
        "--trace writes one plan's timeline; --sweep plans many: give --svg FILE for its curve"};
  if (!o.budget_text.empty())
    return usage_error{
        "--sweep chooses its budgets (from below the smallest that plans to store-all's peak); "
        "drop --budget, and give --budgets N for how many"};
  auto knobs = policy_knobs_given(o);
  for (const auto& [given, opt] : {std::pair{o.progress, "--progress"},
                                   std::pair{o.bandwidth_d2h.has_value(), "--bandwidth-d2h"},
                                   std::pair{o.bandwidth_h2d.has_value(), "--bandwidth-h2d"}})
    if (given) knobs.push_back(opt);
  if (!knobs.empty())
    return usage_error{
        std::string(knobs.front()) +
        " applies to one --policy, not to --sweep (which plans every chain policy with its "
        "defaults; --bandwidth, --time-limit, --budgets, --svg and --json apply)"};
  if (o.bandwidth && o.bandwidth->value > 0 && o.bandwidth->value < 1)
    return usage_error{
        "--bandwidth '" + o.bandwidth->text +
        "' is below 1 byte per second; give 0 (no offloading policies), a number >= 1 (e.g. 12e9 "
        "or 12GiB/s) or inf (instantaneous transfers)"};
  return o;
}

/// Parses argv; a usage_error says what is wrong.
std::variant<options, usage_error> parse_args(int argc, char** argv) {
  options o;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg == "--json") {
      o.json = true;
      continue;
    }
    if (arg == "--progress") {
      o.progress = true;
      continue;
    }
    if (arg == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (arg == "--relax") {
      o.relax = true;
      continue;
    }
    if (arg == "--no-portfolio") {
      o.no_portfolio = true;
      continue;
    }
    if (arg == "--find-minimum") {
      o.find_minimum = true;
      continue;
    }
    if (arg == "--sweep") {
      o.sweep = true;
      continue;
    }
    if (arg.size() < 3 || arg.substr(0, 2) != "--")
      return usage_error{"unexpected argument '" + std::string(arg) +
                         "'; every argument is an option (run 'remat-plan --help')"};
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    // Every option: those that take a value, then the flags handled above.
    static constexpr std::array<std::string_view, 26> known = {
        "--chain",     "--graph",         "--budget",        "--policy",       "--slots",
        "--segments",  "--snapshots",     "--time-limit",    "--solver",       "--simulate",
        "--bandwidth", "--bandwidth-d2h", "--bandwidth-h2d", "--grid",         "--threads",
        "--trace",     "--svg",           "--budgets",       "--help",         "--json",
        "--progress",  "--quiet",         "--relax",         "--no-portfolio", "--find-minimum",
        "--sweep"};
    constexpr std::size_t n_valued = 18;
    const auto valued = std::span(known).first(n_valued);
    if (std::find(known.begin() + n_valued, known.end(), name) != known.end())
      return usage_error{"option " + std::string(name) + " takes no value"};
    if (std::find(valued.begin(), valued.end(), name) == valued.end()) {
      const auto guess = remat::io::closest_name(name, known);
      return usage_error{"unknown option '" + std::string(name) + "'" +
                         (guess ? " (did you mean " + std::string(*guess) + "?)" : std::string()) +
                         "; run 'remat-plan --help' for the options"};
    }
    if (!value) {
      if (i + 1 >= args.size() || args[i + 1].substr(0, 2) == "--")
        return usage_error{"option " + std::string(name) + " needs a value"};
      value = args[++i];
    }
    const std::string v(*value);
    auto bad_number = [&](std::string_view what) {
      return usage_error{std::string(name) + " '" + v + "' is not " + std::string(what)};
    };
    if (name == "--chain") {
      if (v.empty()) return usage_error{"--chain needs a file name"};
      o.chain_path = v;
    } else if (name == "--graph") {
      if (v.empty()) return usage_error{"--graph needs a file name"};
      o.graph_path = v;
    } else if (name == "--simulate") {
      if (v.empty() || v == "@")
        return usage_error{
            "--simulate needs a program: its text (e.g. \"F1_ck F2_all B2 F1_all B1\") or "
            "@FILE"};
      o.simulate = v;
    } else if (name == "--bandwidth" || name == "--bandwidth-d2h" || name == "--bandwidth-h2d") {
      std::string why;
      const auto b = parse_bandwidth(v, why);
      if (!b) return usage_error{std::string(name) + " " + why};
      (name == "--bandwidth"       ? o.bandwidth
       : name == "--bandwidth-d2h" ? o.bandwidth_d2h
                                   : o.bandwidth_h2d) = bandwidth_arg{*b, v};
    } else if (name == "--trace") {
      if (v.empty()) return usage_error{"--trace needs a file name (e.g. plan.json)"};
      o.trace = v;
    } else if (name == "--solver") {
      if (v != "cbc" && v != "lpsolve")
        return usage_error{"unknown solver '" + v + "'; the solvers are cbc and lpsolve"};
      o.solver = v;
    } else if (name == "--budget") {
      std::string why;
      const auto b = parse_budget(v, why);
      if (!b) return usage_error{"--budget " + why};
      o.budget_text = v;
      o.budget = *b;
    } else if (name == "--policy") {
      if (std::find(policy_names.begin(), policy_names.end(), v) == policy_names.end()) {
        const auto guess = remat::io::closest_name(v, policy_names);
        return usage_error{
            "unknown policy '" + v + "'" +
            (guess ? " (did you mean " + std::string(*guess) + "?)" : std::string()) +
            "; the policies are " + all_policies()};
      }
      o.policy = v;
    } else if (name == "--slots") {
      const auto n = parse_int<std::int64_t>(v);
      if (!n || *n < 0) return bad_number("an integer >= 0 (0 = exact)");
      o.slots = *n;
    } else if (name == "--segments") {
      const auto n = parse_int<int>(v);
      if (!n || *n < 0) return bad_number("an integer >= 0 (0 = the best that fits)");
      o.segments = *n;
    } else if (name == "--snapshots") {
      const auto n = parse_int<int>(v);
      if (!n || *n < -1) return bad_number("an integer >= -1 (-1 = the best that fits)");
      o.snapshots = *n;
    } else if (name == "--grid") {
      const auto comma = v.find(',');
      const auto p = parse_int<int>(v.substr(0, comma));
      const auto q =
          comma == std::string::npos ? std::nullopt : parse_int<int>(v.substr(comma + 1));
      if (!p || !q || *p < 1 || *q < 1 || *p > 1000 || *q > 1000)
        return bad_number("two integers from 1 to 1000 separated by a comma (e.g. 10,10)");
      o.grid = {*p, *q};
    } else if (name == "--svg") {
      if (v.empty()) return usage_error{"--svg needs a file name (e.g. plan.svg)"};
      if (auto why = remat_cli::unwritable(v)) return usage_error{"--svg: " + *why};
      o.svg = v;
    } else if (name == "--budgets") {
      const auto n = parse_int<int>(v);
      if (!n || *n < 2 || *n > 200) return bad_number("an integer from 2 to 200");
      o.budgets = *n;
    } else if (name == "--threads") {
      const auto n = parse_int<int>(v);
      if (!n || *n < 0 || *n > 1024) return bad_number("an integer from 0 to 1024 (0 = all cores)");
      o.threads = *n;
    } else if (name == "--time-limit") {
      double t = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), t);
      if (ec != std::errc() || p != v.data() + v.size() || v.empty() || !std::isfinite(t) || t <= 0)
        return bad_number("a number of seconds > 0");
      o.time_limit = t;
    }
  }
  if (o.help) return o;
  if (o.progress && o.quiet) return usage_error{"give --progress or --quiet, not both"};
  if (o.chain_path.empty() && o.graph_path.empty())
    return usage_error{
        "missing --chain FILE (a chain profile, JSON) or --graph FILE (a forward DAG, JSON)"};
  if (!o.chain_path.empty() && !o.graph_path.empty())
    return usage_error{"give --chain or --graph, not both"};
  if (o.sweep) return check_sweep(o);
  if (o.budgets)
    return usage_error{"--budgets applies to --sweep only (how many budgets it plans at)"};
  if (o.budget_text.empty()) return usage_error{"missing --budget BYTES (e.g. 6GiB)"};
  if (o.simulate) {
    if (!o.policy.empty())
      return usage_error{
          "--simulate replays a program and plans nothing: give --simulate or --policy, not both"};
    auto knobs = policy_knobs_given(o);
    if (o.time_limit) knobs.insert(knobs.begin(), "--time-limit");
    if (!knobs.empty())
      return usage_error{std::string(knobs.front()) +
                         " applies to planning (--policy) only, not to --simulate"};
    if (auto e = check_bandwidths(o)) return *e;
    return o;
  }
  if (o.policy.empty())
    return usage_error{"missing --policy NAME (or --simulate PROGRAM); the policies are " +
                       all_policies()};
  if (!o.graph_path.empty() && is_offload_policy(o.policy))
    return usage_error{
        o.policy + " plans chains (an offloading policy for chains, docs/offloading.md): give " +
        "--chain FILE; for --graph use --policy checkmate, rockmate or store_all"};
  if (!o.graph_path.empty() && !is_graph_policy(o.policy))
    return usage_error{o.policy +
                       " plans chains only; for --graph use --policy checkmate, rockmate or " +
                       "store_all"};
  if (auto e = check_bandwidths(o)) return *e;
  const bool dp = o.policy == "rotor" || o.policy == "rotor_floating";
  const bool offload_dp = o.policy == "pofo" || o.policy == "offload_dynprog";
  const bool milp = o.policy == "checkmate" || o.policy == "rockmate";
  const bool rockmate = o.policy == "rockmate";
  auto only = [&](bool given, bool applies, std::string_view opt,
                  std::string_view who) -> std::optional<usage_error> {
    if (given && !applies)
      return usage_error{std::string(opt) + " applies to " + std::string(who) +
                         " only, not to --policy " + o.policy};
    return std::nullopt;
  };
  if (o.time_limit && o.policy == "offload_greedy")
    return usage_error{
        "--time-limit does not apply to --policy offload_greedy (it has no time limit: it "
        "tries one prefix of the activations after another)"};
  for (auto e : {only(o.slots.has_value(), dp || rockmate || offload_dp, "--slots",
                      "rotor, rotor_floating, rockmate, pofo and offload_dynprog"),
                 only(!o.solver.empty(), milp, "--solver", "checkmate and rockmate"),
                 only(o.relax, milp, "--relax", "checkmate and rockmate"),
                 only(o.no_portfolio, o.policy == "pofo", "--no-portfolio", "pofo"),
                 only(o.find_minimum, o.policy == "checkmate", "--find-minimum", "checkmate"),
                 only(o.grid.has_value(), rockmate, "--grid", "rockmate"),
                 only(o.threads.has_value(), rockmate, "--threads", "rockmate"),
                 only(o.segments.has_value(), o.policy == "periodic", "--segments", "periodic"),
                 only(o.snapshots.has_value(), o.policy == "revolve", "--snapshots", "revolve")})
    if (e) return *e;
  if (milp) {
    const auto built = solvers_built();
    if (built.empty())
      return usage_error{o.policy +
                         " needs a MILP solver and this remat-plan was built without one (install "
                         "coinor-libcbc-dev or liblpsolve55-dev and rebuild)"};
    if (o.solver.empty()) o.solver = built.front();
    if (std::find(built.begin(), built.end(), o.solver) == built.end())
      return usage_error{"this remat-plan was built without " + o.solver + "; use --solver " +
                         std::string(built.front())};
  }
  return o;
}

/// Where the solve's progress goes (progress.hpp): a one-line display on stderr when stdout and
/// stderr are terminals (issue 15 §3: nothing when the output goes to a file or a pipe); with
/// --progress also to a log (stderr redirected); never with --quiet, nor for a policy with
/// nothing to report (`reports` false).
remat_cli::progress_display::mode progress_mode(const options& o, bool reports) {
  using mode = remat_cli::progress_display::mode;
  if (o.quiet || !reports) return mode::off;
  const bool terminal = REMAT_PLAN_ISATTY(2) != 0;
  if (o.progress) return terminal ? mode::terminal : mode::log;
  return terminal && REMAT_PLAN_ISATTY(1) != 0 ? mode::terminal : mode::off;
}

/// A policy's description for the summary: its name and the knobs in use.
std::string policy_label(const options& o) {
  std::string s = o.policy;
  if (o.policy == "rotor" || o.policy == "rotor_floating") {
    const std::int64_t slots = o.slots.value_or(
        o.policy == "rotor" ? remat::rotor{}.slots : remat::rotor_floating{}.slots);
    s += " (slots " + std::to_string(slots) + (slots == 0 ? ", exact" : "");
    if (o.time_limit) s += ", time limit " + format_seconds(*o.time_limit);
    s += ")";
  }
  if (o.policy == "pofo" || o.policy == "offload_dynprog") {
    const std::int64_t slots =
        o.slots.value_or(o.policy == "pofo" ? remat::pofo{}.slots : remat::offload_dynprog{}.slots);
    s += " (slots " + std::to_string(slots) + (slots == 0 ? ", exact" : "");
    if (o.time_limit) s += ", time limit " + format_seconds(*o.time_limit);
    s += ")";
  }
  std::vector<std::string> knobs;
  if (o.policy == "periodic" && o.segments && *o.segments > 0)
    knobs.push_back(std::to_string(*o.segments) + " segments");
  if (o.policy == "revolve" && o.snapshots && *o.snapshots >= 0)
    knobs.push_back(std::to_string(*o.snapshots) + " snapshots");
  if ((o.policy == "periodic" || o.policy == "revolve") && o.time_limit)
    knobs.push_back("time limit " + format_seconds(*o.time_limit));
  for (std::size_t i = 0; i < knobs.size(); ++i) s += (i == 0 ? " (" : ", ") + knobs[i];
  if (!knobs.empty()) s += ")";
  return s;
}

/// What the CLI reports about a solve besides the schedule.
struct solve_info {
  /// The policy proved that no schedule in its search space is faster (checkmate: the MILP's
  /// proof; rotor and rotor_floating: the DP at exact sizes), or the makespan equals
  /// store-all's, a lower bound for every schedule.
  bool optimal = false;
  double solve_seconds = 0;
  std::optional<double> bound;  ///< checkmate: the solver's bound on the makespan
  /// rotor, rotor_floating: how the plan was reached (JSON "method"; not optimal by dp: the DP's
  /// optimum for sizes rounded up to its slots), and the slots the DP ran at (refined from
  /// --slots when rounding left no plan; JSON "dp_slots").
  std::optional<remat::chain_dp_solution::method> method;
  std::int64_t dp_slots = 0;
  std::optional<remat::rockmate_plan> rockmate;  ///< rockmate: its blocks, options and times
};

/// What rotor and rotor_floating say of their plan, in info.
remat::result<remat::schedule> with_outcome(remat::result<remat::chain_dp_solution> r,
                                            solve_info& info) {
  if (!r) return r.err();
  info.optimal = r->optimal();
  info.method = r->how;
  info.dp_slots = r->slots;
  return std::move(r->program);
}

remat::result<remat::schedule> plan(const options& o, const remat::chain& c,
                                    const std::function<void(double)>& progress, solve_info& info) {
  if (o.policy == "store_all") return remat::store_all{}.solve(c, o.budget);
  const double limit = o.time_limit.value_or(std::numeric_limits<double>::infinity());
  if (o.policy == "periodic")
    return remat::periodic{
        .segments = o.segments.value_or(0), .time_limit = limit, .progress = progress}
        .solve(c, o.budget);
  if (o.policy == "revolve")
    return remat::revolve{
        .snapshots = o.snapshots.value_or(-1), .time_limit = limit, .progress = progress}
        .solve(c, o.budget);
  if (o.policy == "rotor") {
    remat::rotor p{.time_limit = limit, .progress = progress};
    if (o.slots) p.slots = *o.slots;
    return with_outcome(p.solve_detailed(c, o.budget), info);
  }
  remat::rotor_floating p{.time_limit = limit, .progress = progress};
  if (o.slots) p.slots = *o.slots;
  return with_outcome(p.solve_detailed(c, o.budget), info);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
template <class Backend>
remat::result<remat::schedule> plan_checkmate(const options& o, const remat::graph& g,
                                              solve_info& info,
                                              remat_cli::progress_display& display) {
  remat::checkmate<Backend> p;
  p.relax = o.relax;
  if (o.time_limit) p.time_limit = *o.time_limit;
  p.find_minimum = o.find_minimum;
  if (display.on())
    p.progress = [&display](const remat::milp::progress_report& r) {
      display.report({.incumbent = r.incumbent, .bound = r.bound});
    };
  auto r = p.solve_detailed(g, o.budget);
  if (!r) return r.err();
  info.optimal = r->optimal;
  info.bound = r->bound;
  return std::move(r->schedule);
}
#endif

template <class Backend>
remat::result<remat::schedule> plan_rockmate(const options& o, const remat::graph& g,
                                             solve_info& info,
                                             remat_cli::progress_display& display) {
  remat::rockmate<remat::checkmate<Backend>> p;
  p.inner.relax = o.relax;
  if (o.time_limit) p.time_limit = *o.time_limit;
  if (o.grid) std::tie(p.peak_budgets, p.save_budgets) = *o.grid;
  if (o.threads) p.threads = *o.threads;
  if (o.slots) p.slots = *o.slots;
  if (display.on())
    p.progress = [&display](const remat::rockmate_progress& r) {
      display.report(
          {.blocks = std::pair{r.done, r.kinds}, .solves = std::pair{r.solves_done, r.solves}});
    };
  auto r = p.plan(g, o.budget);
  if (!r) return r.err();
  info.optimal = r->program.predicted_time <= g.ideal_time();
  remat::schedule s = r->program;
  info.rockmate = std::move(*r);
  return s;
}

/// A graph policy on a graph; info.solve_seconds is filled by the caller.
remat::result<remat::schedule> plan_graph(const options& o, const remat::graph& g, solve_info& info,
                                          remat_cli::progress_display& display) {
  if (o.policy == "store_all") {
    auto r = remat::store_all{}.solve(g, o.budget);
    info.optimal = r.ok();  // its makespan is the ideal time, a lower bound
    return r;
  }
#ifdef REMAT_HAS_CBC
  if (o.solver == "cbc")
    return o.policy == "rockmate" ? plan_rockmate<remat::milp::cbc>(o, g, info, display)
                                  : plan_checkmate<remat::milp::cbc>(o, g, info, display);
#endif
#ifdef REMAT_HAS_LPSOLVE
  if (o.solver == "lpsolve")
    return o.policy == "rockmate" ? plan_rockmate<remat::milp::lpsolve>(o, g, info, display)
                                  : plan_checkmate<remat::milp::lpsolve>(o, g, info, display);
#endif
  (void)display;
  return remat::error{remat::status::solver_error,
                      o.policy + ": the solver '" + o.solver + "' is not in this build",
                      {}};
}

/// A library message in remat-plan's terms: the knob find_minimum is the flag --find-minimum.
std::string in_cli_terms(std::string msg) {
  auto replace_all = [&msg](std::string_view from, std::string_view to) {
    for (auto at = msg.find(from); at != std::string::npos; at = msg.find(from, at + to.size()))
      msg.replace(at, from.size(), to);
  };
  replace_all("set find_minimum = true", "add --find-minimum");
  replace_all("set find_minimum", "add --find-minimum");
  replace_all(" find_minimum", " --find-minimum");
  return msg;
}

/// Prints a failure (stderr always; stdout one JSON object with --json) and returns 1. A too
/// small budget's message names the minimum (and --json gives minimum_budget_bytes).
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
    j["budget_bytes"] = o.budget;
    j["message"] = e.message;
    if (e.code == remat::status::budget_too_small && e.minimum_budget)
      j["minimum_budget_bytes"] = *e.minimum_budget;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  return exit_failed;
}

/// --trace FILE: writes the Chrome trace (io/trace.hpp) of the timeline `process()` makes (called
/// only with --trace); why it could not, else nullopt.
template <class Process>
std::optional<remat::error> write_trace(const options& o, Process process) {
  if (!o.trace) return std::nullopt;
  const auto trace = remat::io::chrome_trace(process());
  if (!trace) return trace.err();
  if (auto why = remat_cli::write_file(*o.trace, *trace))
    return remat::error{remat::status::invalid_problem, "--trace: " + *why, {}};
  return std::nullopt;
}

/// Writes the ops on lines of at most ~96 columns, indented, separated by `sep`.
void print_ops(const std::vector<std::string>& ops, std::string_view sep = " ") {
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

std::string format_overhead(double time, double ideal) {
  char buf[64];
  if (ideal > 0)
    std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * (time - ideal) / ideal);
  else
    std::snprintf(buf, sizeof buf, "n/a");
  return buf;
}

/// --svg FILE of one plan or program: the memory timeline of its replay. Returns the summary's
/// line about it, or why the file could not be written.
remat::result<std::string> write_timeline(const options& o, const remat::sim::report& r,
                                          const std::string& problem, const std::string& policy) {
  const auto written = remat::io::write_text_file(
      o.svg, remat::io::memory_timeline_svg(r, {problem, policy, o.budget}));
  if (!written) return written.err();
  return "svg       " + o.svg + ": device memory over time against the budget (" +
         std::to_string(*written) + " bytes)";
}

/// --trace and --svg of a plan: writes what was asked for; returns the summary's line about the
/// picture (empty without --svg), or why a file could not be written.
template <class Process>
remat::result<std::string> write_pictures(const options& o, Process process,
                                          const remat::sim::report& r, const std::string& problem,
                                          const std::string& policy) {
  if (auto e = write_trace(o, process)) return *e;
  if (o.svg.empty()) return std::string();
  return write_timeline(o, r, problem, policy);
}

/// What --json prints for a plan that succeeded.
struct plan_report {
  std::optional<std::string> chain, graph;  ///< names, of what was planned
  double makespan = 0;
  remat::bytes peak = 0;
  double store_all_time = 0;
  remat::bytes store_all_peak = 0;
  solve_info info;
  nlohmann::json schedule;
  std::optional<nlohmann::ordered_json> offload;  ///< the offloading policies: their figures
};

int print_json(const options& o, const plan_report& p) {
  nlohmann::ordered_json j;
  j["status"] = "ok";
  j["policy"] = o.policy;
  if (o.policy == "checkmate" || o.policy == "rockmate") {
    j["solver"] = o.solver;
    j["relaxed"] = o.relax;
  }
  if (p.chain) j["chain"] = *p.chain;
  if (p.graph) j["graph"] = *p.graph;
  j["budget_bytes"] = o.budget;
  j["makespan"] = p.makespan;
  j["peak_bytes"] = p.peak;
  j["store_all_time"] = p.store_all_time;
  j["store_all_peak_bytes"] = p.store_all_peak;
  j["optimal"] = p.info.optimal;
  if (const auto m = p.info.method) {
    using method = remat::chain_dp_solution::method;
    j["method"] = *m == method::store_all ? "store_all"
                  : *m == method::dp      ? "dp"
                                          : "minimum_memory";
    if (*m == method::dp) j["dp_slots"] = p.info.dp_slots;
  }
  j["solve_seconds"] = p.info.solve_seconds;
  if (p.info.bound && std::isfinite(*p.info.bound)) j["bound"] = *p.info.bound;
  if (const auto& rm = p.info.rockmate) {
    nlohmann::ordered_json r;
    r["kinds_of_blocks"] = rm->kinds;
    r["options_seconds"] = rm->options_time;
    nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
    for (std::size_t k = 0; k < rm->blocks.size(); ++k) {
      const auto& b = rm->blocks[k];
      nlohmann::ordered_json x;
      x["name"] =
          k < rm->block_chain.stages.size() ? rm->block_chain.stages[k].name : std::string();
      x["forward_nodes"] = b.forwards;
      x["kind"] = b.kind;
      x["options"] = b.options;
      x["chosen_option"] = b.chosen;
      x["forward_runs"] = b.forward_runs;
      blocks.push_back(std::move(x));
    }
    r["blocks"] = std::move(blocks);
    r["notes"] = rm->notes;
    j["rockmate"] = std::move(r);
  }
  if (p.offload) j["offload"] = *p.offload;
  j["schedule"] = p.schedule;
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  return exit_ok;
}

std::string describe_optimality(const solve_info& info) {
  using method = remat::chain_dp_solution::method;
  std::string s =
      info.optimal ? "proven optimal"
      : info.method == method::dp
          ? "optimal for sizes rounded up to its slots (--slots 0: exact sizes)"
      : info.method == method::minimum_memory
          ? "not proven optimal: the fastest minimum-memory schedule (the budget is within "
            "rounding of the minimum at every affordable slot count; a slightly larger budget "
            "gets the DP's plan)"
          : "not proven optimal";
  if (!info.optimal && info.bound && std::isfinite(*info.bound))
    s += " (lower bound " + format_seconds(*info.bound) + ")";
  return s + ", solved in " + format_seconds(info.solve_seconds);
}

/// The problem of --graph (its graph), or of --chain (the chain and its graph).
struct loaded_problem {
  std::optional<remat::chain> chain;
  remat::result<remat::graph> graph = remat::error{remat::status::invalid_problem, "", {}};
};
/// A file that does not load as what its option says: when it is the other kind (a chain profile
/// given to --graph, a forward DAG to --chain), the message says which option takes it.
remat::error with_kind_hint(remat::error e, bool as_graph, const std::string& path) {
  const bool other = as_graph ? remat::io::load_chain(path).ok() : remat::io::load_graph(path).ok();
  if (other)
    e.message += as_graph ? "; it is a chain profile: give it with --chain"
                          : "; it is a forward DAG: give it with --graph";
  return e;
}

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

/// A graph policy on the graph of --graph, or on the chain of --chain through its graph.
int run_graph(const options& o) {
  const loaded_problem lp = load_problem(o);
  const std::optional<remat::chain>& c = lp.chain;
  if (!lp.graph) return fail(o, c ? &*c : nullptr, lp.graph.err());
  const remat::graph& g = *lp.graph;

  remat_cli::progress_display display(o.policy, progress_mode(o, o.policy != "store_all"));
  solve_info info;
  const auto t0 = std::chrono::steady_clock::now();
  auto planned = plan_graph(o, g, info, display);
  info.solve_seconds = seconds_since(t0);
  display.done(planned.ok());
  if (!planned) return fail(o, c ? &*c : nullptr, planned.err());
  const remat::schedule& s = *planned;

  const auto r = remat::sim::simulate(
      g, s, {.budget = o.budget, .record_timeline = o.trace.has_value() || !o.svg.empty()});
  if (!r.valid)
    return fail(o, c ? &*c : nullptr,
                remat::error{remat::status::solver_error,
                             o.policy +
                                 " returned a schedule the simulator rejects (a bug in remat; "
                                 "please report it with the graph): " +
                                 r.first_violation->message,
                             {}});
  const remat::schedule store_all{remat::store_all_program(g), g.ideal_time(), 0};
  const remat::bytes store_all_peak =
      remat::sim::simulate(g, store_all,
                           {.budget = remat::unlimited_bytes, .record_timeline = false})
          .peak;
  const double ideal = g.ideal_time();
  // A graph plan is printed as a program over the graph, and traced so.
  const auto pictures = write_pictures(
      o, [&] { return remat::io::trace_of(g, s, r, "planned: " + o.policy, o.budget); }, r,
      c ? c->name : g.name, o.policy);
  if (!pictures) return fail(o, c ? &*c : nullptr, pictures.err());
  const std::string& picture = *pictures;

  if (o.json)
    return print_json(o, {c ? std::optional(c->name) : std::nullopt, g.name, r.makespan, r.peak,
                          ideal, store_all_peak, info, remat::io::to_json(s), std::nullopt});
  std::string label = o.policy;
  if (o.policy == "rockmate") {
    label += " (blocks by checkmate, " + o.solver +
             (o.relax ? ", LP relaxation + rounding)" : ", exact MILP)");
  } else if (o.policy == "checkmate") {
    label += " (" + o.solver + (o.relax ? ", LP relaxation + rounding" : ", exact MILP");
    if (o.time_limit) label += ", time limit " + format_seconds(*o.time_limit);
    label += ")";
  }
  if (c)
    std::cout << "chain     " << c->name << " (" << c->length()
              << " stages), planned as its training graph\n";
  std::cout << "graph     " << g.name << " (" << g.compute_count() << " compute nodes, "
            << g.data_count() << " data nodes)\n"
            << "policy    " << label << '\n'
            << "budget    " << format_bytes(o.budget) << '\n'
            << "makespan  " << format_seconds(r.makespan) << " predicted, "
            << format_overhead(r.makespan, ideal) << " over store-all (" << format_seconds(ideal)
            << ")\n"
            << "          " << describe_optimality(info) << '\n'
            << "peak      " << format_bytes(r.peak) << " simulated; store-all needs "
            << format_bytes(store_all_peak) << '\n';
  if (const auto& rm = info.rockmate) {
    int recomputed = 0;
    for (const auto& b : rm->blocks) recomputed += b.forward_runs > 1;
    std::cout << "blocks    " << rm->blocks.size() << " blocks of " << rm->kinds
              << " kinds (identical blocks solved once), options made in "
              << format_seconds(rm->options_time) << "; " << recomputed
              << " blocks recomputed whole\n";
    for (std::size_t k = 0; k < rm->blocks.size() && k < rm->block_chain.stages.size(); ++k)
      std::cout << "          " << rm->block_chain.stages[k].name << ": kind "
                << rm->blocks[k].kind + 1 << ", option " << rm->blocks[k].chosen << " of "
                << rm->blocks[k].options << ", forward runs " << rm->blocks[k].forward_runs << '\n';
    for (const auto& n : rm->notes) std::cout << "note      " << n << '\n';
  }
  if (!picture.empty()) std::cout << picture << '\n';
  std::cout << "schedule  " << s.ops.size()
            << " ops: run a node (\"[ff]\": a forward without what its backward needs),\n"
            << "          or free a data node\n";
  std::vector<std::string> ops;
  ops.reserve(s.ops.size());
  for (const auto& i : s.ops) ops.push_back(remat::to_string(g, i));
  print_ops(ops, "; ");
  return exit_ok;
}

// --- --simulate: replay a given program -------------------------------------------------------

/// The most bytes --simulate @FILE reads: 16 MiB, millions of instructions.
constexpr std::uintmax_t max_program_bytes = std::uintmax_t{16} << 20;

/// The text of --simulate: the argument itself, or the content of the file it names after '@'.
remat::result<std::string> program_text(const std::string& arg) {
  if (arg.empty() || arg.front() != '@') return arg;
  const std::filesystem::path path = arg.substr(1);
  const std::string cannot = "cannot read program file '" + path.string() + "': ";
  auto bad = [&](const std::string& why) {
    return remat::error{remat::status::invalid_problem, cannot + why, {}};
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return bad("it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad(std::filesystem::exists(path, ec) ? "it cannot be opened" : "no such file");
  std::string text;
  std::array<char, 1 << 16> buf{};
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    text.append(buf.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_program_bytes)
      return bad("it holds more than the " + std::to_string(max_program_bytes >> 20) +
                 " MiB a program may have");
  }
  if (in.bad()) return bad("read error");
  return text;
}

/// A program --simulate replays: chain ops (the chain notation, given a chain) or instructions
/// over the training graph.
struct program {
  std::optional<std::vector<remat::chain_op>> ops;
  remat::schedule s;
};

/// The program --simulate replays: with a chain, text with an F or B word is in the chain notation;
/// any other text is a program over the graph.
remat::result<program> read_program(std::string_view text, const remat::chain* c) {
  const auto words = remat::words_of(text);
  auto invalid = [](std::string msg) {
    return remat::error{remat::status::invalid_problem, std::move(msg), {}};
  };
  const bool chain_words = std::any_of(words.begin(), words.end(), [](std::string_view w) {
    return w.front() == 'F' || w.front() == 'B';
  });
  program p;
  if (chain_words && c) {
    p.ops = remat::parse_chain_ops(text);
    if (!p.ops) return remat::parse_chain_program(c->length(), text).err();  // names the bad word
    return p;
  }
  for (std::size_t k = 0; k < words.size(); ++k) {
    const auto ins = remat::parse_instruction(words[k]);
    if (!ins) {
      std::string msg = "word " + std::to_string(k) + " '" + std::string(words[k]) +
                        "' is not an instruction of a program (C<c>, C<c>_ff, D<d>, O<d>, P<d>, "
                        "W<d>, with 0-based "
                        "node indices into the training graph)";
      if (chain_words)
        msg += "; the chain notation (F<l>_ck, B<l>, ...) needs --chain";
      else if (c)
        msg += " nor of the chain notation (F<l>_none, F<l>_ck, F<l>_all, B<l>, O<k>, P<k>, W<k>)";
      return invalid(std::move(msg));
    }
    p.s.ops.push_back(*ins);
  }
  return p;
}

/// What --simulate found, printed as text or JSON. `violation` is the first violation, or why
/// the program could not be read (then nothing ran: peak and makespan are 0).
struct replay_report {
  bool valid = false;
  remat::bytes peak = 0, host_peak = 0;
  double makespan = 0;
  std::optional<std::string> violation;
  bool read = false;                        ///< the program was read (else violation says why not)
  std::optional<std::size_t> instructions;  ///< once lowered, for the chain notation
  std::optional<std::size_t> chain_ops;     ///< with a program in the chain notation
  std::optional<std::string> picture;       ///< --svg: the summary's line about the file
};

/// The machine of --simulate: instantaneous transfers, or those of the bandwidth options.
remat::machine simulated_machine(const options& o) {
  remat::machine hw;
  if (o.bandwidth) hw = remat::machine::with_bandwidth(o.bandwidth->value);
  if (o.bandwidth_d2h) hw.device_to_host = o.bandwidth_d2h->value;
  if (o.bandwidth_h2d) hw.host_to_device = o.bandwidth_h2d->value;
  return hw;
}

int print_replay(const options& o, const remat::chain* c, const remat::graph* g,
                 const replay_report& r) {
  if (!r.valid)
    std::cerr << "remat-plan: the program is invalid: " << r.violation.value_or("?") << '\n';
  if (o.json) {
    nlohmann::ordered_json j;
    j["status"] = r.valid ? "ok" : "invalid_schedule";
    j["valid"] = r.valid;
    j["peak_bytes"] = r.peak;
    j["makespan"] = r.makespan;
    j["violation"] =
        r.violation ? nlohmann::ordered_json(*r.violation) : nlohmann::ordered_json(nullptr);
    if (c) j["chain"] = c->name;
    if (g) j["graph"] = g->name;
    j["budget_bytes"] = o.budget;
    if (o.bandwidth) j["bandwidth"] = o.bandwidth->value;
    if (o.bandwidth_d2h) j["bandwidth_d2h"] = o.bandwidth_d2h->value;
    if (o.bandwidth_h2d) j["bandwidth_h2d"] = o.bandwidth_h2d->value;
    j["host_peak_bytes"] = r.host_peak;
    if (r.chain_ops) j["chain_ops"] = *r.chain_ops;
    if (r.instructions) j["instructions"] = *r.instructions;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  } else {
    if (c)
      std::cout << "chain     " << c->name << " (" << c->length()
                << " stages), replayed on its training graph\n";
    else if (g)
      std::cout << "graph     " << g->name << " (" << g->compute_count() << " compute nodes, "
                << g->data_count() << " data nodes)\n";
    if (r.read) {
      std::cout << "program   ";
      if (r.chain_ops) {
        std::cout << *r.chain_ops << " ops of the chain notation";
        if (r.instructions)
          std::cout << " (" << *r.instructions << " instructions on the training graph)";
      } else {
        std::cout << r.instructions.value_or(0) << " instructions";
      }
      std::cout << '\n';
    } else {
      std::cout << "program   not read\n";
    }
    std::cout << "budget    " << format_bytes(o.budget) << '\n'
              << "transfers "
              << (o.bandwidth || o.bandwidth_d2h || o.bandwidth_h2d
                      ? describe_rates(simulated_machine(o).device_to_host,
                                       simulated_machine(o).host_to_device)
                      : std::string("instantaneous"))
              << '\n'
              << "valid     " << (r.valid ? "yes" : "no") << '\n';
    if (r.read) {
      std::cout << "makespan  " << format_seconds(r.makespan) << " simulated\n"
                << "peak      " << format_bytes(r.peak) << " simulated";
      if (r.host_peak > 0) std::cout << "; the host holds up to " << format_bytes(r.host_peak);
      std::cout << '\n';
    }
    if (r.violation) std::cout << "violation " << *r.violation << '\n';
    if (r.picture) std::cout << *r.picture << '\n';
  }
  return r.valid ? exit_ok : exit_failed;
}

/// --simulate: loads the chain or graph, reads the program and replays it.
int run_simulate(const options& o) {
  const loaded_problem lp = load_problem(o);
  const std::optional<remat::chain>& c = lp.chain;
  if (!lp.graph) return fail(o, c ? &*c : nullptr, lp.graph.err());
  const remat::graph& g = *lp.graph;
  const remat::chain* chain = c ? &*c : nullptr;
  const remat::graph* graph = c ? nullptr : &g;

  auto text = program_text(*o.simulate);
  if (!text) return fail(o, chain, text.err());
  replay_report rep;
  const auto p = read_program(*text, chain);
  if (!p) {
    rep.violation = p.err().message;
    return print_replay(o, chain, graph, rep);
  }
  const remat::sim::options opt{
      .budget = o.budget, .record_timeline = !o.svg.empty(), .hw = simulated_machine(o)};
  remat::sim::report r;
  if (p->ops) {
    // In the chain's own terms: violations name the chain op and a_k, delta_k; a break of the
    // notation's rules (lower()) is a violation too, before anything runs.
    r = remat::sim::simulate(*c, *p->ops, opt);
    rep.chain_ops = p->ops->size();
    if (const auto lowered = remat::lower(c->length(), *p->ops))
      rep.instructions = lowered->ops.size();
  } else {
    r = remat::sim::simulate(g, p->s, opt);
    rep.instructions = p->s.ops.size();
  }
  rep.read = true;
  if (o.trace) {
    // What ran, instruction by instruction (the replay in chain terms above has a point per
    // chain op): the program lowered onto the training graph, replayed with its timeline.
    remat::schedule s = p->s;
    if (p->ops) {
      // A break of the notation's rules stops the replay at its op: what ran is the ops before.
      remat::lowering_failure failure;
      auto lowered = remat::lower(c->length(), *p->ops, nullptr, &failure);
      if (!lowered) lowered = remat::lower(c->length(), std::span(*p->ops).first(failure.op));
      s = lowered ? *lowered : remat::schedule{};
    }
    remat::sim::options traced = opt;
    traced.record_timeline = true;
    const auto t = remat::sim::simulate(g, s, traced);
    if (auto e = write_trace(o, [&] {
          return chain ? remat::io::trace_of(*c, s, t, "simulated", o.budget)
                       : remat::io::trace_of(g, s, t, "simulated", o.budget);
        }))
      return fail(o, chain, *e);
  }
  rep.valid = r.valid;
  rep.peak = r.peak;
  rep.host_peak = r.host_peak;
  rep.makespan = r.makespan;
  if (r.first_violation) rep.violation = r.first_violation->message;
  if (!o.svg.empty()) {
    // Also of an invalid program: the picture shows where it goes over the budget.
    auto w = write_timeline(o, r, c ? c->name : g.name, "program");
    if (!w) return fail(o, chain, w.err());
    rep.picture = *w;
  }
  return print_replay(o, chain, graph, rep);
}

// --- the offloading policies: pofo, offload_dynprog, offload_greedy --------------------------

/// The rates an offloading policy plans with, bytes per second (offloads, prefetches): the
/// options, else the policy's default.
std::pair<double, double> offload_rates(const options& o) {
  const double fallback = o.policy == "pofo"                 ? remat::pofo{}.bandwidth
                          : o.policy == "offload_dynprog"    ? remat::offload_dynprog{}.bandwidth
                          : o.policy == "offload_autocapper" ? remat::offload_autocapper{}.bandwidth
                                                             : remat::offload_greedy{}.bandwidth;
  const double both = o.bandwidth ? o.bandwidth->value : fallback;
  return {o.bandwidth_d2h ? o.bandwidth_d2h->value : both,
          o.bandwidth_h2d ? o.bandwidth_h2d->value : both};
}

/// The transfer knobs of an offloading policy, from the options (unset: the policy's defaults).
template <class Policy>
Policy with_rates(Policy p, const options& o) {
  if (o.bandwidth) p.bandwidth = o.bandwidth->value;
  if (o.bandwidth_d2h) p.device_to_host = o.bandwidth_d2h->value;
  if (o.bandwidth_h2d) p.host_to_device = o.bandwidth_h2d->value;
  return p;
}

remat::result<remat::offload_plan> plan_offload(const options& o, const remat::chain& c,
                                                const std::function<void(double)>& progress) {
  if (o.policy == "offload_greedy") return with_rates(remat::offload_greedy{}, o).plan(c, o.budget);
  const double limit = o.time_limit.value_or(std::numeric_limits<double>::infinity());
  if (o.policy == "pofo") {
    remat::pofo p = with_rates(
        remat::pofo{.time_limit = limit, .progress = progress, .portfolio = !o.no_portfolio}, o);
    if (o.slots) p.slots = *o.slots;
    return p.plan(c, o.budget);
  }
  if (o.policy == "offload_autocapper")
    return with_rates(remat::offload_autocapper{.time_limit = limit}, o).plan(c, o.budget);
  remat::offload_dynprog p =
      with_rates(remat::offload_dynprog{.time_limit = limit, .progress = progress}, o);
  if (o.slots) p.slots = *o.slots;
  return p.plan(c, o.budget);
}

/// A rate in --json: bytes per second, null for infinity (instantaneous transfers).
nlohmann::ordered_json rate_json(double v) {
  return std::isinf(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v);
}

/// An offloading policy on the chain: its plan, re-simulated on the machine it planned for.
int run_offload(const options& o, const remat::chain& c) {
  remat_cli::progress_display display(
      o.policy, progress_mode(o, o.policy != "offload_greedy" && o.policy != "offload_autocapper"));
  std::function<void(double)> progress;
  if (display.on()) progress = [&display](double f) { display.percent(f); };
  const auto t0 = std::chrono::steady_clock::now();
  auto planned = plan_offload(o, c, progress);
  solve_info info;
  info.solve_seconds = seconds_since(t0);
  display.done(planned.ok());
  if (!planned) return fail(o, &c, planned.err());
  const remat::offload_plan& p = *planned;
  const remat::schedule& s = p.program;

  // The referee, on the policy's machine (transfers at the rates given; none: the default one).
  const auto [d2h, h2d] = offload_rates(o);
  const remat::machine hw =
      d2h > 0 && h2d > 0 ? remat::machine{d2h, h2d, remat::unlimited_bytes} : remat::machine{};
  const auto r = remat::sim::simulate(
      c, s,
      {.budget = o.budget, .record_timeline = o.trace.has_value() || !o.svg.empty(), .hw = hw});
  if (!r.valid)
    return fail(o, &c,
                remat::error{
                    remat::status::solver_error,
                    o.policy +
                        " returned a schedule the simulator rejects (a bug in remat; please report "
                        "it with the chain): " +
                        r.first_violation->message,
                    {}});
  const remat::bytes store_all_peak =
      remat::sim::simulate(c, *remat::lower(c.length(), remat::store_all::program(c)),
                           {.record_timeline = false})
          .peak;
  const double ideal = c.ideal_time();
  info.optimal = r.makespan <= ideal;
  const auto pictures = write_pictures(
      o, [&] { return remat::io::trace_of(c, s, r, "planned: " + o.policy, o.budget); }, r, c.name,
      policy_label(o));
  if (!pictures) return fail(o, &c, pictures.err());
  const std::string& picture = *pictures;

  if (o.json) {
    nlohmann::ordered_json off;
    off["bandwidth_d2h"] = rate_json(d2h);
    off["bandwidth_h2d"] = rate_json(h2d);
    off["offloaded"] = p.offloaded;
    off["offloaded_bytes"] = p.offloaded_bytes;
    off["model_time"] = p.model_time;
    off["compute_time"] = p.compute_time;
    off["transfer_time"] = p.transfer_time;
    off["idle_time"] = p.idle_time;
    off["overlap"] = p.overlap();
    if (!p.notes.empty()) off["notes"] = p.notes;
    return print_json(o, {c.name, std::nullopt, r.makespan, r.peak, ideal, store_all_peak, info,
                          remat::io::to_json(s, c), std::move(off)});
  }
  std::vector<std::string> ops;
  ops.reserve(p.ops.size());
  for (const auto& i : p.ops) ops.push_back(remat::to_string(i));
  std::string moved;
  for (std::size_t k = 0; k < p.offloaded.size(); ++k) {
    if (k == 16) {
      moved += " ... (" + std::to_string(p.offloaded.size() - k) + " more)";
      break;
    }
    moved += " a_" + std::to_string(p.offloaded[k]);
  }
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * p.overlap());
  std::cout << "chain     " << c.name << " (" << c.length() << " stages, input "
            << format_size(c.input_bytes) << ")\n"
            << "policy    " << policy_label(o) << '\n'
            << "transfers " << describe_rates(d2h, h2d) << '\n'
            << "budget    " << format_bytes(o.budget) << '\n'
            << "makespan  " << format_seconds(r.makespan) << " program (simulated), "
            << format_overhead(r.makespan, ideal) << " over store-all (" << format_seconds(ideal)
            << ")\n"
            << "          " << format_seconds(p.model_time)
            << " model time (pofo's model, docs/offloading.md; whole-tensor copies may cost the "
               "program more, not waiting at the loss may save)\n"
            << "          " << describe_optimality(info) << '\n'
            << "time      compute " << format_seconds(p.compute_time) << ", transfers "
            << format_seconds(p.transfer_time) << " (both lanes), idle "
            << format_seconds(p.idle_time) << " (compute waiting for transfers)\n"
            << "overlap   "
            << (p.transfer_time > 0
                    ? std::string(pct) + " of the transfer time hidden behind compute"
                    : std::string("no transfers"))
            << '\n'
            << "offloaded ";
  if (p.offloaded.empty())
    std::cout << "nothing\n";
  else
    std::cout << p.offloaded.size()
              << (p.offloaded.size() == 1 ? " activation, " : " activations, ")
              << format_bytes(p.offloaded_bytes) << ":" << moved << '\n';
  std::cout << "peak      " << format_bytes(r.peak) << " simulated; store-all needs "
            << format_bytes(store_all_peak) << '\n';
  for (const auto& n : p.notes) std::cout << "note      " << n << '\n';
  if (!picture.empty()) std::cout << picture << '\n';
  std::cout << "schedule  " << ops.size()
            << " ops; F<l>_none keeps only stage l's output, F<l>_ck also its input,\n"
            << "          F<l>_all also all that the backward B<l> needs; O<k> offloads a_k to the "
               "host,\n"
            << "          P<k> prefetches it back, W<k> waits for its transfer\n";
  print_ops(ops);
  return exit_ok;
}

// --- --sweep: every chain policy at many budgets --------------------------------------------

int run_sweep(const options& o) {
  auto loaded = remat::io::load_chain(o.chain_path);
  if (!loaded) return fail(o, nullptr, with_kind_hint(loaded.err(), false, o.chain_path));
  const remat::chain& c = *loaded;
  remat::sweep_options so;
  if (o.budgets) so.budgets = *o.budgets;
  if (o.bandwidth) so.bandwidth = o.bandwidth->value;
  if (o.time_limit) so.time_limit = *o.time_limit;
  const auto t0 = std::chrono::steady_clock::now();
  const auto swept = remat::sweep(c, so);
  const double solve_seconds = seconds_since(t0);
  if (!swept) return fail(o, &c, swept.err());
  const remat::sweep_result& sw = *swept;
  std::string picture;
  if (!o.svg.empty()) {
    const auto w = remat::io::write_text_file(o.svg, remat::io::overhead_curve_svg(sw));
    if (!w) return fail(o, &c, w.err());
    picture = "svg       " + o.svg + ": the budget -> overhead curve of every policy (" +
              std::to_string(*w) + " bytes)";
  }
  if (o.json) {
    nlohmann::ordered_json j;
    j["status"] = "ok";
    j["chain"] = c.name;
    j["store_all_time"] = sw.store_all_time;
    j["store_all_peak_bytes"] = sw.store_all_peak;
    j["bandwidth"] = rate_json(sw.bandwidth);
    j["budgets"] = sw.budgets;
    j["policies"] = sw.policies;
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const auto& p : sw.points) {
      nlohmann::ordered_json x;
      x["policy"] = p.policy;
      x["budget_bytes"] = p.budget;
      x["status"] = std::string(remat::to_string(p.code));
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
    j["solve_seconds"] = solve_seconds;
    if (!o.svg.empty()) j["svg"] = o.svg;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return exit_ok;
  }
  std::cout << "chain     " << c.name << " (" << c.length() << " stages, input "
            << format_size(c.input_bytes) << ")\n"
            << "store-all " << format_seconds(sw.store_all_time) << ", peak "
            << format_bytes(sw.store_all_peak) << '\n'
            << "transfers "
            << (sw.bandwidth > 0
                    ? describe_rates(sw.bandwidth, sw.bandwidth) + " (the offloading policies)"
                    : std::string("none (--bandwidth 0: no offloading policies)"))
            << '\n'
            << "swept     " << sw.policies.size() << " policies at " << sw.budgets.size()
            << " budgets in " << format_seconds(solve_seconds)
            << "; each cell: the simulated makespan's overhead over store-all,\n"
            << "          - : no plan at that budget (--json gives each status and message)\n";
  for (const auto& n : sw.notes) std::cout << "note      " << n << '\n';
  if (!picture.empty()) std::cout << picture << '\n';
  std::cout << '\n';
  std::vector<std::size_t> widths;
  std::printf("%10s %6s", "budget", "%peak");
  for (const auto& name : sw.policies) {
    widths.push_back(std::max<std::size_t>(name.size(), 7));
    std::printf(" %*s", static_cast<int>(widths.back()), name.c_str());
  }
  std::printf("\n");
  for (std::size_t b = 0; b < sw.budgets.size(); ++b) {
    const std::string budget = format_size(sw.budgets[b]);
    std::printf(
        "%10s %5.0f%%", budget.c_str(),
        100.0 * static_cast<double>(sw.budgets[b]) / static_cast<double>(sw.store_all_peak));
    for (std::size_t k = 0; k < sw.policies.size(); ++k) {
      const auto& p = sw.at(k, b);
      char cell[32];
      if (p.ok())
        std::snprintf(cell, sizeof cell, "%+.1f%%", 100.0 * p.overhead);
      else
        std::snprintf(cell, sizeof cell, "-");
      std::printf(" %*s", static_cast<int>(widths[k]), cell);
    }
    std::printf("\n");
  }
  std::fflush(stdout);
  return exit_ok;
}

int run(const options& o) {
  // Before a solve that may be long: a trace that cannot be written fails now.
  if (o.trace)
    if (auto why = remat_cli::unwritable(*o.trace))
      return fail(o, nullptr, remat::error{remat::status::invalid_problem, "--trace: " + *why, {}});
  if (o.sweep) return run_sweep(o);
  if (o.simulate) return run_simulate(o);
  if (o.policy == "checkmate" || o.policy == "rockmate" || !o.graph_path.empty())
    return run_graph(o);
  auto loaded = remat::io::load_chain(o.chain_path);
  if (!loaded) return fail(o, nullptr, with_kind_hint(loaded.err(), false, o.chain_path));
  const remat::chain& c = *loaded;
  if (is_offload_policy(o.policy)) return run_offload(o, c);

  // store_all is linear: nothing to report
  remat_cli::progress_display display(o.policy, progress_mode(o, o.policy != "store_all"));
  std::function<void(double)> progress;
  if (display.on()) progress = [&display](double f) { display.percent(f); };
  const auto t0 = std::chrono::steady_clock::now();
  solve_info info;
  auto planned = plan(o, c, progress, info);
  info.solve_seconds = seconds_since(t0);
  display.done(planned.ok());
  if (!planned) return fail(o, &c, planned.err());
  const remat::schedule& s = *planned;

  // The referee: the numbers printed are the simulator's.
  const auto r = remat::sim::simulate(
      c, s, {.budget = o.budget, .record_timeline = o.trace.has_value() || !o.svg.empty()});
  if (!r.valid)
    return fail(
        o, &c,
        remat::error{
            remat::status::solver_error,
            o.policy +
                " returned a schedule the simulator rejects (a bug in remat; please report it "
                "with the chain): " +
                r.first_violation->message,
            {}});
  const remat::bytes store_all_peak =
      remat::sim::simulate(c, *remat::lower(c.length(), remat::store_all::program(c)),
                           {.record_timeline = false})
          .peak;
  const double ideal = c.ideal_time();
  info.optimal = info.optimal || r.makespan <= ideal;
  const auto pictures = write_pictures(
      o, [&] { return remat::io::trace_of(c, s, r, "planned: " + o.policy, o.budget); }, r, c.name,
      policy_label(o));
  if (!pictures) return fail(o, &c, pictures.err());
  const std::string& picture = *pictures;

  if (o.json)
    return print_json(o, {c.name, std::nullopt, r.makespan, r.peak, ideal, store_all_peak, info,
                          remat::io::to_json(s, c), std::nullopt});
  // The chain notation; a chain policy's program is always the lowering of chain ops.
  const auto chain_ops = remat::to_chain_ops(c.length(), s);
  std::vector<std::string> ops;
  if (chain_ops)
    for (const auto& i : *chain_ops) ops.push_back(remat::to_string(i));
  else
    for (const auto& i : s.ops) ops.push_back(remat::to_string(i));
  const std::string overhead = format_overhead(s.predicted_time, ideal);
  std::cout << "chain     " << c.name << " (" << c.length() << " stages, input "
            << format_size(c.input_bytes) << ")\n"
            << "policy    " << policy_label(o) << '\n'
            << "budget    " << format_bytes(o.budget) << '\n'
            << "makespan  " << format_seconds(s.predicted_time) << " predicted, " << overhead
            << " over store-all (" << format_seconds(ideal) << ")\n"
            << "          " << describe_optimality(info) << '\n'
            << "peak      " << format_bytes(r.peak) << " simulated; store-all needs "
            << format_bytes(store_all_peak) << '\n';
  if (!picture.empty()) std::cout << picture << '\n';
  std::cout << "schedule  " << ops.size()
            << " ops; F<l>_none keeps only stage l's output, F<l>_ck also its input,\n"
            << "          F<l>_all also all that the backward B<l> needs\n";
  print_ops(ops);
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse_args(argc, argv);
  if (const auto* u = std::get_if<usage_error>(&parsed)) {
    std::cerr << "remat-plan: " << u->reason << "\n"
              << "usage: remat-plan (--chain FILE | --graph FILE) --budget BYTES (--policy NAME | "
                 "--simulate PROGRAM) "
                 "[options], or remat-plan --chain FILE --sweep [options]; see --help\n";
    return exit_usage;
  }
  const options& o = std::get<options>(parsed);
  if (o.help) {
    std::cout << usage_text;
    return exit_ok;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    // Planning failures come back in result<T>; an exception here is a bug or out-of-memory.
    std::cerr << "remat-plan: internal error: " << e.what() << '\n';
    return exit_failed;
  }
}
