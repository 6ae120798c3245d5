// remat-plan: plan a chain's training within a memory budget from the command line.
//
//   remat-plan --chain examples/chains/resnet_like.json --budget 1GiB --policy rotor [--json]
//
// It loads a chain profile (JSON, docs/json-format.md), runs one policy, re-simulates the
// schedule with remat::sim::simulate (the referee: the printed makespan and peak are the
// simulator's, not the policy's claim), and prints a summary or one JSON object.
// Exit status: 0 planned, 1 planning failed (reason on stderr), 2 usage error.

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
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
#include <remat/io/json.hpp>
#include <remat/remat.hpp>

namespace {

constexpr std::string_view usage_text =
    R"(usage: remat-plan --chain FILE --budget BYTES --policy NAME [options]

Plans a chain's training (a JSON profile, see docs/json-format.md) within a memory
budget, re-simulates the schedule, and prints the plan.

required:
  --chain FILE          the chain profile (JSON)
  --budget BYTES        memory budget for the activations: plain bytes, or a number
                        with a suffix KiB, MiB, GiB, TiB (also K, M, G, T), e.g.
                        6GiB, 512MiB, 1.5GiB
  --policy NAME         store_all | periodic | revolve | rotor | rotor_floating

policy knobs (each for the policies named):
  --slots N             rotor, rotor_floating: memory slots of the DP (default 500,
                        0 = one per byte, exact)
  --segments K          periodic: number of segments (default 0 = the best that fits)
  --snapshots C         revolve: free snapshot slots (default -1 = the best that fits)
  --time-limit SECONDS  rotor, rotor_floating: wall-clock limit of the solve

output:
  --json                print one JSON object instead of the summary
  --progress            report the solve's progress on stderr (default: only when
                        stderr is a terminal)
  -h, --help            print this help and exit

Options also take the form --option=VALUE.
exit status: 0 planned; 1 planning failed (budget too small, time limit, invalid
chain, ...; the reason is on stderr); 2 usage error.
)";

constexpr std::array<std::string_view, 5> policy_names = {"store_all", "periodic", "revolve",
                                                          "rotor", "rotor_floating"};

enum exit_code : int { exit_ok = 0, exit_failed = 1, exit_usage = 2 };

struct options {
  std::string chain_path;
  std::string budget_text;
  remat::bytes budget = 0;
  std::string policy;
  std::optional<std::int64_t> slots;
  std::optional<int> segments;
  std::optional<int> snapshots;
  std::optional<double> time_limit;
  bool json = false;
  bool progress = false;
  bool help = false;
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

std::string format_seconds(double s) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g s", s);
  return buf;
}

