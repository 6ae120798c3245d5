// Runs the remat-plan binary on the example chains (REMAT_PLAN_EXE, REMAT_EXAMPLES_DIR come from
// tests/CMakeLists.txt when the examples are built).
#if defined(REMAT_PLAN_EXE) && defined(REMAT_EXAMPLES_DIR)

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifndef _WIN32
#include <sys/wait.h>
#endif

#include "support/io_checks.hpp"
#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>
#include <remat/remat.hpp>

using namespace remat;
using nlohmann::json;

namespace {

struct outcome {
  int exit_code = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
#ifdef _WIN32
  return "\"" + s + "\"";
#else
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
#endif
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs remat-plan with `args` (each one argument), capturing stdout, stderr and the exit code.
outcome run_plan(const std::vector<std::string>& args) {
  static std::atomic<int> counter{0};
  const auto tmp = std::filesystem::temp_directory_path();
  static const std::string process = std::to_string(std::random_device{}());
  const std::string tag = process + "_" + std::to_string(counter++);
  const auto out = tmp / ("remat_plan_test_" + tag + ".out");
  const auto err = tmp / ("remat_plan_test_" + tag + ".err");
  std::string cmd = quote(REMAT_PLAN_EXE);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " >" + quote(out.string()) + " 2>" + quote(err.string());
  const int raw = std::system(cmd.c_str());
  outcome o;
#ifdef _WIN32
  o.exit_code = raw;
#else
  o.exit_code = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
#endif
  o.out = slurp(out);
  o.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return o;
}

std::string chain_file(const std::string& name) {
  return (std::filesystem::path(REMAT_EXAMPLES_DIR) / "chains" / name).string();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("remat-plan --json: every policy plans both example chains within the budget") {
  struct job {
    std::string chain;
    std::string tight, loose;  // loose: store_all's budget
    bytes tight_bytes, loose_bytes;
  };
  const job jobs[] = {{"resnet_like.json", "1GiB", "3GiB", bytes{1} << 30, bytes{3} << 30},
                      {"gpt_like.json", "8GiB", "16GiB", bytes{8} << 30, bytes{16} << 30}};
  for (const auto& j : jobs) {
    auto c = io::load_chain(chain_file(j.chain));
    REQUIRE(c.ok());
    for (const std::string policy :
         {"store_all", "periodic", "revolve", "rotor", "rotor_floating"}) {
      CAPTURE(j.chain);
      CAPTURE(policy);
      const bool all = policy == "store_all";
      const bytes budget = all ? j.loose_bytes : j.tight_bytes;
      const outcome o = run_plan({"--chain", chain_file(j.chain), "--budget",
                                  all ? j.loose : j.tight, "--policy", policy, "--json"});
      CAPTURE(o.err);
      CHECK(o.exit_code == 0);
      const json r = json::parse(o.out, nullptr, false);
      REQUIRE(r.is_object());
      CHECK(r["status"] == "ok");
      CHECK(r["policy"] == policy);
      CHECK(r["budget_bytes"].get<bytes>() == budget);
      CHECK(r["peak_bytes"].get<bytes>() <= budget);
      CHECK(r["peak_bytes"].get<bytes>() > 0);
      CHECK(r["makespan"].get<double>() >= c->ideal_time() * (1 - 1e-12));
      REQUIRE(r["schedule"].is_array());
      CHECK(!r["schedule"].empty());
      // What it printed is a schedule the simulator accepts, with the printed numbers.
      auto s = io::schedule_from_json(r);
      REQUIRE(s.ok());
      const auto rep = sim::simulate(*c, *s, {.budget = budget});
      CHECK(rep.valid);
      CHECK(rep.peak == r["peak_bytes"].get<bytes>());
      CHECK(rep.makespan == doctest::Approx(r["makespan"].get<double>()));
    }
  }
}

TEST_CASE("remat-plan: the readable summary") {
  const outcome o = run_plan({"--chain", chain_file("resnet_like.json"), "--budget", "1.5GiB",
                              "--policy", "rotor", "--slots", "200"});
  CHECK(o.exit_code == 0);
  CHECK(has(o.out, "policy    rotor (slots 200)"));
  CHECK(has(o.out, "budget    1610612736 bytes (1.5 GiB)"));
  CHECK(has(o.out, "over store-all"));
  CHECK(has(o.out, "simulated"));
  CHECK(has(o.out, "B1"));
  CHECK(o.err.empty());  // not a terminal, no --progress: no progress lines
}

TEST_CASE("remat-plan: --progress reports on stderr only") {
  const outcome o = run_plan({"--chain", chain_file("gpt_like.json"), "--budget", "8GiB",
                              "--policy", "rotor", "--json", "--progress"});
  CHECK(o.exit_code == 0);
  CHECK(has(o.err, "rotor"));
  CHECK(has(o.err, "100%"));
  CHECK(json::parse(o.out, nullptr, false).is_object());
}

TEST_CASE("remat-plan: a budget below the minimum fails with the minimum") {
  auto c = io::load_chain(chain_file("resnet_like.json"));
  REQUIRE(c.ok());
  const bytes minimum = rotor::minimum_budget(*c);
  const outcome o = run_plan({"--chain", chain_file("resnet_like.json"), "--budget", "100MiB",
                              "--policy", "rotor", "--json"});
  CHECK(o.exit_code == 1);
  CHECK(has(o.err, "minimum"));
  CHECK(has(o.err, std::to_string(minimum)));
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r["status"] == "budget_too_small");
  CHECK(r["minimum_budget_bytes"].get<bytes>() == minimum);
  CHECK(has(r["message"].get<std::string>(), std::to_string(minimum)));
  CHECK(!r.contains("schedule"));

  const outcome plain = run_plan(
      {"--chain", chain_file("gpt_like.json"), "--budget", "1GiB", "--policy", "store_all"});
  CHECK(plain.exit_code == 1);
  CHECK(plain.out.empty());
  CHECK(has(plain.err, "minimum"));
}

TEST_CASE("remat-plan: an unreadable or invalid chain is a planning failure (exit 1)") {
  const outcome o = run_plan({"--chain", chain_file("no_such_chain.json"), "--budget", "1GiB",
                              "--policy", "rotor", "--json"});
  CHECK(o.exit_code == 1);
  CHECK(has(o.err, "no_such_chain.json"));
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r["status"] == "invalid_problem");
  CHECK(has(r["message"].get<std::string>(), "no_such_chain.json"));
}

TEST_CASE("remat-plan: times too large to sum are a clear invalid_problem for every policy") {
  // Issue 10, defects 5 and 6: 1e308 s each planned "ok" with an infinite makespan; 1e25 s made
  // CBC abort the process. Both are rejected with a message naming the stage and the field.
  for (const double t : {1e308, 1e25}) {
    CAPTURE(t);
    const auto path = remat::testing::scratch("remat_plan_test_", "huge_times.json");
    std::ofstream(path) << R"({"name": "huge", "input_bytes": 4, "stages": [
      {"name": "fc1", "forward_time": )" << t << R"(, "backward_time": )" << t << R"(,
       "output_bytes": 100, "saved_bytes": 100},
      {"name": "loss", "forward_time": 1e-05, "backward_time": 1e-05, "output_bytes": 4,
       "saved_bytes": 4}]})";
    std::vector<std::string> policies = {"store_all", "periodic", "revolve", "rotor", "rotor_floating"};
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
    policies.emplace_back("checkmate");
