// Runs the remat-plan binary on the example chains (REMAT_PLAN_EXE, REMAT_EXAMPLES_DIR come from
// tests/CMakeLists.txt when the examples are built).
#if defined(REMAT_PLAN_EXE) && defined(REMAT_EXAMPLES_DIR)

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#ifndef _WIN32
#include <sys/wait.h>
#endif

#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>
#include <remat/policy/dtr.hpp>
#include <remat/policy/offload.hpp>
#include <remat/policy/offmate/from_graph.hpp>
#include <remat/remat.hpp>
#include <remat/sweep.hpp>

#include "support/io_checks.hpp"
#include "support/xml_check.hpp"

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

using remat::testing::slurp;

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

/// A command line that is a usage error, and a part of the reason remat-plan must give.
struct usage_case {
  std::vector<std::string> args;
  std::string reason;
};

/// Each case exits 2, with its reason on stderr and nothing on stdout.
void expect_usage_errors(const std::vector<usage_case>& cases) {
  for (const auto& uc : cases) {
    CAPTURE(uc.reason);
    const outcome o = run_plan(uc.args);
    CHECK(o.exit_code == 2);
    CHECK(has(o.err, uc.reason));
    CHECK(o.out.empty());
  }
}

/// How many times `part` occurs in `text`.
std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size()))
    ++n;
  return n;
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
      // What it printed is a schedule in the chain notation that the simulator accepts, with the
      // printed numbers.
      for (const auto& w : r["schedule"])
        CHECK((w.get<std::string>().front() == 'F' || w.get<std::string>().front() == 'B'));
      auto s = io::schedule_from_json(r, *c);
      REQUIRE_MESSAGE(s.ok(), s.message());
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
  const bytes minimum = rotor{}.minimum_budget(*c);
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
  // Once, 1e308 s each planned "ok" with an infinite makespan; 1e25 s made
  // CBC abort the process. Both are rejected with a message naming the stage and the field.
  for (const double t : {1e308, 1e25}) {
    CAPTURE(t);
    const auto path = remat::testing::scratch("remat_plan_test_", "huge_times.json");
    std::ofstream(path) << R"({"name": "huge", "input_bytes": 4, "stages": [
      {"name": "fc1", "forward_time": )"
                        << t << R"(, "backward_time": )" << t << R"(,
       "output_bytes": 100, "saved_bytes": 100},
      {"name": "loss", "forward_time": 1e-05, "backward_time": 1e-05, "output_bytes": 4,
       "saved_bytes": 4}]})";
    std::vector<std::string> policies = {"store_all", "periodic", "revolve", "rotor",
                                         "rotor_floating"};
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
    policies.emplace_back("checkmate");
#endif
    for (const auto& policy : policies) {
      CAPTURE(policy);
      const outcome o =
          run_plan({"--chain", path.string(), "--budget", "1MiB", "--policy", policy, "--json"});
      CAPTURE(o.err);
      CHECK(o.exit_code == 1);
      CHECK(has(o.err, "stage 1 ('fc1'): forward_time is"));
      CHECK(has(o.err, "1e+15 s"));
      const json r = json::parse(o.out, nullptr, false);
      REQUIRE(r.is_object());
      CHECK(r["status"] == "invalid_problem");
      const outcome text =
          run_plan({"--chain", path.string(), "--budget", "1MiB", "--policy", policy});
      CHECK(text.exit_code == 1);
      CHECK(!has(text.out + text.err, "inf"));
      CHECK(!has(text.out + text.err, "nan"));
    }
  }
}

TEST_CASE("remat-plan: --time-limit holds for every chain policy") {
  // 2,000 stages once took 30 s with rotor at --time-limit 1, and periodic and revolve took no
  // limit: each stops within the limit and a small margin, with a plan or status time_limit.
  // store_all has no time limit (it is linear): the option does not apply to it.
  const auto path = remat::testing::scratch("remat_plan_test_", "long_chain.json");
  {
    json c{{"name", "long"}, {"input_bytes", 1000}, {"stages", json::array()}};
    for (int l = 1; l <= 2000; ++l)
      c["stages"].push_back({{"name", "s" + std::to_string(l)},
                             {"forward_time", 1.0 + 0.001 * (l % 7)},
                             {"backward_time", 2.0},
                             {"output_bytes", 1000 + 10 * (l % 5)},
                             {"saved_bytes", 2000 + 10 * (l % 3)}});
    std::ofstream(path) << c.dump();
  }
  const outcome linear = run_plan({"--chain", path.string(), "--budget", "120000", "--policy",
                                   "store_all", "--time-limit", "0.2"});
  CHECK(linear.exit_code == 2);
  CHECK(linear.err.find("--time-limit applies to") != std::string::npos);
  for (const std::string policy : {"periodic", "revolve", "rotor", "rotor_floating"}) {
    CAPTURE(policy);
    std::vector<std::string> args = {"--chain", path.string(),  "--budget", "120000", "--policy",
                                     policy,    "--time-limit", "0.2",      "--json"};
    if (policy == "rotor" || policy == "rotor_floating") args.insert(args.end(), {"--slots", "20"});
    const auto t0 = std::chrono::steady_clock::now();
    const outcome o = run_plan(args);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CAPTURE(o.err);
    CHECK(took < 1.5);  // the limit, a margin, and loading the file and starting the process
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    if (o.exit_code == 0) {
      CHECK(r["status"] == "ok");
      CHECK(r["peak_bytes"].get<bytes>() <= 120000);
    } else {
      CHECK(o.exit_code == 1);
      // rotor_floating: its table is refused at once.
      const char* expect = policy == "rotor_floating" ? "invalid_problem" : "time_limit";
      CHECK(r["status"] == expect);
    }
  }
}