template <class Int>
std::optional<Int> parse_int(std::string_view s) {
  Int v{};
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

/// BYTES: digits, or a decimal number followed by a binary suffix (KiB = 2^10 ... TiB = 2^40).
std::optional<remat::bytes> parse_budget(std::string_view s, std::string& why) {
  std::size_t k = 0;
  while (k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '.')) ++k;
  const std::string_view number = s.substr(0, k);
  std::string_view suffix = s.substr(k);
  if (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  std::string low(suffix);
  for (auto& ch : low) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  int shift = -1;
  if (low.empty() || low == "b") shift = 0;
  if (low == "kib" || low == "k") shift = 10;
  if (low == "mib" || low == "m") shift = 20;
  if (low == "gib" || low == "g") shift = 30;
  if (low == "tib" || low == "t") shift = 40;
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
    if (arg.size() < 3 || arg.substr(0, 2) != "--")
      return usage_error{"unexpected argument '" + std::string(arg) +
                         "'; every argument is an option (run 'remat-plan --help')"};
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const auto eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    static constexpr std::array<std::string_view, 7> valued = {
        "--chain", "--budget", "--policy", "--slots", "--segments", "--snapshots", "--time-limit"};
    if (std::find(valued.begin(), valued.end(), name) == valued.end())
      return usage_error{"unknown option '" + std::string(name) +
                         "' (run 'remat-plan --help' for the options)"};
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
    } else if (name == "--budget") {
      std::string why;
      const auto b = parse_budget(v, why);
      if (!b) return usage_error{"--budget " + why};
      o.budget_text = v;
      o.budget = *b;
    } else if (name == "--policy") {
      if (std::find(policy_names.begin(), policy_names.end(), v) == policy_names.end())
        return usage_error{"unknown policy '" + v + "'; the policies are " + all_policies()};
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
    } else if (name == "--time-limit") {
      double t = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), t);
      if (ec != std::errc() || p != v.data() + v.size() || v.empty() || !std::isfinite(t) || t <= 0)
        return bad_number("a number of seconds > 0");
      o.time_limit = t;
    }
  }
  if (o.help) return o;
  if (o.chain_path.empty()) return usage_error{"missing --chain FILE (the chain profile, JSON)"};
  if (o.budget_text.empty()) return usage_error{"missing --budget BYTES (e.g. 6GiB)"};
  if (o.policy.empty())
    return usage_error{"missing --policy NAME; the policies are " + all_policies()};
  const bool dp = o.policy == "rotor" || o.policy == "rotor_floating";
  auto only = [&](bool given, bool applies, std::string_view opt,
                  std::string_view who) -> std::optional<usage_error> {
    if (given && !applies)
      return usage_error{std::string(opt) + " applies to " + std::string(who) +
                         " only, not to --policy " + o.policy};
    return std::nullopt;
  };
  for (auto e : {only(o.slots.has_value(), dp, "--slots", "rotor and rotor_floating"),
                 only(o.time_limit.has_value(), dp, "--time-limit", "rotor and rotor_floating"),
                 only(o.segments.has_value(), o.policy == "periodic", "--segments", "periodic"),
                 only(o.snapshots.has_value(), o.policy == "revolve", "--snapshots", "revolve")})
    if (e) return *e;
  return o;
}

/// Progress of the DP policies on stderr: a self-overwriting line on a terminal, a line per
/// tenth otherwise.
class progress_reporter {
 public:
  progress_reporter(std::string policy, bool terminal)
      : policy_(std::move(policy)), terminal_(terminal) {}
  void operator()(double fraction) {
    const int pct = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 100.0);
    if (terminal_) {
      if (pct == last_) return;
      std::fprintf(stderr, "\rremat-plan: %s %3d%%", policy_.c_str(), pct);
    } else {
      if (pct / 10 == last_ / 10 && last_ >= 0) return;
      std::fprintf(stderr, "remat-plan: %s %d%%\n", policy_.c_str(), pct / 10 * 10);
    }
    std::fflush(stderr);
    last_ = pct;
  }
  /// After the solve: clears the terminal line, or reports the end on a log.
  void done(bool finished) const {
    if (last_ < 0) return;
    if (terminal_)
      std::fprintf(stderr, "\r%*s\r", static_cast<int>(policy_.size()) + 18, "");
    else if (finished && last_ < 100)
      std::fprintf(stderr, "remat-plan: %s 100%%\n", policy_.c_str());
  }

 private:
  std::string policy_;
  bool terminal_;
  int last_ = -1;
};

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
  if (o.policy == "periodic" && o.segments && *o.segments > 0)
    s += " (" + std::to_string(*o.segments) + " segments)";
  if (o.policy == "revolve" && o.snapshots && *o.snapshots >= 0)
    s += " (" + std::to_string(*o.snapshots) + " snapshots)";
  return s;
}

remat::result<remat::schedule> plan(const options& o, const remat::chain& c,
                                    const std::function<void(double)>& progress) {
  if (o.policy == "store_all") return remat::store_all{}.solve(c, o.budget);
  if (o.policy == "periodic")
    return remat::periodic{.segments = o.segments.value_or(0)}.solve(c, o.budget);
  if (o.policy == "revolve")
    return remat::revolve{.snapshots = o.snapshots.value_or(-1)}.solve(c, o.budget);
  const double limit = o.time_limit.value_or(std::numeric_limits<double>::infinity());
  if (o.policy == "rotor") {
    remat::rotor p{.time_limit = limit, .progress = progress};
    if (o.slots) p.slots = *o.slots;
    return p.solve(c, o.budget);
  }
  remat::rotor_floating p{.time_limit = limit, .progress = progress};
  if (o.slots) p.slots = *o.slots;
  return p.solve(c, o.budget);
}