#endif
    for (const auto& policy : policies) {
      CAPTURE(policy);
      const outcome o = run_plan({"--chain", path.string(), "--budget", "1MiB", "--policy", policy, "--json"});
      CAPTURE(o.err);
      CHECK(o.exit_code == 1);
      CHECK(has(o.err, "stage 1 ('fc1'): forward_time is"));
      CHECK(has(o.err, "1e+15 s"));
      const json r = json::parse(o.out, nullptr, false);
      REQUIRE(r.is_object());
      CHECK(r["status"] == "invalid_problem");
      const outcome text = run_plan({"--chain", path.string(), "--budget", "1MiB", "--policy", policy});
      CHECK(text.exit_code == 1);
      CHECK(!has(text.out + text.err, "inf"));
      CHECK(!has(text.out + text.err, "nan"));
    }
  }
}

TEST_CASE("remat-plan: --time-limit holds for every chain policy") {
  // Issue 10, defect 4: 2,000 stages took 30 s with rotor at --time-limit 1; periodic and
  // revolve took no limit. Now each stops within the limit and a small margin, with a plan or
  // status time_limit.
  const auto path = remat::testing::scratch("remat_plan_test_", "long_chain.json");
  {
    json c{{"name", "long"}, {"input_bytes", 1000}, {"stages", json::array()}};
    for (int l = 1; l <= 2000; ++l)
      c["stages"].push_back({{"name", "s" + std::to_string(l)}, {"forward_time", 1.0 + 0.001 * (l % 7)},
                             {"backward_time", 2.0}, {"output_bytes", 1000 + 10 * (l % 5)},
                             {"saved_bytes", 2000 + 10 * (l % 3)}});
    std::ofstream(path) << c.dump();
  }
  for (const std::string policy : {"store_all", "periodic", "revolve", "rotor", "rotor_floating"}) {
    CAPTURE(policy);
    std::vector<std::string> args = {"--chain", path.string(), "--budget", "120000", "--policy", policy,
                                     "--time-limit", "0.2", "--json"};
    if (policy == "rotor" || policy == "rotor_floating") args.insert(args.end(), {"--slots", "20"});
    const auto t0 = std::chrono::steady_clock::now();
    const outcome o = run_plan(args);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CAPTURE(o.err);
    CHECK(took < 1.5);  // the limit, a margin, and loading the file and starting the process
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    if (o.exit_code == 0) {
      CHECK(r["status"] == "ok");
      CHECK(r["peak_bytes"].get<bytes>() <= 120000);
    } else {
      CHECK(o.exit_code == 1);
      // store_all: the budget is below its peak; rotor_floating: its table is refused at once.
      const char* expect = policy == "store_all"        ? "budget_too_small"
                           : policy == "rotor_floating" ? "invalid_problem"
                                                        : "time_limit";
      CHECK(r["status"] == expect);
    }
  }
}