TEST_CASE("remat-plan: usage errors exit 2 with the reason on stderr") {
  const std::string c = chain_file("resnet_like.json");
  const std::vector<usage_case> cases = {
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
  expect_usage_errors(cases);
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
  for (const auto& c : std::vector<std::pair<std::string, bytes>>{{"3221225472", bytes{3} << 30},
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
  auto s = io::schedule_from_json(r);  // a program over the graph: "C0", "C1_ff", "D2", ...
  REQUIRE_MESSAGE(s.ok(), s.message());
  const auto rep = sim::simulate(g, *s, {.budget = budget});
  CHECK(rep.valid);
  CHECK(rep.peak == r["peak_bytes"].get<bytes>());
  CHECK(rep.makespan == doctest::Approx(r["makespan"].get<double>()));
}

}  // namespace

TEST_CASE("remat-plan --graph: store_all and checkmate plan the example graphs") {
  // Budgets that need recomputation yet fit: the attention block's minimum is 95% of its peak.
  for (const auto& c : std::vector<std::pair<std::string, double>>{
           {"residual_net.json", 0.9}, {"attention_block.json", 0.97}}) {
    const std::string& name = c.first;  // not a structured binding: see "budget suffixes"
    const double fraction = c.second;
    CAPTURE(name);
    auto g = io::load_graph(graph_file(name));
    REQUIRE(g.ok());
    const schedule sa{store_all_program(*g), g->ideal_time(), 0};
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
      const outcome o =
          run_plan({"--graph", graph_file(name), "--budget", std::to_string(budget), "--policy",
                    "checkmate", "--solver", solver, "--time-limit", cbc ? "30" : "1", "--json"});
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

#ifdef REMAT_HAS_CBC
TEST_CASE("remat-plan --policy offmate: a Llama graph's parameters, states and activations") {
  const std::string file = graph_file("llama_4layer.json");
  auto g = io::load_graph(file);
  REQUIRE(g.ok());
  bytes weights = 0;
  for (const auto& w : g->parameters()) weights += w.size;
  const bytes budget = 3ll << 30;  // less than the weights alone (4.0 GiB)
  const outcome o = run_plan(
      {"--graph", file, "--policy", "offmate", "--budget", "3GiB", "--time-limit", "60", "--json"});
  CAPTURE(o.err);
  REQUIRE(o.exit_code == 0);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r["status"] == "ok");
  CHECK(r["budget_bytes"].get<bytes>() == budget);
  CHECK(r["peak_bytes"].get<bytes>() <= budget);
  CHECK(r["host_peak_bytes"].get<bytes>() > 0);
  CHECK(r["makespan"].get<double>() >= g->ideal_time());
  const json& d = r["offmate"];
  REQUIRE(d.is_object());
  CHECK(d["batch"] == 1);  // the graph's own: no --max-batch
  CHECK_FALSE(d.contains("continuous_batch"));
  CHECK(d["fractional_makespan"].get<double>() > 0);
  CHECK(d["host_peak_bytes"] == r["host_peak_bytes"]);
  bytes planned = 0, cpu = 0;
  for (const json& b : d["blocks"]) {
    const std::string option = b["option"];
    CHECK((option == "store-all" || option == "recompute" || option == "offload"));
    planned += b["parameter_bytes"].get<bytes>();
    cpu += b["cpu_update_bytes"].get<bytes>();
    CHECK(b["offloaded_parameter_bytes"].get<bytes>() <= b["parameter_bytes"].get<bytes>());
  }
  CHECK(planned == weights);
  CHECK(cpu > 0);  // the GPU cannot hold the weights: the CPU updates some
  // The program with its parameter plan, replayed from the JSON alone.
  auto s = io::schedule_from_json(r);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(s->parameters.managed);
  remat::machine hw = machine::with_bandwidth(d["bandwidth_d2h"].get<double>());
  hw.cpu_optimizer_speed = d["cpu_optimizer_speed"].get<double>();
  hw.gpu_optimizer_speed = d["gpu_optimizer_speed"].get<double>();
  hw.step_overhead = d["step_overhead"].get<double>();
  const auto rep = sim::simulate(*g, *s, {.budget = budget, .hw = hw});
  CAPTURE((rep.first_violation ? rep.first_violation->message : std::string()));
  CHECK(rep.valid);
  CHECK(rep.peak == r["peak_bytes"].get<bytes>());
  CHECK(rep.host_peak == r["host_peak_bytes"].get<bytes>());
  CHECK(rep.makespan == doctest::Approx(r["makespan"].get<double>()));

  // The summary's table, per block.
  const outcome text =
      run_plan({"--graph", file, "--policy", "offmate", "--budget", "3GiB", "--time-limit", "60"});
  CHECK(text.exit_code == 0);
  CHECK(has(text.out, "leave GPU"));
  CHECK(has(text.out, "CPU update"));
  CHECK(has(text.out, "fractions "));
  CHECK(has(text.out, "host      "));

  // Too little host memory, too little GPU memory: planning failures that say what is short.
  const outcome host = run_plan({"--graph", file, "--policy", "offmate", "--budget", "3GiB",
                                 "--host-memory", "1GiB", "--time-limit", "60"});
  CHECK(host.exit_code == 1);
  CHECK(has(host.err, "host memory"));
  const outcome small = run_plan({"--graph", file, "--policy", "offmate", "--budget", "100MiB",
                                  "--time-limit", "60", "--json"});
  CHECK(small.exit_code == 1);
  const json rs = json::parse(small.out, nullptr, false);
  REQUIRE(rs.is_object());
  CHECK(rs["status"] == "budget_too_small");
  // --max-batch: the batch chosen too, the program for the graph at that batch.
  const outcome batched = run_plan({"--graph", file, "--policy", "offmate", "--budget", "6GiB",
                                    "--max-batch", "4", "--time-limit", "60", "--json"});
  CAPTURE(batched.err);
  REQUIRE(batched.exit_code == 0);
  const json rb = json::parse(batched.out, nullptr, false);
  REQUIRE(rb.is_object());
  const json& db = rb["offmate"];
  const int batch = db["batch"].get<int>();
  CHECK(batch >= 1);
  CHECK(batch <= 4);
  CHECK(db["continuous_batch"].get<double>() >= 1);
  CHECK(db["time_per_sample"].get<double>() > 0);
  auto sb = io::schedule_from_json(rb);
  REQUIRE_MESSAGE(sb.ok(), sb.message());
  const auto repb = sim::simulate(at_batch(*g, batch), *sb, {.budget = 6ll << 30, .hw = hw});
  CAPTURE((repb.first_violation ? repb.first_violation->message : std::string()));
  CHECK(repb.valid);
  CHECK(repb.peak == rb["peak_bytes"].get<bytes>());
  CHECK(repb.makespan == doctest::Approx(rb["makespan"].get<double>()));
  const outcome batched_text = run_plan({"--graph", file, "--policy", "offmate", "--budget", "6GiB",
                                         "--max-batch", "4", "--time-limit", "60"});
  CHECK(batched_text.exit_code == 0);
  CHECK(has(batched_text.out, "times the graph's"));
  // --host-memory and --max-batch are offmate's alone.
  expect_usage_errors(
      {{{"--chain", chain_file("resnet_like.json"), "--policy", "rotor", "--budget", "1GiB",
         "--host-memory", "1GiB"},
        "--host-memory applies to offmate only"},
       {{"--chain", chain_file("resnet_like.json"), "--policy", "rotor", "--budget", "1GiB",
         "--max-batch", "4"},
        "--max-batch applies to offmate only"},
       {{"--graph", file, "--policy", "offmate", "--budget", "1GiB", "--max-batch", "0"},
        "--max-batch"}});
}
#endif

TEST_CASE("remat-plan: checkmate on a chain plans its graph, never slower than rotor_floating") {
  const std::string file = small_chain_file();
  auto c = io::load_chain(file);
  REQUIRE(c.ok());
  auto g = build_graph(*c);
  REQUIRE(g.ok());
  const bytes low = rotor_floating{}.minimum_budget(*c);
  const bytes high = sim::simulate(*c, *lower(c->length(), store_all::program(*c)), {}).peak;
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
    const json rp = json::parse(plain.out, nullptr, false);
    REQUIRE(rp.is_object());
    // checkmate answers the minimum at once where its lower bound meets its heuristic plan's
    // peak (here: 2200 bytes); elsewhere infeasible, with the interval, and the hint.
    if (rp["status"] == "infeasible") {
      CHECK(has(plain.err, "--find-minimum"));
    } else {
      CHECK(rp["status"] == "budget_too_small");
      CHECK(rp["minimum_budget_bytes"].get<bytes>() > 700);
    }

    const outcome o = run_plan({"--chain", file, "--budget", "700", "--policy", "checkmate",
                                "--solver", solver, "--find-minimum", "--json"});
    CAPTURE(o.err);
    CHECK(o.exit_code == 1);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r["status"] == "budget_too_small");
    const bytes minimum = r["minimum_budget_bytes"].get<bytes>();
    CHECK(minimum > 700);
    if (rp["status"] == "budget_too_small")
      CHECK(rp["minimum_budget_bytes"].get<bytes>() == minimum);
    const outcome at = run_plan({"--chain", file, "--budget", std::to_string(minimum), "--policy",
                                 "checkmate", "--solver", solver, "--json"});
    CHECK(at.exit_code == 0);
    const outcome below = run_plan({"--chain", file, "--budget", std::to_string(minimum - 1),
                                    "--policy", "checkmate", "--solver", solver, "--json"});
    CHECK(below.exit_code == 1);
  }
}

TEST_CASE("remat-plan: a budget below the minimum names the minimum once") {
  // Once: the message, then "the minimum budget for rotor is ..." again.
  for (const std::string policy : {"rotor", "pofo", "store_all"}) {
    CAPTURE(policy);
    const outcome o = run_plan(
        {"--chain", chain_file("resnet_like.json"), "--budget", "100MiB", "--policy", policy});
    CAPTURE(o.err);
    CHECK(o.exit_code == 1);
    CHECK(count(o.err, "\n") == 1);
    CHECK(has(o.err, "give a budget of at least"));
  }
}

TEST_CASE("remat-plan: rotor's plan is optimal for its slots, proven optimal at exact sizes") {
  // The exact DP's plan was once called "not proven optimal".
  for (const std::string policy : {"rotor", "rotor_floating"}) {
    CAPTURE(policy);
    const outcome slots = run_plan({"--chain", chain_file("resnet_like.json"), "--budget", "1GiB",
                                    "--policy", policy, "--slots", "50"});
    CHECK(slots.exit_code == 0);
    CHECK(has(slots.out,
              "optimal for sizes rounded up to its slots, within --tolerance of the "
              "optimum at exact sizes"));
    CHECK(!has(slots.out, "not proven optimal"));
    // The bound the gap is measured against, and the gap.
    CHECK(has(slots.out, "(lower bound "));
    CHECK(has(slots.out, "%)"));
    const outcome exact = run_plan(
        {"--chain", small_chain_file(), "--budget", "2500", "--policy", policy, "--slots", "0"});
    CHECK(exact.exit_code == 0);
    CHECK(has(exact.out, "          proven optimal"));
  }
}

TEST_CASE("remat-plan: rotor at its minimum says it gives the fastest minimum-memory schedule") {
  // The ResNet profile's minimum is 892731392 bytes: no affordable slot count leaves a DP plan
  // there; 68 KB above it rotor's DP plans at refined slots.
  for (const std::string policy : {"rotor", "rotor_floating"}) {
    CAPTURE(policy);
    const std::string file = chain_file("resnet_like.json");
    const outcome at = run_plan({"--chain", file, "--budget", "892731392", "--policy", policy});
    CAPTURE(at.err);
    CHECK(at.exit_code == 0);
    CHECK(has(at.out, "not proven optimal: the fastest minimum-memory schedule"));
    const json j = json::parse(
        run_plan({"--chain", file, "--budget", "892731392", "--policy", policy, "--json"}).out,
        nullptr, false);
    CHECK(j["optimal"] == false);
    CHECK(j["method"] == "minimum_memory");
    CHECK(!j.contains("dp_slots"));
    if (policy == "rotor_floating") continue;  // its larger table falls back there too
    const json above = json::parse(
        run_plan({"--chain", file, "--budget", "892800000", "--policy", policy, "--json"}).out,
        nullptr, false);
    CHECK(above["method"] == "dp");
    CHECK(above["dp_slots"].get<std::int64_t>() > 500);  // refined from the default 500
    CHECK(above["optimal"] == false);
  }
}

TEST_CASE(
    "remat-plan: a chain given to --graph, or a graph to --chain, says which option takes it") {
  const std::string chain = chain_file("resnet_like.json");
  const std::string graph =
      (std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs" / "residual_net.json").string();
  const outcome as_graph =
      run_plan({"--graph", chain, "--budget", "1GiB", "--policy", "store_all"});
  CHECK(as_graph.exit_code == 1);
  CHECK(has(as_graph.err, "it is a chain profile: give it with --chain"));
  for (const std::string policy : {"rotor", "store_all"}) {
    const outcome as_chain = run_plan({"--chain", graph, "--budget", "1GiB", "--policy", policy});
    CHECK(as_chain.exit_code == 1);
    CHECK(has(as_chain.err, "it is a forward DAG: give it with --graph"));
  }
  // A broken chain file is not called a graph.
  const auto broken = remat::testing::scratch("remat_plan_test_", "broken_chain.json");
  std::ofstream(broken) << R"({"name": "x", "input_bytes": 1, "stages": [{"nam": "a"}]})";
  const outcome bad =
      run_plan({"--chain", broken.string(), "--budget", "1GiB", "--policy", "rotor"});
  CHECK(bad.exit_code == 1);
  CHECK(has(bad.err, "did you mean \"name\""));
  CHECK(!has(bad.err, "--graph"));
}

TEST_CASE("remat-plan: an unknown option or policy gets a \"did you mean\"") {
  // Once, JSON fields had one, options not.
  const std::string c = chain_file("resnet_like.json");
  for (const auto& [args, hint] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--chain", c, "--budget", "1GiB", "--policy", "periodic", "--segment", "3"},
            "did you mean --segments?"},
           {{"--chain", c, "--budget", "1GiB", "--polcy", "rotor"}, "did you mean --policy?"},
           {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--find-min"},
            "did you mean --find-minimum?"},
           {{"--chain", c, "--budget", "1GiB", "--policy", "rotr"}, "did you mean rotor?"}}) {
    const outcome o = run_plan(args);
    CAPTURE(o.err);
    CHECK(o.exit_code == 2);
    CHECK(has(o.err, hint));
  }
  const outcome far =
      run_plan({"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--xyzzy", "1"});
  CHECK(far.exit_code == 2);
  CHECK(has(far.err, "unknown option '--xyzzy'"));
  CHECK(!has(far.err, "did you mean"));
  const outcome flag =
      run_plan({"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--json=1"});
  CHECK(flag.exit_code == 2);
  CHECK(has(flag.err, "option --json takes no value"));
}

TEST_CASE("remat-plan: checkmate's infeasible message gives one hint, in the CLI's terms") {
  // Once: the library's "set find_minimum" and then the CLI's "add --find-minimum".
  for (const auto& solver : plan_solvers()) {
    if (solver != "cbc") continue;
    // Below the proven bound, where the bound and least_memory's peak differ: "infeasible",
    // with the interval and the hint (where they meet, the answer is the minimum, no hint).
    const outcome o =
        run_plan({"--graph", std::string(REMAT_EXAMPLES_DIR) + "/graphs/residual_net.json",
                  "--budget", "1000", "--policy", "checkmate", "--solver", solver});
    CAPTURE(o.err);
    CHECK(o.exit_code == 1);
    CHECK(count(o.err, "--find-minimum") == 1);
    CHECK(!has(o.err, "find_minimum"));
    CHECK(!has(o.err, "= true"));
    CHECK(count(o.err, "\n") == 1);
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
  const std::vector<usage_case> cases = {
      {{"--graph", g, "--budget", "1GiB", "--policy", "rotor"}, "plans chains only"},
      {{"--graph", g, "--chain", c, "--budget", "1GiB", "--policy", "checkmate"}, "not both"},
      {{"--graph", g, "--budget", "1GiB", "--policy", "checkmate", "--solver", "gurobi"},
       "unknown solver 'gurobi'"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--solver", "cbc"},
       "--solver applies to checkmate, rockmate, hiremate and offmate only"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--relax"},
       "--relax applies to checkmate and rockmate only"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "revolve", "--find-minimum"},
       "--find-minimum applies to checkmate only"},
      {{"--graph", "", "--budget", "1GiB", "--policy", "checkmate"}, "--graph needs a file name"},
  };
  expect_usage_errors(cases);
  const outcome missing = run_plan({"--graph", graph_file("no_such_graph.json"), "--budget", "1GiB",
                                    "--policy", "store_all", "--json"});
  CHECK(missing.exit_code == 1);
  CHECK(has(missing.err, "no_such_graph.json"));
}