/// Prints a failure (stderr always; stdout one JSON object with --json) and returns 1.
int fail(const options& o, const remat::chain* c, const remat::error& e) {
  std::cerr << "remat-plan: " << e.message << '\n';
  if (e.code == remat::status::budget_too_small && e.minimum_budget)
    std::cerr << "remat-plan: the minimum budget for " << o.policy << " is "
              << format_bytes(*e.minimum_budget) << "\n";
  if (o.json) {
    nlohmann::ordered_json j;
    j["status"] = std::string(remat::to_string(e.code));
    j["policy"] = o.policy;
    if (c) j["chain"] = c->name;
    j["budget_bytes"] = o.budget;
    j["message"] = e.message;
    if (e.code == remat::status::budget_too_small && e.minimum_budget)
      j["minimum_budget_bytes"] = *e.minimum_budget;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
  return exit_failed;
}

/// Writes the ops on lines of at most ~96 columns, indented.
void print_ops(const remat::schedule& s) {
  std::string line = "  ";
  for (const auto& i : s.ops) {
    const std::string op = remat::to_string(i);
    if (line.size() + op.size() + 1 > 96) {
      std::cout << line << '\n';
      line = "  ";
    }
    if (line.size() > 2) line += ' ';
    line += op;
  }
  if (line.size() > 2) std::cout << line << '\n';
}

int run(const options& o) {
  auto loaded = remat::io::load_chain(o.chain_path);
  if (!loaded) return fail(o, nullptr, loaded.err());
  const remat::chain& c = *loaded;

  const bool dp = o.policy == "rotor" || o.policy == "rotor_floating";
  const bool show_progress = dp && (o.progress || REMAT_PLAN_ISATTY(2));
  progress_reporter reporter(o.policy, REMAT_PLAN_ISATTY(2) != 0);
  std::function<void(double)> progress;
  if (show_progress) progress = [&reporter](double f) { reporter(f); };
  auto planned = plan(o, c, progress);
  reporter.done(planned.ok());
  if (!planned) return fail(o, &c, planned.err());
  const remat::schedule& s = *planned;

  // The referee: the numbers printed are the simulator's.
  const auto r = remat::sim::simulate(c, s, {.budget = o.budget, .record_timeline = false});
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
  const auto store_all_ops = remat::store_all::program(c);
  const remat::bytes store_all_peak =
      remat::sim::simulate(c, remat::schedule{store_all_ops, 0, 0}, {.record_timeline = false})
          .peak;
  const double ideal = c.ideal_time();

  if (o.json) {
    nlohmann::ordered_json j;
    j["status"] = "ok";
    j["policy"] = o.policy;
    j["chain"] = c.name;
    j["budget_bytes"] = o.budget;
    j["makespan"] = r.makespan;
    j["peak_bytes"] = r.peak;
    j["store_all_time"] = ideal;
    j["store_all_peak_bytes"] = store_all_peak;
    j["schedule"] = remat::io::to_json(s);
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return exit_ok;
  }
  char overhead[64];
  if (ideal > 0)
    std::snprintf(overhead, sizeof overhead, "%+.1f%%", 100.0 * (s.predicted_time - ideal) / ideal);
  else
    std::snprintf(overhead, sizeof overhead, "n/a");
  std::cout << "chain     " << c.name << " (" << c.length() << " stages, input "
            << format_size(c.input_bytes) << ")\n"
            << "policy    " << policy_label(o) << '\n'
            << "budget    " << format_bytes(o.budget) << '\n'
            << "makespan  " << format_seconds(s.predicted_time) << " predicted, " << overhead
            << " over store-all (" << format_seconds(ideal) << ")\n"
            << "peak      " << format_bytes(r.peak) << " simulated; store-all needs "
            << format_bytes(store_all_peak) << '\n'
            << "schedule  " << s.ops.size()
            << " ops; F<l>_none keeps only stage l's output, F<l>_ck also its input,\n"
            << "          F<l>_all also all that the backward B<l> needs\n";
  print_ops(s);
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse_args(argc, argv);
  if (const auto* u = std::get_if<usage_error>(&parsed)) {
    std::cerr
        << "remat-plan: " << u->reason << "\n"
        << "usage: remat-plan --chain FILE --budget BYTES --policy NAME [options]; see --help\n";
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