TEST_CASE("remat-plan: usage errors exit 2 with the reason on stderr") {
  const std::string c = chain_file("resnet_like.json");
  struct usage_case {
    std::vector<std::string> args;
    std::string reason;
  };
  const usage_case cases[] = {
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--frobnicate"},
       "unknown option '--frobnicate'"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotr"},
       "store_all, periodic, revolve, rotor, rotor_floating"},
      {{"--chain", c, "--budget", "lots", "--policy", "rotor"}, "not a byte count"},
      {{"--chain", c, "--budget", "6GB", "--policy", "rotor"}, "GiB"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--slots", "-3"}, "--slots"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--time-limit", "soon"},
       "--time-limit"},
      {{"--chain", c, "--policy", "rotor", "--budget"}, "--budget needs a value"},
      {{"--chain", c, "--policy", "rotor"}, "missing --budget"},
      {{"--budget", "1GiB", "--policy", "rotor"}, "missing --chain"},
      {{"--chain", c, "--budget", "1GiB"}, "missing --policy"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--segments", "3"}, "periodic only"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "extra"},
       "unexpected argument 'extra'"},
  };
  for (const auto& uc : cases) {
    CAPTURE(uc.reason);
    const outcome o = run_plan(uc.args);
    CHECK(o.exit_code == 2);
    CHECK(has(o.err, uc.reason));
    CHECK(o.out.empty());
  }
}

TEST_CASE("remat-plan --help") {
  const outcome o = run_plan({"--help"});
  CHECK(o.exit_code == 0);
  CHECK(has(o.out, "usage: remat-plan"));
  CHECK(has(o.out, "--budget BYTES"));
  CHECK(has(o.out, "rotor_floating"));
}