TEST_CASE("remat-plan --multi-chain: the thesis' toy example, its minimum and its usage errors") {
  const std::string file = std::string(REMAT_EXAMPLES_DIR) + "/multi_chains/toy.json";
  // 9 slots of 1 MiB for the DP and 2 reserved: the optimum of 74 unit costs (26 B, 1 Loss and
  // 47 F), within the budget.
  const outcome o =
      run_plan({"--multi-chain", file, "--budget", "11MiB", "--policy", "multi_chain", "--json"});
  REQUIRE_MESSAGE(o.exit_code == 0, o.err);
  const json r = json::parse(o.out);
  CHECK(r["status"] == "ok");
  CHECK(r["makespan"].get<double>() == doctest::Approx(74));
  CHECK(r["peak_bytes"].get<bytes>() <= (bytes{11} << 20));
  CHECK(r["slots"] == 9);
  CHECK(r["minimum_slots"] == 7);
  CHECK(r["forwards"] == 47);
  CHECK(r["optimal"] == true);
  CHECK(r["ops"].get<std::string>().rfind("S0^(2) F1^(2)", 0) == 0);
  const outcome text =
      run_plan({"--multi-chain", file, "--budget", "11MiB", "--policy", "multi_chain"});
  REQUIRE(text.exit_code == 0);
  CHECK(has(text.out, "9 slots planned (m_min 7, 2 reserved)"));
  CHECK(has(text.out, "Loss"));
  // Below m_min + 2 slots: the minimum, 9 MiB.
  const outcome small =
      run_plan({"--multi-chain", file, "--budget", "8MiB", "--policy", "multi_chain", "--json"});
  CHECK(small.exit_code == 1);
  CHECK(json::parse(small.out)["minimum_budget_bytes"] == bytes{9} << 20);
  CHECK(has(small.err, "m_min = 7 slots"));
  const std::string c = chain_file("resnet_like.json");
  const std::vector<usage_case> cases = {
      {{"--multi-chain", file, "--budget", "11MiB", "--policy", "rotor"},
       "--multi-chain is planned by --policy multi_chain only"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "multi_chain"}, "give --multi-chain FILE"},
      {{"--multi-chain", file, "--chain", c, "--budget", "1GiB", "--policy", "multi_chain"},
       "not both"},
      {{"--multi-chain", file, "--policy", "multi_chain"}, "missing --budget"},
      {{"--multi-chain", file, "--budget", "1GiB", "--policy", "multi_chain", "--slots", "9"},
       "--slots does not apply to --multi-chain"},
      {{"--multi-chain", file, "--sweep"}, "--sweep works on --chain or --graph"},
  };
  expect_usage_errors(cases);
  const outcome missing =
      run_plan({"--multi-chain", "no_such.json", "--budget", "1GiB", "--policy", "multi_chain"});
  CHECK(missing.exit_code == 1);
  CHECK(has(missing.err, "no such file"));
}

TEST_CASE("remat-plan --processors: pipedream and madpipe plan a pipeline, errors name the fix") {
  const std::string c = chain_file("resnet_like.json");
  const outcome o = run_plan({"--chain", c, "--processors", "4", "--policy", "pipedream",
                              "--memory", "2GiB", "--bandwidth", "12e9", "--json"});
  REQUIRE_MESSAGE(o.exit_code == 0, o.err);
  const json r = json::parse(o.out);
  CHECK(r["status"] == "ok");
  CHECK(r["policy"] == "pipedream");
  CHECK(r["processors"] == 4);
  CHECK(r["copies"] == 3);
  CHECK(r["k"] == 1);
  CHECK(r["period"].get<double>() > 0);
  CHECK(r["period"].get<double>() < r["sequential_time"].get<double>());
  REQUIRE(r["stages"].size() >= 2);
  int next = 1;
  for (const auto& st : r["stages"]) {
    CHECK(st["first"] == next);
    next = st["last"].get<int>() + 1;
    CHECK(st["concurrent_activations"].get<int>() >= 1);
  }
  CHECK(next == 21);  // the chain's 20 layers
  REQUIRE(r["peak_bytes"].size() == 4);
  for (const auto& peak : r["peak_bytes"]) CHECK(peak.get<bytes>() <= (bytes{2} << 30));
  CHECK(r["pattern"].size() >= 2 * r["stages"].size());

  // madpipe, its time limit honoured; never slower than pipedream.
  const outcome m = run_plan({"--chain", c, "--processors", "4", "--policy", "madpipe", "--memory",
                              "2GiB", "--bandwidth", "12e9", "--time-limit", "20", "--json"});
  REQUIRE_MESSAGE(m.exit_code == 0, m.err);
  const json mr = json::parse(m.out);
  CHECK(mr["period"].get<double>() <= r["period"].get<double>() * (1 + 1e-9));
  const outcome text = run_plan({"--chain", c, "--processors", "4", "--policy", "pipedream",
                                 "--memory", "2GiB", "--bandwidth", "12e9"});
  REQUIRE(text.exit_code == 0);
  CHECK(has(text.out, "per mini-batch simulated"));
  CHECK(has(text.out, "processor 3:"));

  // Too little memory: the smallest that plans.
  const outcome small = run_plan(
      {"--chain", c, "--processors", "4", "--policy", "pipedream", "--memory", "100MiB", "--json"});
  CHECK(small.exit_code == 1);
  const json sr = json::parse(small.out);
  CHECK(sr["status"] == "budget_too_small");
  const auto least = sr["minimum_memory_bytes"].get<bytes>();
  CHECK(has(small.err, "the smallest memory with one is"));
  const outcome fits = run_plan({"--chain", c, "--processors", "4", "--policy", "pipedream",
                                 "--memory", std::to_string(least), "--json"});
  CHECK(fits.exit_code == 0);
  // More processors than layers.
  const outcome many = run_plan({"--chain", c, "--processors", "30", "--policy", "pipedream"});
  CHECK(many.exit_code == 1);
  CHECK(has(many.err, "use at most 20 processors"));

  const std::vector<usage_case> cases = {
      {{"--chain", c, "--processors", "4", "--policy", "rotor"},
       "with --processors use --policy pipedream or madpipe"},
      {{"--chain", c, "--policy", "madpipe", "--budget", "1GiB"}, "give --processors P"},
      {{"--chain", c, "--processors", "0", "--policy", "madpipe"}, "--processors"},
      {{"--chain", c, "--processors", "4", "--policy", "madpipe", "--budget", "1GiB"},
       "a pipeline takes --memory BYTES"},
      {{"--chain", c, "--processors", "4", "--policy", "madpipe", "--bandwidth", "0"},
       "need a bandwidth > 0"},
      {{"--chain", c, "--processors", "4", "--policy", "madpipe", "--slots", "9"},
       "--slots does not apply to a pipeline"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--memory", "1GiB"},
       "--memory applies to a pipeline"},
      {{"--graph", graph_file("residual_net.json"), "--processors", "2", "--policy", "madpipe"},
       "give --chain FILE"},
  };
  expect_usage_errors(cases);
}

// --- the figures of the shipped examples --------------------------------------------------------

TEST_CASE("remat-plan: the same figures as before on the example chains and graphs") {
  // Recorded with remat-plan before programs became one type (commit 216f6a9): the simulated
  // makespan and peak, and the number of chain ops of each plan (its "schedule" array). The
  // unified pipeline must not move any of them.
  struct figure {
    std::string file, policy, budget;
    double makespan;
    bytes peak;
    std::size_t ops;
  };
  const figure figures[] = {
      {"resnet_like.json", "store_all", "3GiB", 0.1030629, 2800222208, 40},
      {"resnet_like.json", "periodic", "1GiB", 0.1305407, 1072562176, 54},
      {"resnet_like.json", "periodic", "1.5GiB", 0.1242255, 1271660544, 50},
      {"resnet_like.json", "revolve", "1GiB", 0.137448, 1072562176, 59},
      {"resnet_like.json", "rotor", "1GiB", 0.1242255, 1066139648, 50},
      {"resnet_like.json", "rotor", "1.5GiB", 0.1139586, 1592786944, 46},
      {"resnet_like.json", "rotor_floating", "1GiB", 0.1242255, 1066139648, 50},
      {"resnet_like.json", "rotor_floating", "1.5GiB", 0.1139586, 1592786944, 46},
      {"gpt_like.json", "store_all", "16GiB", 0.753315, 16303063044, 30},
      {"gpt_like.json", "periodic", "8GiB", 0.9131347, 8500346884, 41},
      {"gpt_like.json", "revolve", "8GiB", 1.0000397, 6914572292, 44},
      {"gpt_like.json", "rotor", "8GiB", 0.913034, 8424849412, 40},
      {"gpt_like.json", "rotor_floating", "8GiB", 0.913034, 8374517764, 40},
  };
  for (const auto& f : figures) {
    CAPTURE(f.file);
    CAPTURE(f.policy);
    CAPTURE(f.budget);
    const outcome o = run_plan(
        {"--chain", chain_file(f.file), "--budget", f.budget, "--policy", f.policy, "--json"});
    CAPTURE(o.err);
    REQUIRE(o.exit_code == 0);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r["makespan"].get<double>() == doctest::Approx(f.makespan).epsilon(1e-12));
    CHECK(r["peak_bytes"].get<bytes>() == f.peak);
    CHECK(r["schedule"].size() == f.ops);
  }
  // The README's example plan, word for word.
  const outcome readme = run_plan(
      {"--chain", chain_file("resnet_like.json"), "--budget", "1GiB", "--policy", "rotor"});
  CHECK(readme.exit_code == 0);
  CHECK(has(readme.out, "makespan  0.1242 s predicted, +20.5% over store-all (0.1031 s)"));
  CHECK(has(readme.out,
            "peak      1066139648 bytes (1016.8 MiB) simulated; store-all needs 2800222208 bytes "
            "(2.6 GiB)"));
  CHECK(has(readme.out, "schedule  50 ops;"));
  CHECK(has(readme.out,
            "  F1_ck F2_none F3_ck F4_ck F5_ck F6_ck F7_none F8_ck F9_none F10_ck F11_all F12_all "
            "F13_all\n"
            "  F14_all F15_all F16_all F17_all F18_all F19_all F20_all B20 B19 B18 B17 B16 B15 B14 "
            "B13 B12\n"
            "  B11 F10_all B10 F8_all F9_all B9 B8 F6_all F7_all B7 B6 F5_all B5 F4_all B4 F3_all "
            "B3 F1_all\n"
            "  F2_all B2 B1\n"));
  // The minimum budgets reported below them.
  for (const auto& [file, policy, minimum] :
       std::vector<std::tuple<std::string, std::string, bytes>>{
           {"resnet_like.json", "store_all", 2800222208},
           {"gpt_like.json", "store_all", 16303063044},
           {"gpt_like.json", "periodic", 6914572292},
           {"gpt_like.json", "revolve", 6587416580},
           {"gpt_like.json", "rotor", 6587416580},
           {"gpt_like.json", "rotor_floating", 6587416580}}) {
    CAPTURE(file);
    CAPTURE(policy);
    const outcome o =
        run_plan({"--chain", chain_file(file), "--budget", "1GiB", "--policy", policy, "--json"});
    CHECK(o.exit_code == 1);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r["status"] == "budget_too_small");
    CHECK(r["minimum_budget_bytes"].get<bytes>() == minimum);
  }
  // store_all on the example graphs: programs over their training graphs.
  for (const auto& [name, makespan, peak, ops] :
       std::vector<std::tuple<std::string, double, bytes, std::size_t>>{
           {"residual_net.json", 0.01871, 430309376, 51},
           {"attention_block.json", 0.01423, 402685952, 66}}) {
    CAPTURE(name);
    const outcome o = run_plan(
        {"--graph", graph_file(name), "--budget", "1GiB", "--policy", "store_all", "--json"});
    REQUIRE(o.exit_code == 0);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    CHECK(r["makespan"].get<double>() == doctest::Approx(makespan).epsilon(1e-12));
    CHECK(r["peak_bytes"].get<bytes>() == peak);
    CHECK(r["schedule"].size() == ops);
    CHECK(r["schedule"][0] == "C0");
  }
}

