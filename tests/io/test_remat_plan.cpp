// Runs the remat-plan binary on the example chains (REMAT_PLAN_EXE, REMAT_EXAMPLES_DIR come from
// tests/CMakeLists.txt when the examples are built).
#if defined(REMAT_PLAN_EXE) && defined(REMAT_EXAMPLES_DIR)

#include <doctest/doctest.h>

#include <atomic>
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
  for (const auto& [text, expect] :
       std::vector<std::pair<std::string, bytes>>{{"3221225472", bytes{3} << 30},
                                                  {"3GiB", bytes{3} << 30},
                                                  {"3072MiB", bytes{3} << 30},
                                                  {"3145728KiB", bytes{3} << 30},
                                                  {"3g", bytes{3} << 30},
                                                  {"2.5GiB", bytes{5} << 29}}) {
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