TEST_CASE("remat-plan: budget suffixes") {
  // Not `[text, expect]`: CAPTURE captures in a lambda, and Clang 14 cannot capture a structured
  // binding (C++20's P1091, Clang 16).
  for (const auto& c :
       std::vector<std::pair<std::string, bytes>>{{"3221225472", bytes{3} << 30},
                                                  {"3GiB", bytes{3} << 30},
                                                  {"3072MiB", bytes{3} << 30},
                                                  {"3145728KiB", bytes{3} << 30},
                                                  {"3g", bytes{3} << 30},
                                                  {"2.5GiB", bytes{5} << 29}}) {
    const std::string& text = c.first;
    const bytes expect = c.second;
    CAPTURE(text);
    const outcome o = run_plan({"--chain", chain_file("resnet_like.json"), "--budget=" + text,
                                "--policy=rotor", "--slots=100", "--json"});
    CHECK(o.exit_code == 0);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r["budget_bytes"].get<bytes>() == expect);
  }
}

#endif

// --- graphs and checkmate ---------------------------------------------------------------------

namespace {

std::string graph_file(const std::string& name) {
  return (std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs" / name).string();
}

/// remat-plan's MILP solvers: the ones this program links too (tests/CMakeLists.txt).
std::vector<std::string> plan_solvers() {
  std::vector<std::string> v;
#ifdef REMAT_HAS_CBC
  v.emplace_back("cbc");
#endif
#ifdef REMAT_HAS_LPSOLVE
  v.emplace_back("lpsolve");
#endif
  return v;
}

/// A 4-stage chain written to a scratch file, small enough for an exact MILP in well under a
/// second with either solver.
std::string small_chain_file() {
  const auto path = remat::testing::scratch("remat_plan_test_", "small_chain.json");
  std::ofstream(path) << R"({"name": "small", "input_bytes": 300, "stages": [
    {"name": "a", "forward_time": 1.0, "backward_time": 2.0, "output_bytes": 400,
     "saved_bytes": 900, "forward_overhead_bytes": 0, "backward_overhead_bytes": 100},
    {"name": "b", "forward_time": 3.0, "backward_time": 5.0, "output_bytes": 200,
     "saved_bytes": 500, "forward_overhead_bytes": 50, "backward_overhead_bytes": 0},
    {"name": "c", "forward_time": 2.0, "backward_time": 3.0, "output_bytes": 600,
     "saved_bytes": 700, "forward_overhead_bytes": 0, "backward_overhead_bytes": 200},
    {"name": "loss", "forward_time": 0.5, "backward_time": 0.5, "output_bytes": 4,
     "saved_bytes": 604, "forward_overhead_bytes": 0, "backward_overhead_bytes": 0}]})";
  return path.string();
}

/// Checks a successful graph plan printed with --json against the graph simulator.
void check_graph_plan(const json& r, const graph& g, bytes budget) {
  CHECK(r["status"] == "ok");
  CHECK(r["budget_bytes"].get<bytes>() == budget);
  CHECK(r["peak_bytes"].get<bytes>() <= budget);
  CHECK(r["makespan"].get<double>() >= g.ideal_time() * (1 - 1e-12));
  REQUIRE(r["optimal"].is_boolean());
  REQUIRE(r["solve_seconds"].is_number());
  CHECK(r["solve_seconds"].get<double>() >= 0);
  auto s = io::graph_schedule_from_json(r);
  REQUIRE(s.ok());
  const auto rep = sim::simulate(g, *s, {.budget = budget});
  CHECK(rep.valid);
  CHECK(rep.peak == r["peak_bytes"].get<bytes>());
  CHECK(rep.makespan == doctest::Approx(r["makespan"].get<double>()));
}

}  // namespace