// --- --simulate: replaying a given program -----------------------------------------------------

namespace {

/// The schedule remat-plan printed with --json, as one text.
std::string joined(const json& schedule) {
  std::string out;
  for (const auto& w : schedule) out += (out.empty() ? "" : " ") + w.get<std::string>();
  return out;
}

/// Runs --simulate with --json; checks the exit code against "valid" and the fields' types.
json simulate_json(std::vector<std::string> args) {
  args.emplace_back("--json");
  const outcome o = run_plan(args);
  CAPTURE(o.err);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  REQUIRE(r["valid"].is_boolean());
  REQUIRE(r["peak_bytes"].is_number_integer());
  REQUIRE(r["makespan"].is_number());
  REQUIRE(r["budget_bytes"].is_number_integer());
  REQUIRE((r["violation"].is_null() || r["violation"].is_string()));
  if (r["valid"] == true) {
    CHECK(o.exit_code == 0);
    CHECK(r["status"] == "ok");
    CHECK(r["violation"].is_null());
    CHECK(o.err.empty());
  } else {
    CHECK(o.exit_code == 1);
    CHECK(r["status"] == "invalid_schedule");
    CHECK(r["violation"].is_string());
    CHECK(has(o.err, "remat-plan: the program is invalid: "));
  }
  return r;
}

}  // namespace

TEST_CASE(
    "remat-plan --simulate: a plan replays to its own figures, in either notation and from a "
    "file") {
  const std::string file = chain_file("resnet_like.json");
  const outcome planned =
      run_plan({"--chain", file, "--budget", "1GiB", "--policy", "rotor", "--json"});
  REQUIRE(planned.exit_code == 0);
  const json plan = json::parse(planned.out);
  const std::string text = joined(plan["schedule"]);

  const json r = simulate_json({"--chain", file, "--budget", "1GiB", "--simulate", text});
  CHECK(r["valid"] == true);
  CHECK(r["peak_bytes"] == plan["peak_bytes"]);
  CHECK(r["makespan"].get<double>() ==
        doctest::Approx(plan["makespan"].get<double>()).epsilon(1e-12));
  CHECK(r["budget_bytes"].get<bytes>() == (bytes{1} << 30));
  CHECK(r["host_peak_bytes"] == 0);

  // The same program as instructions over the chain's graph ("C0 C1_ff D2 ..."), and from a file.
  auto c = io::load_chain(file);
  REQUIRE(c.ok());
  const auto s = io::schedule_from_json(plan, *c);
  REQUIRE(s.ok());
  const json program =
      simulate_json({"--chain", file, "--budget", "1GiB", "--simulate", to_string(*s)});
  CHECK(program["valid"] == true);
  CHECK(program["peak_bytes"] == plan["peak_bytes"]);
  CHECK(program["instructions"].get<std::size_t>() == s->ops.size());
  CHECK(r["instructions"].get<std::size_t>() == s->ops.size());
  CHECK(r["chain_ops"].get<std::size_t>() == plan["schedule"].size());
  CHECK(!program.contains("chain_ops"));
  const auto path = remat::testing::scratch("remat_plan_test_", "program.txt");
  std::ofstream(path) << text << '\n';
  const json from_file =
      simulate_json({"--chain", file, "--budget", "1GiB", "--simulate", "@" + path.string()});
  CHECK(from_file["valid"] == true);
  CHECK(from_file["peak_bytes"] == plan["peak_bytes"]);
  std::filesystem::remove(path);

  // The readable form.
  const outcome o = run_plan({"--chain", file, "--budget", "1GiB", "--simulate", text});
  CHECK(o.exit_code == 0);
  CHECK(o.err.empty());
  CHECK(has(o.out, "valid     yes"));
  CHECK(has(o.out, "program   50 ops of the chain notation (" + std::to_string(s->ops.size()) +
                       " instructions on the training graph)"));
  CHECK(has(o.out, "peak      1066139648 bytes (1016.8 MiB) simulated"));
  CHECK(has(o.out, "makespan  0.1242 s simulated"));
  CHECK(!has(o.out, "violation"));

  // A graph's store-all program (the program text form), on the graph.
  auto g = io::load_graph(graph_file("residual_net.json"));
  REQUIRE(g.ok());
  const schedule sa{store_all_program(*g), g->ideal_time(), 0};
  const auto rep = sim::simulate(*g, sa);
  const json gr = simulate_json({"--graph", graph_file("residual_net.json"), "--budget", "1GiB",
                                 "--simulate", to_string(sa)});
  CHECK(gr["valid"] == true);
  CHECK(gr["peak_bytes"].get<bytes>() == rep.peak);
  CHECK(gr["makespan"].get<double>() == doctest::Approx(rep.makespan));
  CHECK(gr["graph"] == g->name);
}

TEST_CASE("remat-plan --simulate: over the budget, the replay goes on to the true peak") {
  const std::string file = chain_file("resnet_like.json");
  const outcome planned =
      run_plan({"--chain", file, "--budget", "1GiB", "--policy", "rotor", "--json"});
  REQUIRE(planned.exit_code == 0);
  const json plan = json::parse(planned.out);
  const bytes peak = plan["peak_bytes"].get<bytes>();
  const json r = simulate_json({"--chain", file, "--budget", std::to_string(peak - 1), "--simulate",
                                joined(plan["schedule"])});
  CHECK(r["valid"] == false);
  CHECK(r["peak_bytes"].get<bytes>() == peak);
  const std::string v = r["violation"].get<std::string>();
  CHECK(has(v, "over the budget of " + std::to_string(peak - 1) + " bytes"));
  CHECK(has(v, "needs " + std::to_string(peak) + " bytes while it runs"));
  CHECK((v.front() == 'F' || v.front() == 'B'));  // it names the chain op at fault
  const outcome text = run_plan({"--chain", file, "--budget", std::to_string(peak - 1),
                                 "--simulate", joined(plan["schedule"])});
  CHECK(text.exit_code == 1);
  CHECK(has(text.out, "valid     no"));
  CHECK(has(text.out, "violation "));
  CHECK(has(text.err, "over the budget"));
}

TEST_CASE("remat-plan --simulate: invalid programs and words that are not instructions") {
  const std::string file = small_chain_file();  // stages a, b, c, loss
  struct bad_case {
    std::vector<std::string> args;
    std::vector<std::string> says;
  };
  const std::string g = graph_file("residual_net.json");
  const bad_case cases[] = {
      // The chain notation's own rules, checked when it is lowered: nothing runs.
      {{"--chain", file, "--simulate", "F1_ck F3_all"}, {"F3_all at op 1", "a_2 is not in memory"}},
      {{"--chain", file, "--simulate", "F1_ck F2_all B2"}, {"B2 at op 2", "delta_2"}},
      {{"--chain", file, "--simulate", "F7_ck"}, {"stage 7 does not exist"}},
      // Words that are not instructions.
      {{"--chain", file, "--simulate", "F1_ck X3 B1"},
       {"'X3' is not an instruction of the chain notation"}},
      {{"--chain", file, "--simulate", "F1_ck C3"},
       {"'C3' is not an instruction of the chain notation"}},
      {{"--chain", file, "--simulate", "C0 Q1"}, {"word 1 'Q1'", "nor of the chain notation"}},
      {{"--graph", g, "--simulate", "C0 F1_ck"}, {"word 1 'F1_ck'", "needs --chain"}},
      // Rules of the simulator: a tensor used while on the host, a node run twice, the end state.
      {{"--chain", file, "--simulate", "F1_ck O1 W1 F2_all F3_all F4_all B4 B3 B2 F1_all B1"},
       {"F2_all", "'a_1' is on the host", "O1 at op 1", "prefetch it"}},
      {{"--graph", g, "--simulate", "C0 C0"}, {"instruction 1 (C0)", "already in memory"}},
      {{"--chain", file, "--simulate", "F1_all F2_all"}, {"the schedule ends without running"}},
      {{"--graph", g, "--simulate", "C999"}, {"compute node 999 does not exist"}},
  };
  for (const auto& bc : cases) {
    auto args = bc.args;
    args.insert(args.end(), {"--budget", "1GiB"});
    CAPTURE(joined(json(args)));
    const json r = simulate_json(args);
    CHECK(r["valid"] == false);
    const std::string v = r["violation"].get<std::string>();
    for (const auto& part : bc.says) CHECK_MESSAGE(has(v, part), v, " lacks ", part);
  }
  // A program the lowering rejects ran nothing.
  const json nothing =
      simulate_json({"--chain", file, "--budget", "1GiB", "--simulate", "F1_ck F3_all"});
  CHECK(nothing["peak_bytes"] == 0);
  CHECK(nothing["makespan"] == 0);
  // An unreadable program file is a failure to read, not an invalid program.
  const outcome missing = run_plan({"--chain", file, "--budget", "1GiB", "--simulate",
                                    "@" + chain_file("no_such_program.txt"), "--json"});
  CHECK(missing.exit_code == 1);
  CHECK(has(missing.err, "cannot read program file"));
  CHECK(json::parse(missing.out, nullptr, false)["status"] == "invalid_problem");
}

TEST_CASE("remat-plan --simulate: --bandwidth times the transfers") {
  const std::string file = small_chain_file();  // a_1 is 400 bytes
  // a_1 goes to the host after F2 and comes back for the second F2: without a bandwidth the
  // transfers are free (the makespan is the sum of the compute times, 21 s); at 100 bytes/s the
  // offload (4 s) hides behind F3..B3 (6 s), the prefetch (4 s) is waited for in full.
  const std::string program = "F1_ck F2_ck O1 F3_all F4_all B4 B3 W1 P1 W1 F2_all B2 F1_all B1";
  const json free_moves =
      simulate_json({"--chain", file, "--budget", "1GiB", "--simulate", program});
  CHECK(free_moves["valid"] == true);
  CHECK(free_moves["makespan"].get<double>() == doctest::Approx(21.0));
  CHECK(free_moves["host_peak_bytes"] == 400);
  const json slow = simulate_json(
      {"--chain", file, "--budget", "1GiB", "--simulate", program, "--bandwidth", "100"});
  CHECK(slow["valid"] == true);
  CHECK(slow["makespan"].get<double>() == doctest::Approx(25.0));
  CHECK(slow["bandwidth"] == 100.0);
  CHECK(slow["peak_bytes"].get<bytes>() >= free_moves["peak_bytes"].get<bytes>());
  // Suffixes: 1KiB/s = 1024 bytes per second: the prefetch takes 400/1024 s.
  const json kib = simulate_json(
      {"--chain", file, "--budget", "1GiB", "--simulate", program, "--bandwidth=1KiB/s"});
  CHECK(kib["makespan"].get<double>() == doctest::Approx(21.0 + 400.0 / 1024.0));
  const outcome text =
      run_plan({"--chain", file, "--budget", "1GiB", "--simulate", program, "--bandwidth", "100"});
  CHECK(text.exit_code == 0);
  CHECK(has(text.out, "transfers 100 bytes/s each way"));
  CHECK(has(text.out, "makespan  25 s simulated"));
  CHECK(has(text.out, "the host holds up to 400 bytes"));
}

TEST_CASE("remat-plan --simulate: usage errors exit 2") {
  const std::string c = chain_file("resnet_like.json");
  const std::vector<usage_case> cases = {
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--simulate", "F1_all B1"},
       "not both"},
      {{"--chain", c, "--budget", "1GiB", "--simulate", "F1_all B1", "--slots", "3"},
       "--slots applies to planning (--policy) only"},
      {{"--chain", c, "--budget", "1GiB", "--simulate", "F1_all B1", "--time-limit", "3"},
       "--time-limit applies to planning (--policy) only"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--bandwidth", "1e9"},
       "--bandwidth applies to --simulate and to the policies that plan transfers"},
      {{"--chain", c, "--budget", "1GiB", "--simulate", "F1_all B1", "--bandwidth", "0.5"},
       "--bandwidth '0.5' is below 1 byte per second"},
      {{"--chain", c, "--budget", "1GiB", "--simulate", "F1_all B1", "--bandwidth", "fast"},
       "not a bandwidth"},
      {{"--chain", c, "--budget", "1GiB", "--simulate", "F1_all B1", "--bandwidth", "1GB/s"},
       "unknown unit"},
      {{"--chain", c, "--budget", "1GiB", "--simulate="}, "--simulate needs a program"},
      {{"--chain", c, "--simulate", "F1_all B1"}, "missing --budget"},
      {{"--budget", "1GiB", "--simulate", "F1_all B1"}, "missing --chain"},
  };
  expect_usage_errors(cases);
  const outcome help = run_plan({"--help"});
  CHECK(has(help.out, "--simulate PROGRAM"));
  CHECK(has(help.out, "--bandwidth BYTES_PER_S"));
  // --bandwidth 0 is a machine without a link: a program that offloads is invalid there, one
  // that does not is not; inf is instantaneous copies.
  const outcome none = run_plan({"--chain", c, "--budget", "100GiB", "--simulate",
                                 "F1_ck O0 F2_all W0 P0 W0", "--bandwidth", "0"});
  CHECK(none.exit_code == 1);
  CHECK(has(none.err, "no device-to-host link (bandwidth 0)"));
  CHECK(run_plan(
            {"--chain", c, "--budget", "100GiB", "--simulate", "F1_all B1", "--bandwidth", "inf"})
            .exit_code != 2);
}

TEST_CASE("remat-plan --policy hiremate: a U-Net's clusters in --json, its minimum, its knobs") {
  const auto solvers = plan_solvers();
  if (std::find(solvers.begin(), solvers.end(), "cbc") == solvers.end()) return;
  const std::string file = graph_file("unet.json");
  auto g = io::load_graph(file);
  REQUIRE(g.ok());
  const bytes budget = peak_of_store_all(*g) * 7 / 10;
  const std::vector<std::string> small = {"--policy", "hiremate", "--cluster-limits",
                                          "4,6",      "--grid",   "2,3"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), small.begin(), small.end());
    return run_plan(args);
  };
  const outcome o = with({"--graph", file, "--budget", std::to_string(budget), "--json"});
  CAPTURE(o.err);
  REQUIRE(o.exit_code == 0);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  check_graph_plan(r, *g, budget);
  CHECK(r["policy"] == "hiremate");
  const json& h = r["hiremate"];
  REQUIRE(h.is_object());
  CHECK(h["levels"].get<int>() >= 3);
  REQUIRE(h["clusters"].is_array());
  REQUIRE(h["clusters"].size() >= 3);
  CHECK(h["clusters"].back()["level"] == h["levels"]);
  CHECK(h["top_optimal"].is_boolean());
  CHECK((h["top_gap"].is_null() || h["top_gap"].get<double>() >= 0));
  CHECK(h["top_from_start"].is_boolean());
  int chosen = 0;
  for (const auto& c : h["clusters"]) {
    CHECK(c["forward_nodes"].size() >= 1);
    CHECK(c["unproven"].get<int>() <= c["solves"].get<int>());
    if (!c["chosen_option"].is_null()) {
      ++chosen;
      CHECK(c["chosen_option"].get<int>() < c["options"].get<int>());
    }
  }
  CHECK(chosen >= 1);

  // --find-minimum: the smallest budget hiremate plans, planned.
  const outcome m = with({"--graph", file, "--find-minimum", "--json"});
  CAPTURE(m.err);
  REQUIRE(m.exit_code == 0);
  const json rm = json::parse(m.out, nullptr, false);
  REQUIRE(rm.is_object());
  const auto least = rm["minimum_budget_bytes"].get<bytes>();
  CHECK(least < budget);
  CHECK(rm["peak_bytes"].get<bytes>() <= least);

  // Below it: the refusal names it.
  const outcome below = with({"--graph", file, "--budget", std::to_string(least / 2)});
  CHECK(below.exit_code == 1);
  CHECK(has(below.err, "the smallest budget hiremate plans"));

  // --cluster-limits is hiremate's, and checked.
  expect_usage_errors(
      {{{"--graph", file, "--budget", "1GiB", "--policy", "checkmate", "--cluster-limits", "4,6"},
        "--cluster-limits applies to hiremate only"},
       {{"--graph", file, "--budget", "1GiB", "--policy", "hiremate", "--cluster-limits", "6,4"},
        "2 <= L <= T"}});
}

TEST_CASE("remat-plan --policy rockmate: graphs and chains, its blocks in --json") {
  const auto solvers = plan_solvers();
  if (solvers.empty()) return;
  const std::string solver = solvers.front();
  auto g = io::load_graph(graph_file("residual_net.json"));
  REQUIRE(g.ok());
  const bytes budget = bytes{300} << 20;
  const outcome o =
      run_plan({"--graph", graph_file("residual_net.json"), "--budget", "300MiB", "--policy",
                "rockmate", "--solver", solver, "--grid", "4,4", "--threads", "2", "--json"});
  CAPTURE(o.err);
  REQUIRE(o.exit_code == 0);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  check_graph_plan(r, *g, budget);
  CHECK(r["policy"] == "rockmate");
  CHECK(r["solver"] == solver);
  const json& rm = r["rockmate"];
  REQUIRE(rm.is_object());
  CHECK(rm["kinds_of_blocks"] == 4);  // the two residual blocks are one kind
  REQUIRE(rm["blocks"].size() == 5);  // stem, two residual blocks, avgpool, fc with the loss
  int recomputed = 0;
  for (const auto& b : rm["blocks"]) {
    CHECK(b["chosen_option"].get<int>() < b["options"].get<int>());
    CHECK(b["forward_runs"].get<int>() >= 1);
    recomputed += b["forward_runs"].get<int>() > 1;
  }
  CHECK(recomputed > 0);
  CHECK(rm["blocks"][1]["kind"] == rm["blocks"][2]["kind"]);

  // The readable summary lists the blocks; a chain plans through its graph, never slower than
  // rotor.
  const outcome text = run_plan({"--graph", graph_file("residual_net.json"), "--budget", "300MiB",
                                 "--policy", "rockmate", "--solver", solver, "--grid", "3,3"});
  CHECK(text.exit_code == 0);
  CHECK(has(text.out, "blocks    5 blocks of 4 kinds"));
  const std::string file = small_chain_file();
  for (const std::string b : {"2300", "2600"}) {
    CAPTURE(b);
    const outcome rk = run_plan({"--chain", file, "--budget", b, "--policy", "rockmate", "--solver",
                                 solver, "--slots", "0", "--json"});
    const outcome rt =
        run_plan({"--chain", file, "--budget", b, "--policy", "rotor", "--slots", "0", "--json"});
    CAPTURE(rk.err);
    REQUIRE(rk.exit_code == 0);
    REQUIRE(rt.exit_code == 0);
    CHECK(json::parse(rk.out)["makespan"].get<double>() <=
          json::parse(rt.out)["makespan"].get<double>() * (1 + 1e-12));
  }
  const outcome below = run_plan(
      {"--chain", file, "--budget", "700", "--policy", "rockmate", "--solver", solver, "--json"});
  CHECK(below.exit_code == 1);
  CHECK(json::parse(below.out)["status"] == "budget_too_small");
  CHECK(has(below.err, "minimum"));
  // Usage errors.
  for (const auto& uc : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--chain", file, "--budget", "1GiB", "--policy", "rotor", "--grid", "3,3"},
            "--grid applies to rockmate and hiremate only"},
           {{"--chain", file, "--budget", "1GiB", "--policy", "rockmate", "--grid", "0,3"},
            "--grid '0,3' is not"},
           {{"--chain", file, "--budget", "1GiB", "--policy", "rockmate", "--grid", "3"},
            "--grid '3' is not"},
           {{"--chain", file, "--budget", "1GiB", "--policy", "rockmate", "--threads", "-1"},
            "--threads"},
           {{"--chain", file, "--budget", "1GiB", "--policy", "revolve", "--threads", "2"},
            "--threads applies to rotor, checkmate, rockmate, hiremate and offmate only"}}) {
    const std::string& reason = uc.second;
    CAPTURE(reason);
    const outcome u = run_plan(uc.first);
    CHECK(u.exit_code == 2);
    CHECK(has(u.err, reason));
  }
}

// --- the offloading policies: pofo, offload_dynprog, offload_greedy (docs/offloading.md) ---

namespace {

/// The words of a --json schedule.
std::vector<std::string> schedule_words(const json& r) {
  std::vector<std::string> w;
  for (const auto& x : r["schedule"]) w.push_back(x.get<std::string>());
  return w;
}

/// Whether some word of `words` is a transfer of kind `kind` ('O', 'P' or 'W') in the chain
/// notation.
bool has_transfer(const std::vector<std::string>& words, char kind) {
  return std::any_of(words.begin(), words.end(), [&](const std::string& w) {
    return w.size() >= 2 && w.front() == kind && std::isdigit(static_cast<unsigned char>(w[1]));
  });
}

}  // namespace