TEST_CASE("remat-plan --graph: store_all and checkmate plan the example graphs") {
  // Budgets that need recomputation yet fit: the attention block's minimum is 95% of its peak.
  for (const auto& c :
       std::vector<std::pair<std::string, double>>{{"residual_net.json", 0.9},
                                                   {"attention_block.json", 0.97}}) {
    const std::string& name = c.first;  // not a structured binding: see "budget suffixes"
    const double fraction = c.second;
    CAPTURE(name);
    auto g = io::load_graph(graph_file(name));
    REQUIRE(g.ok());
    const graph_schedule sa{store_all_program(*g), g->ideal_time(), 0};
    const bytes peak = sim::simulate(*g, sa, {.budget = unlimited_bytes}).peak;

    const outcome all = run_plan({"--graph", graph_file(name), "--budget", std::to_string(peak),
                                  "--policy", "store_all", "--json"});
    CAPTURE(all.err);
    REQUIRE(all.exit_code == 0);
    const json ra = json::parse(all.out, nullptr, false);
    REQUIRE(ra.is_object());
    check_graph_plan(ra, *g, peak);
    CHECK(ra["optimal"] == true);  // the ideal time is a lower bound
    CHECK(ra["store_all_peak_bytes"].get<bytes>() == peak);

    const outcome short_all = run_plan({"--graph", graph_file(name), "--budget",
                                        std::to_string(peak - 1), "--policy", "store_all"});
    CHECK(short_all.exit_code == 1);
    CHECK(has(short_all.err, std::to_string(peak)));

    for (const auto& solver : plan_solvers()) {
      CAPTURE(solver);
      const auto budget = static_cast<bytes>(static_cast<double>(peak) * fraction);
      // CBC solves these in about two seconds; lp_solve takes minutes, so it gets a short limit
      // and may stop with a schedule or with none.
      const bool cbc = solver == "cbc";
      const outcome o = run_plan({"--graph", graph_file(name), "--budget", std::to_string(budget),
                                  "--policy", "checkmate", "--solver", solver, "--time-limit",
                                  cbc ? "30" : "1", "--json"});
      CAPTURE(o.err);
      const json r = json::parse(o.out, nullptr, false);
      REQUIRE(r.is_object());
      if (!cbc && o.exit_code == 1) {
        CHECK(r["status"] == "time_limit");
        continue;
      }
      REQUIRE(o.exit_code == 0);
      if (cbc) CHECK(r["optimal"] == true);
      check_graph_plan(r, *g, budget);
      CHECK(r["solver"] == solver);
      CHECK(r["relaxed"] == false);
      CHECK(r["graph"] == g->name);
      if (r["optimal"] == true && r.contains("bound"))
        CHECK(r["bound"].get<double>() <= r["makespan"].get<double>() * (1 + 1e-6));
    }
  }
}

TEST_CASE("remat-plan: checkmate on a chain plans its graph, never slower than rotor_floating") {
  const std::string file = small_chain_file();
  auto c = io::load_chain(file);
  REQUIRE(c.ok());
  auto g = build_graph(*c);
  REQUIRE(g.ok());
  const bytes low = rotor_floating::minimum_budget(*c);
  const bytes high = sim::simulate(*c, schedule{store_all::program(*c), 0, 0}, {}).peak;
  for (const auto& solver : plan_solvers()) {
    for (bytes budget : {low, (low + high) / 2, high}) {
      CAPTURE(solver);
      CAPTURE(budget);
      const outcome dp = run_plan({"--chain", file, "--budget", std::to_string(budget), "--policy",
                                   "rotor_floating", "--slots", "0", "--json"});
      REQUIRE(dp.exit_code == 0);
      const json rd = json::parse(dp.out, nullptr, false);
      CHECK(rd["optimal"] == true);  // the exact DP
      const outcome o = run_plan({"--chain", file, "--budget", std::to_string(budget), "--policy",
                                  "checkmate", "--solver", solver, "--json"});
      CAPTURE(o.err);
      REQUIRE(o.exit_code == 0);
      const json r = json::parse(o.out, nullptr, false);
      REQUIRE(r.is_object());
      CHECK(r["chain"] == "small");
      check_graph_plan(r, *g, budget);
      CHECK(r["optimal"] == true);
      CHECK(r["makespan"].get<double>() <= rd["makespan"].get<double>() + 1e-9);
    }
  }
}