TEST_CASE(
    "remat-plan --policy pofo: a plan with transfers between rotor's minimum and the store-all "
    "peak") {
  const std::string file = chain_file("resnet_like.json");
  auto c = io::load_chain(file);
  REQUIRE(c.ok());
  const bytes budget = 1288490189;  // 1.2GiB
  const bytes store_all_peak =
      sim::simulate(*c, *lower(c->length(), store_all::program(*c)), {.record_timeline = false})
          .peak;
  REQUIRE(rotor{}.minimum_budget(*c) < budget);
  REQUIRE(budget < store_all_peak);

  // The summary: the program with O/P words, the times, the overlap, the offloaded set.
  const outcome text =
      run_plan({"--chain", file, "--budget", "1.2GiB", "--policy", "pofo", "--bandwidth", "12e9"});
  CAPTURE(text.err);
  REQUIRE(text.exit_code == 0);
  CHECK(has(text.out, "policy    pofo (slots 50)"));
  CHECK(has(text.out, "transfers 1.2e+10 bytes/s each way"));
  CHECK(has(text.out, "program (simulated)"));
  CHECK(has(text.out, "model time (pofo's model"));
  CHECK(has(text.out, "time      compute "));
  CHECK(has(text.out, ", transfers "));
  CHECK(has(text.out, ", idle "));
  CHECK(has(text.out, "% of the transfer time hidden behind compute"));
  CHECK(has(text.out, "offloaded "));
  CHECK(has(text.out, "peak      "));
  std::vector<std::string> printed;
  {
    std::istringstream in(text.out.substr(text.out.find("schedule  ")));
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      if (line.size() < 3 || line[2] == ' ') continue;  // the legend, indented further
      std::istringstream words(line);
      for (std::string w; words >> w;) printed.push_back(w);
    }
  }
  CHECK(has_transfer(printed, 'O'));
  CHECK(has_transfer(printed, 'P'));
  CHECK(has(text.out, " B1\n"));
  CHECK(text.err.empty());

  // --json: the schedule with its transfers, and the offload object; the simulator agrees with
  // both on the machine pofo planned for.
  const outcome o = run_plan(
      {"--chain", file, "--budget", "1.2GiB", "--policy", "pofo", "--bandwidth", "12e9", "--json"});
  REQUIRE(o.exit_code == 0);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r["status"] == "ok");
  CHECK(r["policy"] == "pofo");
  CHECK(r["budget_bytes"].get<bytes>() == budget);
  CHECK(r["peak_bytes"].get<bytes>() <= budget);
  const auto words = schedule_words(r);
  CHECK(has_transfer(words, 'O'));
  CHECK(has_transfer(words, 'P'));
  CHECK(words == printed);
  REQUIRE(r.contains("offload"));
  const json& off = r["offload"];
  CHECK(off["bandwidth_d2h"].get<double>() == 12e9);
  CHECK(off["bandwidth_h2d"].get<double>() == 12e9);
  REQUIRE(off["offloaded"].is_array());
  CHECK(!off["offloaded"].empty());
  bytes moved = 0;
  for (const auto& k : off["offloaded"]) {
    CHECK(std::find(words.begin(), words.end(), "O" + std::to_string(k.get<int>())) != words.end());
    moved += c->a(k.get<int>());
  }
  CHECK(off["offloaded_bytes"].get<bytes>() == moved);
  for (const char* field :
       {"model_time", "compute_time", "transfer_time", "idle_time", "overlap"}) {
    CAPTURE(field);
    REQUIRE(off[field].is_number());
    CHECK(off[field].get<double>() >= 0);
  }
  CHECK(off["transfer_time"].get<double>() > 0);
  CHECK(off["overlap"].get<double>() <= 1.0);
  CHECK(off["model_time"].get<double>() <= r["makespan"].get<double>() * (1 + 1e-9));
  CHECK(off["compute_time"].get<double>() + off["idle_time"].get<double>() ==
        doctest::Approx(r["makespan"].get<double>()));
  auto s = io::schedule_from_json(r, *c);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const auto rep = sim::simulate(*c, *s, {.budget = budget, .hw = machine::with_bandwidth(12e9)});
  CHECK(rep.valid);
  CHECK(rep.peak == r["peak_bytes"].get<bytes>());
  CHECK(rep.makespan == doctest::Approx(r["makespan"].get<double>()));

  // The lanes set apart.
  const outcome apart = run_plan({"--chain", file, "--budget", "1.2GiB", "--policy", "pofo",
                                  "--bandwidth-d2h", "6e9", "--bandwidth-h2d=8GiB/s", "--json"});
  REQUIRE(apart.exit_code == 0);
  const json a = json::parse(apart.out, nullptr, false);
  CHECK(a["offload"]["bandwidth_d2h"].get<double>() == 6e9);
  CHECK(a["offload"]["bandwidth_h2d"].get<double>() == 8.0 * (1 << 30));
  auto sa = io::schedule_from_json(a, *c);
  REQUIRE(sa.ok());
  const auto ra = sim::simulate(
      *c, *sa, {.budget = budget, .hw = machine{6e9, 8.0 * (1 << 30), unlimited_bytes}});
  CHECK(ra.valid);
  CHECK(ra.makespan == doctest::Approx(a["makespan"].get<double>()));
}

TEST_CASE("remat-plan --policy pofo --bandwidth 0: no transfers, rotor's plan") {
  const std::string file = chain_file("resnet_like.json");
  const outcome o = run_plan(
      {"--chain", file, "--budget", "1.2GiB", "--policy", "pofo", "--bandwidth", "0", "--json"});
  CAPTURE(o.err);
  REQUIRE(o.exit_code == 0);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  const auto words = schedule_words(r);
  CHECK(!has_transfer(words, 'O'));
  CHECK(!has_transfer(words, 'P'));
  CHECK(!has_transfer(words, 'W'));
  CHECK(r["offload"]["bandwidth_d2h"].get<double>() == 0);
  CHECK(r["offload"]["offloaded"].empty());
  CHECK(r["offload"]["transfer_time"].get<double>() == 0);
  const outcome rotor_plan = run_plan(
      {"--chain", file, "--budget", "1.2GiB", "--policy", "rotor", "--slots", "50", "--json"});
  REQUIRE(rotor_plan.exit_code == 0);
  CHECK(r["makespan"].get<double>() ==
        doctest::Approx(json::parse(rotor_plan.out)["makespan"].get<double>()));
  const outcome text =
      run_plan({"--chain", file, "--budget", "1.2GiB", "--policy", "pofo", "--bandwidth=0"});
  CHECK(text.exit_code == 0);
  CHECK(has(text.out, "transfers none"));
  CHECK(has(text.out, "offloaded nothing"));
  // Instantaneous transfers: null in --json.
  const outcome inf = run_plan(
      {"--chain", file, "--budget", "1.2GiB", "--policy", "pofo", "--bandwidth", "inf", "--json"});
  REQUIRE(inf.exit_code == 0);
  CHECK(json::parse(inf.out)["offload"]["bandwidth_d2h"].is_null());
}

TEST_CASE("remat-plan: offload_dynprog and offload_greedy store everything and offload") {
  const std::string file = chain_file("resnet_like.json");
  auto c = io::load_chain(file);
  REQUIRE(c.ok());
  const bytes budget = 2469606195;  // 2.3GiB, below the store-all peak (2.6 GiB)
  for (const std::string policy : {"offload_dynprog", "offload_greedy"}) {
    CAPTURE(policy);
    const outcome o =
        run_plan({"--chain", file, "--budget", "2.3GiB", "--policy", policy, "--json"});
    CAPTURE(o.err);
    REQUIRE(o.exit_code == 0);
    const json r = json::parse(o.out, nullptr, false);
    CHECK(r["status"] == "ok");
    CHECK(r["peak_bytes"].get<bytes>() <= budget);
    CHECK(r["offload"]["bandwidth_d2h"].get<double>() == 12e9);  // the policy's default
    CHECK(!r["offload"]["offloaded"].empty());
    const auto words = schedule_words(r);
    CHECK(has_transfer(words, 'O'));
    // No recomputation: one forward per stage.
    CHECK(std::count_if(words.begin(), words.end(),
                        [](const std::string& w) { return w.front() == 'F'; }) == c->length());
    auto s = io::schedule_from_json(r, *c);
    REQUIRE(s.ok());
    const auto rep = sim::simulate(*c, *s, {.budget = budget, .hw = machine::with_bandwidth(12e9)});
    CHECK(rep.valid);
    CHECK(rep.makespan == doctest::Approx(r["makespan"].get<double>()));
  }
}

TEST_CASE("remat-plan: offload_autocapper, and pofo's own plan with --no-portfolio") {
  const std::string file = chain_file("resnet_like.json");
  auto c = io::load_chain(file);
  REQUIRE(c.ok());
  const bytes budget = 1610612736;  // 1.5GiB
  const outcome a =
      run_plan({"--chain", file, "--budget", "1.5GiB", "--policy", "offload_autocapper", "--json"});
  CAPTURE(a.err);
  REQUIRE(a.exit_code == 0);
  const json r = json::parse(a.out, nullptr, false);
  CHECK(r["status"] == "ok");
  CHECK(r["peak_bytes"].get<bytes>() <= budget);
  auto s = io::schedule_from_json(r, *c);
  REQUIRE(s.ok());
  CHECK(sim::simulate(*c, *s, {.budget = budget, .hw = machine::with_bandwidth(12e9)}).valid);
  // pofo's portfolio is never slower than autocapper, and its DP alone is a plan too.
  const outcome p = run_plan({"--chain", file, "--budget", "1.5GiB", "--policy", "pofo", "--json"});
  const outcome own = run_plan(
      {"--chain", file, "--budget", "1.5GiB", "--policy", "pofo", "--no-portfolio", "--json"});
  REQUIRE(p.exit_code == 0);
  REQUIRE(own.exit_code == 0);
  const double best = json::parse(p.out)["makespan"].get<double>();
  CHECK(best <= r["makespan"].get<double>() * (1 + 1e-12));
  CHECK(best <= json::parse(own.out)["makespan"].get<double>() * (1 + 1e-12));
  const outcome bad =
      run_plan({"--chain", file, "--budget", "1.5GiB", "--policy", "rotor", "--no-portfolio"});
  CHECK(bad.exit_code == 2);
  CHECK(has(bad.err, "--no-portfolio applies to pofo"));
}

TEST_CASE("remat-plan: the offloading policies below their minimum fail with budget_too_small") {
  const std::string file = chain_file("resnet_like.json");
  auto c = io::load_chain(file);
  REQUIRE(c.ok());
  const bytes minimum = pofo{}.minimum_budget(*c);
  const outcome o = run_plan({"--chain", file, "--budget", "100MiB", "--policy", "pofo", "--json"});
  CHECK(o.exit_code == 1);
  CHECK(has(o.err, "give a budget of at least " + std::to_string(minimum) + " bytes"));
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r["status"] == "budget_too_small");
  CHECK(r["minimum_budget_bytes"].get<bytes>() == minimum);
  CHECK(!r.contains("schedule"));
  for (const std::string policy : {"offload_dynprog", "offload_greedy"}) {
    CAPTURE(policy);
    const outcome d = run_plan({"--chain", file, "--budget", "1GiB", "--policy", policy, "--json"});
    CHECK(d.exit_code == 1);
    CHECK(json::parse(d.out, nullptr, false)["status"] == "budget_too_small");
  }
}

TEST_CASE("remat-plan: usage errors of the offloading policies") {
  const std::string c = chain_file("resnet_like.json");
  const std::vector<usage_case> cases = {
      {{"--chain", c, "--budget", "1GiB", "--policy", "pofo", "--bandwidth", "-1"},
       "--bandwidth '-1' is negative"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "pofo", "--bandwidth=-12e9"},
       "--bandwidth '-12e9' is negative"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "pofo", "--bandwidth-h2d", "NaN"},
       "--bandwidth-h2d 'NaN' is not a number"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "offload_dynprog", "--bandwidth-d2h", "nan"},
       "--bandwidth-d2h 'nan' is not a number"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "pofo", "--bandwidth", "0.5"},
       "--bandwidth '0.5' is below 1"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "pofo", "--bandwidth", "fast"},
       "not a bandwidth"},
      {{"--graph",
        (std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs" / "residual_net.json").string(),
        "--budget", "1GiB", "--policy", "pofo"},
       "pofo plans chains"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--bandwidth-d2h", "1e9"},
       "--bandwidth-d2h applies to --simulate and to the policies that plan transfers (pofo, "
       "offload_dynprog, offload_greedy, offload_autocapper and offmate)"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "offload_greedy", "--slots", "10"},
       "--slots applies to"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "offload_greedy", "--time-limit", "1"},
       "not to --policy offload_greedy"},
      {{"--chain", c, "--budget", "1GiB", "--simulate", "F1_all B1", "--bandwidth-h2d", "0.1"},
       "--bandwidth-h2d '0.1' is below 1 byte per second"},
  };
  expect_usage_errors(cases);
  const outcome help = run_plan({"--help"});
  for (const char* word : {"pofo", "offload_dynprog", "offload_greedy", "offload_autocapper",
                           "--no-portfolio", "--bandwidth-d2h", "--bandwidth-h2d"}) {
    CAPTURE(word);
    CHECK(has(help.out, word));
  }
}

TEST_CASE(
    "remat-plan --trace: the plan's timeline as a Chrome trace; --json unchanged; an unwritable "
    "file fails first") {
  const auto tmp = std::filesystem::temp_directory_path();
  const std::string file =
      (tmp / ("remat_plan_trace_" + std::to_string(std::random_device{}()) + ".json")).string();
  const std::string chain = chain_file("resnet_like.json");
  const outcome plain =
      run_plan({"--chain", chain, "--budget", "1GiB", "--policy", "rotor", "--json"});
  const outcome traced = run_plan(
      {"--chain", chain, "--budget", "1GiB", "--policy", "rotor", "--json", "--trace", file});
  REQUIRE(traced.exit_code == 0);
  CHECK(traced.err.empty());
  json a = json::parse(plain.out), b = json::parse(traced.out);
  a.erase("solve_seconds");
  b.erase("solve_seconds");
  CHECK(a == b);
  auto c = io::load_chain(chain);
  REQUIRE(c.ok());
  const auto s = io::schedule_from_json(b, *c);
  REQUIRE(s.ok());
  const json t = json::parse(slurp(file), nullptr, false);
  REQUIRE(t.is_object());
  std::size_t complete = 0, counters = 0;
  for (const auto& e : t["traceEvents"]) {
    complete += e["ph"] == "X";
    counters += e["ph"] == "C" && e["name"] == "budget";
    if (e["ph"] == "X" && e["args"]["op"] == 0) CHECK(e["name"] == b["schedule"][0]);  // F1_ck
    if (e["ph"] == "M" && e["name"] == "process_name") CHECK(e["args"]["name"] == "planned: rotor");
  }
  CHECK(complete == s->ops.size());
  CHECK(counters == 2);

  // --simulate: the replay, up to its violation.
  std::filesystem::remove(file);
  const outcome replay =
      run_plan({"--chain", chain, "--budget", "3GiB", "--simulate", "F1_ck F2_all O1 W1 F3_all B3",
                "--bandwidth", "12e9", "--trace", file});
  CHECK(replay.exit_code == 1);  // B3 without delta_3
  const json r = json::parse(slurp(file), nullptr, false);
  REQUIRE(r.is_object());
  std::vector<std::string> names;
  for (const auto& e : r["traceEvents"])
    if (e["ph"] == "X")
      names.push_back(e["name"].get<std::string>() + "@" + std::to_string(e["tid"].get<int>()));
  CHECK(names == std::vector<std::string>{"F1_ck@1", "F2_all@1", "O1@2", "W1@1", "F3_all@1"});
  std::filesystem::remove(file);

  // A folder that does not exist: exit 1 before planning, the reason on stderr and in --json.
  const std::string missing = (tmp / "remat_plan_no_such_folder" / "t.json").string();
  const outcome bad = run_plan(
      {"--chain", chain, "--budget", "1GiB", "--policy", "rotor", "--json", "--trace", missing});
  CHECK(bad.exit_code == 1);
  CHECK(has(bad.err, "does not exist"));
  CHECK(json::parse(bad.out)["status"] == "invalid_problem");
  CHECK(!std::filesystem::exists(missing));
}

TEST_CASE(
    "remat-plan --quiet: no progress, even with a MILP; --progress with --quiet is a usage error") {
  const std::string chain = chain_file("gpt_like.json");
  const outcome quiet =
      run_plan({"--chain", chain, "--budget", "8GiB", "--policy", "rotor", "--quiet"});
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
  const outcome both = run_plan(
      {"--chain", chain, "--budget", "8GiB", "--policy", "rotor", "--quiet", "--progress"});
  CHECK(both.exit_code == 2);
  CHECK(has(both.err, "not both"));
  for (const auto& solver : plan_solvers()) {
    // Not a terminal (stdout and stderr are files here), no --progress: nothing on stderr.
    const outcome milp = run_plan({"--graph", graph_file("residual_net.json"), "--budget", "300MiB",
                                   "--policy", "rockmate", "--solver", solver, "--grid", "3,3"});
    CHECK(milp.exit_code == 0);
    CHECK(milp.err.empty());
    const outcome logged =
        run_plan({"--graph", graph_file("residual_net.json"), "--budget", "300MiB", "--policy",
                  "rockmate", "--solver", solver, "--grid", "3,3", "--progress"});
    CHECK(has(logged.err, "remat-plan: rockmate "));
    CHECK(has(logged.err, " kinds, solves "));
  }
}

// --- --sweep and --svg ---------------------------------------------------------------------

namespace {
/// A scratch file name for a picture (removed by the caller).
std::string scratch_svg(const std::string& tag) {
  static const std::string process = std::to_string(std::random_device{}());
  return (std::filesystem::temp_directory_path() /
          ("remat_plan_test_" + process + "_" + tag + ".svg"))
      .string();
}
}  // namespace

TEST_CASE("remat-plan --sweep: --json gives remat::sweep's points, --svg their curve") {
  const std::string file = chain_file("gpt_like.json");
  const auto c = io::load_chain(file);
  REQUIRE(c.ok());
  const auto sw = sweep(*c, {.budgets = 3});
  REQUIRE(sw.ok());
  const std::string svg = scratch_svg("curve");
  const outcome o =
      run_plan({"--chain", file, "--sweep", "--budgets", "3", "--json", "--svg", svg});
  CAPTURE(o.err);
  REQUIRE(o.exit_code == 0);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r["status"] == "ok");
  CHECK(r["chain"] == c->name);
  CHECK(r["store_all_peak_bytes"].get<bytes>() == sw->store_all_peak);
  CHECK(r["store_all_time"].get<double>() == sw->store_all_time);
  CHECK(r["budgets"].get<std::vector<bytes>>() == sw->budgets);
  CHECK(r["policies"].get<std::vector<std::string>>() == sw->policies);
  CHECK(r["svg"] == svg);
  REQUIRE(r["points"].size() == sw->points.size());
  std::size_t planned = 0;
  for (std::size_t i = 0; i < sw->points.size(); ++i) {
    const auto& p = sw->points[i];
    const json& x = r["points"][i];
    CAPTURE(p.policy);
    CAPTURE(p.budget);
    CHECK(x["policy"] == p.policy);
    CHECK(x["budget_bytes"].get<bytes>() == p.budget);
    CHECK(x["status"] == std::string(to_string(p.code)));
    if (p.ok()) {
      ++planned;
      CHECK(x["peak_bytes"].get<bytes>() == p.peak);
      CHECK(x["makespan"].get<double>() == p.makespan);
      CHECK(x["overhead"].get<double>() == p.overhead);
    } else {
      CHECK(x["peak_bytes"].is_null());
      CHECK(x["message"] == p.message);
    }
  }
  CHECK(planned > 0);
  CHECK(planned < sw->points.size());  // the lowest budget is below every minimum
  const auto doc = remat::testing::parse_xml(slurp(svg));
  std::filesystem::remove(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  CHECK(doc.root->all("g", "point").size() == planned);
}

TEST_CASE("remat-plan --sweep: the table") {
  const outcome o = run_plan(
      {"--chain", chain_file("gpt_like.json"), "--sweep", "--budgets", "3", "--bandwidth", "0"});
  CAPTURE(o.err);
  CHECK(o.exit_code == 0);
  CHECK(has(o.out, "swept     5 policies at 3 budgets"));
  CHECK(has(o.out, "note      the offloading policies left out"));
  CHECK(has(o.out, "note      mixed_mode left out: no stage has control flow"));
  CHECK(has(o.out, "store_all periodic revolve   rotor rotor_floating\n"));
  CHECK(has(o.out, " 100%     +0.0%"));
  CHECK(!has(o.out, "pofo"));
}

TEST_CASE("remat-plan --svg: the memory timeline of a plan, of an offloading plan, of a program") {
  const std::string file = chain_file("resnet_like.json");
  const std::string svg = scratch_svg("timeline");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--policy", "rotor", "--budget", "1.5GiB"},
        std::vector<std::string>{"--policy", "pofo", "--budget", "1GiB"},
        std::vector<std::string>{"--policy", "store_all", "--budget", "3GiB", "--json"}}) {
    std::vector<std::string> all = {"--chain", file, "--svg", svg};
    all.insert(all.end(), args.begin(), args.end());
    const outcome o = run_plan(all);
    CAPTURE(args[1]);
    CAPTURE(o.err);
    CHECK(o.exit_code == 0);
    if (args.back() != "--json")
      CHECK(has(o.out, "svg       " + svg + ": device memory over time"));
    const auto doc = remat::testing::parse_xml(slurp(svg));
    REQUIRE_MESSAGE(doc.error.empty(), doc.error);
    CHECK(doc.root->all("polyline", "memory").size() == 1);
    CHECK(doc.root->children[0]->text.find(args[1]) != std::string::npos);
    std::filesystem::remove(svg);
  }
  // An invalid program is drawn too (where it goes over the budget), and fails as before.
  const outcome o = run_plan({"--chain", chain_file("gpt_like.json"), "--budget", "1GiB",
                              "--simulate", "F1_ck F2_all", "--svg", svg});
  CHECK(o.exit_code == 1);
  const auto doc = remat::testing::parse_xml(slurp(svg));
  std::filesystem::remove(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  CHECK(doc.root->children[0]->text.find("(invalid)") != std::string::npos);
}