TEST_CASE("remat-plan: checkmate below the minimum, with and without --find-minimum") {
  // lp_solve proves the bisection's infeasible budgets slowly (48 s here): CBC only.
  for (const auto& solver : plan_solvers()) {
    if (solver != "cbc") continue;
    CAPTURE(solver);
    const std::string file = small_chain_file();
    const outcome plain = run_plan({"--chain", file, "--budget", "700", "--policy", "checkmate",
                                    "--solver", solver, "--json"});
    CHECK(plain.exit_code == 1);
    CHECK(has(plain.err, "--find-minimum"));
    const json rp = json::parse(plain.out, nullptr, false);
    REQUIRE(rp.is_object());
    CHECK(rp["status"] == "infeasible");

    const outcome o = run_plan({"--chain", file, "--budget", "700", "--policy", "checkmate",
                                "--solver", solver, "--find-minimum", "--json"});
    CAPTURE(o.err);
    CHECK(o.exit_code == 1);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r["status"] == "budget_too_small");
    const bytes minimum = r["minimum_budget_bytes"].get<bytes>();
    CHECK(minimum > 700);
    const outcome at = run_plan({"--chain", file, "--budget", std::to_string(minimum), "--policy",
                                 "checkmate", "--solver", solver, "--json"});
    CHECK(at.exit_code == 0);
    const outcome below = run_plan({"--chain", file, "--budget", std::to_string(minimum - 1),
                                    "--policy", "checkmate", "--solver", solver, "--json"});
    CHECK(below.exit_code == 1);
  }
}

TEST_CASE("remat-plan: checkmate's time limit and progress") {
  for (const auto& solver : plan_solvers()) {
    CAPTURE(solver);
    // The GPT-like chain's graph (31 compute nodes) is not proven optimal within a second by
    // either solver here; the limit must stop the solve near it either way.
    const outcome o =
        run_plan({"--chain", chain_file("gpt_like.json"), "--budget", "10GiB", "--policy",
                  "checkmate", "--solver", solver, "--time-limit", "1", "--progress", "--json"});
    CAPTURE(o.err);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    if (o.exit_code == 0) {
      CHECK(r["status"] == "ok");
      CHECK(r["peak_bytes"].get<bytes>() <= (bytes{10} << 30));
    } else {
      CHECK(r["status"] == "time_limit");
    }
    if (r.contains("solve_seconds")) CHECK(r["solve_seconds"].get<double>() < 5.0);
    CHECK(has(o.err, "remat-plan: checkmate"));
  }
}

TEST_CASE("remat-plan: graph usage errors exit 2") {
  const std::string c = chain_file("resnet_like.json");
  const std::string g = graph_file("residual_net.json");
  struct usage_case {
    std::vector<std::string> args;
    std::string reason;
  };
  const usage_case cases[] = {
      {{"--graph", g, "--budget", "1GiB", "--policy", "rotor"}, "plans chains only"},
      {{"--graph", g, "--chain", c, "--budget", "1GiB", "--policy", "checkmate"}, "not both"},
      {{"--graph", g, "--budget", "1GiB", "--policy", "checkmate", "--solver", "gurobi"},
       "unknown solver 'gurobi'"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--solver", "cbc"},
       "--solver applies to checkmate only"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--relax"},
       "--relax applies to checkmate only"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "revolve", "--find-minimum"},
       "--find-minimum applies to checkmate only"},
      {{"--graph", "", "--budget", "1GiB", "--policy", "checkmate"}, "--graph needs a file name"},
  };
  for (const auto& uc : cases) {
    CAPTURE(uc.reason);
    const outcome o = run_plan(uc.args);
    CHECK(o.exit_code == 2);
    CHECK(has(o.err, uc.reason));
    CHECK(o.out.empty());
  }
  const outcome missing = run_plan({"--graph", graph_file("no_such_graph.json"), "--budget",
                                    "1GiB", "--policy", "store_all", "--json"});
  CHECK(missing.exit_code == 1);
  CHECK(has(missing.err, "no_such_graph.json"));
}