TEST_CASE("remat-plan --sweep and --svg: usage errors exit 2") {
  const std::string c = chain_file("gpt_like.json");
  const std::vector<usage_case> cases = {
      {{"--graph",
        (std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs" / "residual_net.json").string(),
        "--sweep"},
       "--sweep plans chains"},
      {{"--chain", c, "--sweep", "--policy", "rotor"}, "give --sweep or --policy, not both"},
      {{"--chain", c, "--sweep", "--budget", "1GiB"}, "drop --budget"},
      {{"--chain", c, "--sweep", "--slots", "10"},
       "--slots applies to one --policy, not to --sweep"},
      {{"--chain", c, "--sweep", "--budgets", "1"},
       "--budgets '1' is not an integer from 2 to 200"},
      {{"--chain", c, "--budget", "1GiB", "--policy", "rotor", "--budgets", "4"},
       "--budgets applies to --sweep only"},
      {{"--chain", c, "--sweep", "--svg", "/no/such/folder/x.svg"},
       "the folder '/no/such/folder' does not exist"},
      {{"--chain", c, "--sweep", "--svg", std::filesystem::temp_directory_path().string()},
       "it is a folder"},
      {{"--chain", c, "--sweep", "--svg"}, "--svg needs a value"},
      {{"--chain", c, "--sweep", "--trace", "x.json"}, "give --svg FILE for its curve"},
  };
  expect_usage_errors(cases);
}

TEST_CASE("remat-plan --policy auto: the fastest plan of every chain policy, and what each gave") {
  const auto c = io::load_chain(chain_file("resnet_like.json"));
  REQUIRE(c.ok());
  const outcome o = run_plan({"--chain", chain_file("resnet_like.json"), "--budget", "1GiB",
                              "--policy", "auto", "--json"});
  CAPTURE(o.err);
  REQUIRE(o.exit_code == 0);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r["status"] == "ok");
  const json& p = r["portfolio"];
  REQUIRE(p.is_object());
  REQUIRE(p["entries"].size() == 9);  // every chain policy of the catalogue
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto& e : p["entries"])
    if (e["status"] == "ok") fastest = std::min(fastest, e["makespan"].get<double>());
  CHECK(r["makespan"].get<double>() == doctest::Approx(fastest).epsilon(1e-9));
  // Never slower than rotor on its own.
  const outcome rotor_only = run_plan({"--chain", chain_file("resnet_like.json"), "--budget",
                                       "1GiB", "--policy", "rotor", "--json"});
  const json ro = json::parse(rotor_only.out, nullptr, false);
  CHECK(r["makespan"].get<double>() <= ro["makespan"].get<double>() * (1 + 1e-9));
  auto s = io::schedule_from_json(r, *c);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const auto rep =
      sim::simulate(*c, *s, {.budget = bytes{1} << 30, .hw = machine::with_bandwidth(12e9)});
  CHECK(rep.valid);
  // The summary lists the members.
  const outcome text =
      run_plan({"--chain", chain_file("resnet_like.json"), "--budget", "1GiB", "--policy", "auto"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("portfolio ") != std::string::npos);
  CHECK(text.out.find("rotor_floating: ") != std::string::npos);
  // auto takes the portfolio's knobs only.
  const outcome knob = run_plan({"--chain", chain_file("resnet_like.json"), "--budget", "1GiB",
                                 "--policy", "auto", "--slots", "10"});
  CHECK(knob.exit_code == 2);
  CHECK(knob.err.find("--slots applies to") != std::string::npos);
}

TEST_CASE("remat-plan --find-minimum without --budget: the policy's smallest budget, planned") {
  const auto c = io::load_chain(chain_file("resnet_like.json"));
  REQUIRE(c.ok());
  for (const std::string policy : {"rotor", "revolve", "pofo", "offload_greedy"}) {
    CAPTURE(policy);
    const outcome o = run_plan({"--chain", chain_file("resnet_like.json"), "--policy", policy,
                                "--find-minimum", "--json"});
    CAPTURE(o.err);
    REQUIRE(o.exit_code == 0);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    const bytes minimum = r["minimum_budget_bytes"].get<bytes>();
    CHECK(r["peak_bytes"].get<bytes>() <= minimum);
    // One byte less does not plan; the minimum does.
    const outcome below = run_plan({"--chain", chain_file("resnet_like.json"), "--policy", policy,
                                    "--budget", std::to_string(minimum - 1), "--json"});
    CHECK(below.exit_code == 1);
    CHECK(json::parse(below.out, nullptr, false)["minimum_budget_bytes"].get<bytes>() == minimum);
    const outcome at = run_plan({"--chain", chain_file("resnet_like.json"), "--policy", policy,
                                 "--budget", std::to_string(minimum), "--json"});
    CHECK(at.exit_code == 0);
  }
  CHECK(run_plan({"--chain", chain_file("resnet_like.json"), "--policy", "rotor", "--find-minimum",
                  "--json"})
            .out.find(std::to_string(rotor{}.minimum_budget(*c))) != std::string::npos);
  // The text says what it is.
  const outcome text =
      run_plan({"--chain", chain_file("resnet_like.json"), "--policy", "rotor", "--find-minimum"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("the smallest budget rotor plans with") != std::string::npos);
  // Nothing to draw without a plan.
  CHECK(run_plan({"--chain", chain_file("resnet_like.json"), "--policy", "rotor", "--find-minimum",
                  "--svg", "x.svg"})
            .exit_code == 2);
}

TEST_CASE("remat-plan --policy dtr --heuristic: each heuristic's program, and bad names") {
  auto g = io::load_graph(graph_file("residual_net.json"));
  REQUIRE(g.ok());
  const bytes budget = bytes{300} << 20;
  auto plan = [&](const std::vector<std::string>& more) {
    std::vector<std::string> args{
        "--graph", graph_file("residual_net.json"), "--budget", "300MiB", "--policy", "dtr",
        "--json"};
    args.insert(args.end(), more.begin(), more.end());
    const outcome o = run_plan(args);
    CAPTURE(o.err);
    REQUIRE(o.exit_code == 0);
    const json r = json::parse(o.out, nullptr, false);
    REQUIRE(r.is_object());
    check_graph_plan(r, *g, budget);
    return *io::schedule_from_json(r);
  };
  std::vector<schedule> programs;
  for (std::string_view name : dtr_heuristic::names()) {
    CAPTURE(name);
    dtr<> p;
    p.heuristic = *dtr_heuristic::named(name);
    const auto own = p.solve(*g, budget);
    REQUIRE_MESSAGE(own, own.message());
    programs.push_back(plan({"--heuristic", std::string(name)}));
    CHECK(programs.back().ops == own->ops);  // the library's program for that heuristic
    // Its minimum is that heuristic's.
    const outcome m = run_plan({"--graph", graph_file("residual_net.json"), "--policy", "dtr",
                                "--heuristic", std::string(name), "--find-minimum", "--json"});
    REQUIRE(m.exit_code == 0);
    CHECK(json::parse(m.out)["minimum_budget_bytes"].get<bytes>() == p.minimum_budget(*g));
  }
  CHECK(plan({}).ops == programs.front().ops);  // h_dtr by default
  CHECK(programs[0].ops != programs[1].ops);    // the name reaches the evictions
  CHECK(programs[1].ops != programs[2].ops);
  // On a chain, through its graph.
  const auto cg = build_graph(*io::load_chain(chain_file("resnet_like.json")));
  REQUIRE(cg.ok());
  dtr<> lru;
  lru.heuristic = h_lru{};
  const bytes least = lru.minimum_budget(*cg);
  const outcome c = run_plan({"--chain", chain_file("resnet_like.json"), "--budget",
                              std::to_string(least + (peak_of_store_all(*cg) - least) / 2),
                              "--policy", "dtr", "--heuristic", "lru"});
  CHECK(c.exit_code == 0);
  CHECK(has(c.out, "(lru)"));

  expect_usage_errors({
      {{"--graph", graph_file("residual_net.json"), "--budget", "300MiB", "--policy", "dtr",
        "--heuristic", "h_lru"},
       "--heuristic 'h_lru' is not a heuristic of --policy dtr; it takes h_dtr, size or lru"},
      {{"--chain", chain_file("resnet_like.json"), "--budget", "1GiB", "--policy", "rotor",
        "--heuristic", "lru"},
       "--heuristic applies to dtr only, not to --policy rotor"},
      {{"--graph", graph_file("residual_net.json"), "--budget", "300MiB", "--policy", "rockmate",
        "--heuristic", "size"},
       "--heuristic applies to dtr only, not to --policy rockmate"},
      {{"--chain", chain_file("resnet_like.json"), "--sweep", "--heuristic", "lru"},
       "--heuristic applies to one --policy, not to --sweep"},
      {{"--graph", graph_file("residual_net.json"), "--budget", "300MiB", "--policy", "dtr",
        "--heuristic="},
       "--heuristic needs a name"},
  });
  const outcome help = run_plan({"--help"});
  CHECK(has(help.out, "--heuristic NAME"));
  CHECK(has(help.out, "h_dtr | size | lru (default h_dtr)"));
}
#endif

TEST_CASE("remat-plan --policy mixed_mode: control-flow stages run dynamically, its knobs") {
  // resnet_like with two control-flow stages.
  json c = json::parse(slurp(chain_file("resnet_like.json")));
  c["stages"][4]["control_flow"] = true;
  c["stages"][11]["control_flow"] = true;
  const auto path = remat::testing::scratch("remat_plan_test_", "control_flow.json");
  std::ofstream(path) << c.dump();
  const auto loaded = io::load_chain(path.string());
  REQUIRE(loaded.ok());
  CHECK(loaded->at(5).control_flow);
  const outcome o =
      run_plan({"--chain", path.string(), "--budget", "1.5GiB", "--policy", "mixed_mode",
                "--dynamic-overhead", "2e-4", "--search", "dc", "--json"});
  CAPTURE(o.err);
  REQUIRE(o.exit_code == 0);
  const json r = json::parse(o.out, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r["status"] == "ok");
  CHECK(r["peak_bytes"].get<bytes>() <= bytes{3} << 29);
  const json& m = r["mixed_mode"];
  CHECK(m["search"] == "dc");
  int next = 1;
  for (const auto& sg : m["segments"]) {
    CHECK(sg["first"].get<int>() == next);
    next = sg["last"].get<int>() + 1;
    if (sg["mode"] == "planned")
      for (int l = sg["first"].get<int>(); l <= sg["last"].get<int>(); ++l)
        CHECK_FALSE(loaded->at(l).control_flow);
  }
  CHECK(next == loaded->length() + 1);
  auto s = io::schedule_from_json(r, *loaded);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const auto rep = sim::simulate(*loaded, *s, {.budget = bytes{3} << 29});
  CHECK(rep.valid);
  CHECK(rep.makespan == doctest::Approx(r["makespan"].get<double>()));
  // The summary lists the segments.
  const outcome text =
      run_plan({"--chain", path.string(), "--budget", "1.5GiB", "--policy", "mixed_mode"});
  CHECK(text.exit_code == 0);
  CHECK(has(text.out, "segments  "));
  CHECK(has(text.out, " dynamic, share "));
  // control_flow on the loss, and the knobs' errors.
  c["stages"].back()["control_flow"] = true;
  const auto bad = remat::testing::scratch("remat_plan_test_", "control_flow_loss.json");
  std::ofstream(bad) << c.dump();
  const outcome loss =
      run_plan({"--chain", bad.string(), "--budget", "1.5GiB", "--policy", "mixed_mode"});
  CHECK(loss.exit_code == 1);
  CHECK(has(loss.err + loss.out, "control_flow is set on the loss"));
  expect_usage_errors(
      {{{"--chain", path.string(), "--policy", "mixed_mode", "--budget", "1GiB", "--search",
         "binary"},
        "unknown search 'binary'"},
       {{"--chain", path.string(), "--policy", "mixed_mode", "--budget", "1GiB",
         "--dynamic-overhead", "-1"},
        "--dynamic-overhead"},
       {{"--chain", path.string(), "--policy", "rotor", "--budget", "1GiB", "--search", "dc"},
        "--search applies to mixed_mode only"}});
}
