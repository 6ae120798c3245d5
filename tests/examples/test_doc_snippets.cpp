// The C++ in the docs is compiled, so that it cannot drift from the code. Every ```cpp block of
// README.md and docs/guide/*.md is one of:
//   - README.md's "## Example": examples/readme_example.cpp, whole (example.readme runs it);
//   - docs/guide/train.md's program: examples/train_example.cpp without its checks (example.train
//     runs it; test_readme_train.cpp checks it line by line too);
//   - a fragment that a test compiles: the text between "// --- doc PAGE begin ---" and
//     "// --- doc end ---" in a source file under tests/ (this file, test_doc_libtorch.cpp),
//     compared after removing the common indentation. A fragment names its page, and must be in
//     it (a fragment of another page, e.g. docs/json-format.md, is compiled and checked the same
//     way).
// The fragments below run where that is quick; they read what the setup before their begin
// marker declares.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/models.hpp>

#include <remat/exec.hpp>
#include <remat/policy/checkmate.hpp>
#include <remat/policy/dtr.hpp>
#include <remat/policy/madpipe.hpp>
#include <remat/policy/offmate.hpp>
#include <remat/policy/pipedream.hpp>
#include <remat/policy/rockmate.hpp>
#include <remat/problem/sequential.hpp>
#include <remat/remat.hpp>
#include <remat/zoo/resnet.hpp>
#if __has_include(<nlohmann/json.hpp>)
#include <remat/io/json.hpp>
#define REMAT_DOC_JSON 1
#endif

#include "exec/toy_layers.hpp"

// --- doc docs/guide/cmake.md begin ---
#if defined(REMAT_HAS_CBC)  // the program links remat::cbc
#include <remat/milp/cbc.hpp>
using solver = remat::milp::cbc;
#elif defined(REMAT_HAS_LPSOLVE)
#include <remat/milp/lpsolve.hpp>
using solver = remat::milp::lpsolve;
#endif
// --- doc end ---

#ifndef REMAT_SOURCE_DIR
#define REMAT_SOURCE_DIR "."
#endif

using namespace remat::literals;

namespace {

// --- the checker ------------------------------------------------------------------------------

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path.string(), " (REMAT_SOURCE_DIR is ",
                  REMAT_SOURCE_DIR, ")");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
std::string read_source(const std::string& relative) {
  return read(fs::path(REMAT_SOURCE_DIR) / relative);
}
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}
std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}
/// The lines without the indentation they all share (blank lines aside), trailing blanks gone.
std::vector<std::string> dedented(std::vector<std::string> lines) {
  std::size_t common = std::string::npos;
  for (const auto& l : lines)
    if (l.find_first_not_of(' ') != std::string::npos)
      common = std::min(common, l.find_first_not_of(' '));
  for (auto& l : lines) {
    l = l.size() >= common ? l.substr(common) : std::string();
    l.erase(l.find_last_not_of(' ') + 1);
  }
  return lines;
}

/// A ```cpp block of a page: the heading of its section and its text.
struct block {
  std::string section;
  std::string text;
};
std::vector<block> cpp_blocks(const std::string& page) {
  std::vector<block> out;
  std::string section;
  bool in = false;
  std::vector<std::string> body;
  for (const auto& l : lines_of(page)) {
    if (!in && l.rfind("#", 0) == 0) section = l;
    if (!in && l == "```cpp") {
      in = true;
      body.clear();
    } else if (in && l == "```") {
      in = false;
      out.push_back({section, joined(body)});
    } else if (in) {
      body.push_back(l);
    }
  }
  REQUIRE_MESSAGE(!in, "a ```cpp block is not closed");
  return out;
}

/// A fragment a test compiles: its page, where it is, and its text.
struct fragment {
  std::string page;
  std::string where;
  std::string text;
};
std::vector<fragment> fragments() {
  std::vector<fragment> out;
  const fs::path tests = fs::path(REMAT_SOURCE_DIR) / "tests";
  const std::string begin = "// --- doc ", begin_end = " begin ---", end = "// --- doc end ---";
  for (const auto& e : fs::recursive_directory_iterator(tests)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    const auto lines = lines_of(read(e.path()));
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string l =
          lines[i].substr(std::min(lines[i].find_first_not_of(' '), lines[i].size()));
      if (l.rfind(begin, 0) != 0 || l == end || l.size() < begin.size() + begin_end.size() ||
          l.compare(l.size() - begin_end.size(), begin_end.size(), begin_end) != 0)
        continue;
      fragment f{l.substr(begin.size(), l.size() - begin.size() - begin_end.size()),
                 e.path().lexically_relative(tests).generic_string() + ":" + std::to_string(i + 1),
                 {}};
      std::vector<std::string> body;
      std::size_t j = i + 1;
      for (; j < lines.size() && lines[j].find(end) == std::string::npos; ++j)
        body.push_back(lines[j]);
      INFO(f.where);
      REQUIRE_MESSAGE(j < lines.size(), "a doc fragment without its end marker");
      f.text = joined(dedented(body));
      out.push_back(std::move(f));
      i = j;
    }
  }
  return out;
}

/// The pages whose every C++ block must be compiled: README.md, docs/*.md and docs/guide/*.md.
std::vector<std::string> checked_pages() {
  std::vector<std::string> out{"README.md"};
  for (const char* dir : {"docs", "docs/guide"})
    for (const auto& e : fs::directory_iterator(fs::path(REMAT_SOURCE_DIR) / dir))
      if (e.path().extension() == ".md")
        out.push_back(std::string(dir) + "/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// Whether every line of `shown` is a line of `file`, in the same order.
bool lines_in_order(const std::string& shown, const std::string& file) {
  const auto s = lines_of(shown), f = lines_of(file);
  std::size_t at = 0;
  for (const auto& l : s) {
    while (at < f.size() && f[at] != l) ++at;
    if (at == f.size()) return false;
    ++at;
  }
  return true;
}

/// What f prints on std::cout.
template <class F>
std::string printed(F f) {
  std::ostringstream out;
  struct restore {
    std::streambuf* old;
    ~restore() { std::cout.rdbuf(old); }
  } r{std::cout.rdbuf(out.rdbuf())};
  f();
  return out.str();
}

// --- setup the fragments read ---------------------------------------------------------------

/// The chain of docs/json-format.md: two layers and the loss, sizes in bytes.
remat::chain small_chain() {
  return {"mlp",
          4096,
          {{"fc1", 1e-3, 2e-3, 8192, 16384, 0, 4096},
           {"fc2", 1e-3, 2e-3, 8192, 8192, 0, 0},
           {"loss", 1e-4, 1e-4, 4, 4, 0, 0}}};
}

/// A chain on which offloading pays: large activations, long compute.
remat::chain large_chain() {
  remat::chain c{"large", 64_MiB, {}};
  for (int l = 1; l <= 8; ++l)
    c.stages.push_back({"layer" + std::to_string(l), 4e-3, 8e-3, 256_MiB, 512_MiB, 0, 0});
  c.stages.push_back({"loss", 1e-4, 1e-4, 4, 4, 0, 0});
  return c;
}

// --- docs/guide/model.md ----------------------------------------------------------------------

remat::chain model_chain() {
  // clang-format off
  // --- doc docs/guide/model.md begin ---
  remat::chain c{.name = "mlp", .input_bytes = 4096, .stages = {
      {.name = "fc1", .forward_time = 1e-3, .backward_time = 2e-3, .output_bytes = 8192,
       .saved_bytes = 16384, .backward_overhead_bytes = 4096},
      {.name = "fc2", .forward_time = 1e-3, .backward_time = 2e-3, .output_bytes = 8192,
       .saved_bytes = 8192},
      {.name = "loss", .forward_time = 1e-4, .backward_time = 1e-4, .output_bytes = 4,
       .saved_bytes = 4}}};
  if (auto ok = remat::validate(c); !ok) std::cerr << ok.message() << '\n';
  // --- doc end ---
  // clang-format on
  return c;
}

void model_programs(const remat::chain& c) {
  // --- doc docs/guide/model.md begin ---
  auto plan = remat::rotor{.slots = 0}.solve(c, 36_KiB);  // the least memory rotor plans with
  std::cout << *remat::to_chain_string(c.length(), *plan) << '\n';
  auto mine = remat::parse_chain_program(c.length(), "F1_ck F2_all F3_all B3 B2 F1_all B1");
  const auto rep = remat::sim::simulate(c, *mine, {.budget = 36_KiB});
  std::cout << (rep.valid ? "valid" : rep.first_violation->message) << ", " << rep.makespan
            << " s, " << rep.peak << " bytes\n";
  // --- doc end ---
}

// --- docs/guide/offload.md --------------------------------------------------------------------

remat::offload_plan offload_plan(const remat::chain& chain, remat::bytes budget) {
  // --- doc docs/guide/offload.md begin ---
  remat::pofo p{.hw = remat::machine::with_bandwidth(24e9)};  // 24 GB/s each way
  auto plan = p.solve_detailed(chain, budget);                // result<solution<offload_details>>
  if (plan) {
    const remat::offload_details& d = plan->details;
    std::cout << plan->program.predicted_time << " s, " << d.offloaded.size()
              << " activations offloaded (" << d.offloaded_bytes << " bytes), " << 100 * d.overlap()
              << "% of the copy time hidden behind compute\n";
  }
  // --- doc end ---
  REQUIRE_MESSAGE(plan.ok(), plan.message());
  CHECK(plan->details.hw == p.hw);
  return std::move(*plan);
}

void offload_machines() {
  // --- doc docs/guide/offload.md begin ---
  remat::machine pcie3 = remat::machine::with_bandwidth(12e9);  // remat's default: 12e9 each way
  remat::machine lopsided{.device_to_host = 10e9, .host_to_device = 20e9};
  remat::machine instant = remat::machine::with_bandwidth(std::numeric_limits<double>::infinity());
  remat::machine none = remat::machine::without_transfers();  // bandwidth 0: no link at all
  // --- doc end ---
  CHECK(pcie3 == remat::machine{12e9, 12e9, remat::unlimited_bytes});
  CHECK(lopsided.transfers());
  CHECK(instant.transfers());
  CHECK_FALSE(none.transfers());
}

remat::sim::report offload_replay(const remat::chain& c) {
  // --- doc docs/guide/offload.md begin ---
  auto ops = remat::parse_chain_ops("F1_ck O0 F2_all F3_all B3 B2 W0 P0 W0 F1_all B1");
  auto r =
      remat::sim::simulate(c, *ops, {.budget = 64_KiB, .hw = remat::machine::with_bandwidth(1e6)});
  // r.valid, r.makespan (seconds), r.peak and r.host_peak (bytes), r.first_violation
  // --- doc end ---
  return r;
}

template <class Model, class MakeInput>
// Returns the measured peak: the run's tensors hold buffers of the backend, which ends here.
remat::bytes offload_run(Model& model, const remat::chain& chain,
                         const remat::result<remat::offload_plan>& plan, remat::bytes budget,
                         MakeInput make_input) {
  // --- doc docs/guide/offload.md begin ---
  remat::exec::host_backend backend(budget);  // offloaded tensors go to its unbudgeted host store
  remat::exec::executor ex(model, chain, backend);
  auto run = ex.run(plan->program, make_input(backend));  // offloads, prefetches, waits as planned
  // --- doc end ---
  REQUIRE_MESSAGE(run.ok(), run.message());
  CHECK(run->measured_peak <= budget);
  CHECK(backend.host_in_use() == 0);
  return run->measured_peak;
}

std::string offload_portfolio(const remat::chain& chain, remat::bytes budget) {
  // --- doc docs/guide/offload.md begin ---
  remat::best_of<remat::rotor, remat::pofo> both{.hw = remat::machine::with_bandwidth(12e9)};
  auto best = both.solve_detailed(chain, budget);  // best->details.chosen: "rotor" or "pofo"
  // --- doc end ---
  REQUIRE_MESSAGE(best.ok(), best.message());
  return best->details.chosen;
}

// --- docs/guide/train.md ----------------------------------------------------------------------

template <class Model, class T, class B>
remat::result<remat::chain> train_profile(Model& model, const T& sample, B& backend) {
  // --- doc docs/guide/train.md begin ---
  remat::exec::profile_options opt{.repetitions = 9,
                                   .statistic = remat::exec::time_statistic::min,
                                   .resolution = 1e-5};  // times in steps of 10 us
  auto chain = remat::exec::profile_chain(model, sample, backend, opt);
  // --- doc end ---
  return chain;
}

template <class Model, class T, class B>
remat::result<remat::chain> train_fixed_times(Model& model, const T& sample, B& backend) {
  // --- doc docs/guide/train.md begin ---
  remat::exec::profile_options fixed{.fixed_times = {{1e-3, 2e-3}, {1e-3, 2e-3}, {1e-4, 1e-4}}};
  auto chain = remat::exec::profile_chain(model, sample, backend, fixed);  // sizes measured only
  // --- doc end ---
  return chain;
}

// --- docs/guide/graphs.md ---------------------------------------------------------------------

remat::result<remat::graph> graph_by_hand() {
  // clang-format off
  // --- doc docs/guide/graphs.md begin ---
  remat::forward_dag f{.name = "residual", .input_bytes = 1_MiB, .ops = {
      {.name = "conv1", .inputs = {"input"}, .forward_time = 1e-3, .backward_time = 2e-3,
       .output_bytes = 1_MiB, .phantom_bytes = 2_MiB, .backward_reads = {"input"}},
      {.name = "conv2", .inputs = {"conv1"}, .forward_time = 1e-3, .backward_time = 2e-3,
       .output_bytes = 1_MiB, .phantom_bytes = 2_MiB, .backward_reads = {"conv1"}},
      {.name = "add", .inputs = {"conv2", "conv1"}, .forward_time = 1e-4, .backward_time = 1e-4,
       .output_bytes = 1_MiB, .backward_reads = {}},
      {.name = "loss", .inputs = {"add"}, .forward_time = 1e-4, .backward_time = 1e-4,
       .output_bytes = 4, .backward_reads = {"add"}}}};
  auto g = remat::build_graph(f);  // the training graph, or why f is not a valid forward DAG
  // --- doc end ---
  // clang-format on
  return g;
}

// A DAG model of the user's layers, built by hand, planned and trained one step; returns the
// step's error, or whether every linear layer was updated.
remat::result<bool> dag_model_by_hand() {
  // --- doc docs/guide/graphs.md begin ---
  using fc = std::unique_ptr<eg::linear>;                                 // a graph layer
  using act = remat::exec::as_graph_layer<std::unique_ptr<eg::gelu>>;     // chain layers,
  using head = remat::exec::as_graph_layer<std::unique_ptr<eg::linear>>;  // through the adapter
  remat::exec::dag_model<
      std::tuple<fc, act, fc, std::unique_ptr<eg::add>, head, std::unique_ptr<eg::mse_loss>>>
      m{{std::make_unique<eg::linear>(16, 32, /*seed*/ 1, "fc1"),
         act{std::make_unique<eg::gelu>("act")},
         std::make_unique<eg::linear>(32, 16, /*seed*/ 2, "fc2"),
         std::make_unique<eg::add>("res"),  // two inputs
         head{std::make_unique<eg::linear>(16, 16, /*seed*/ 3, "head")},
         std::make_unique<eg::mse_loss>(8, 16, /*seed*/ 4, "loss")},
        {{"fc1", {"input"}},
         {"act", {"fc1"}},
         {"fc2", {"act"}},
         {"res", {"input", "fc2"}},  // reads the graph's input too: a skip connection
         {"head", {"res"}},
         {"loss", {"head"}}}};
  remat::exec::host_backend b;
  auto f = remat::exec::profile_dag(m, eg::make_input(b, 8, 16, 2), b);
  auto g = remat::build_graph(*f);
  // Any graph policy's plan (checkmate's, rockmate's: above); plain training's here.
  const remat::schedule plan = *remat::store_all{}.solve(*g, remat::unlimited_bytes);
  remat::exec::executor ex(m, *g, b);
  auto sgd = [&](auto& layer) {  // layer: the eg::linear, eg::gelu, ... itself
    if constexpr (requires { layer.sgd_step(0.01f); }) {
      layer.sgd_step(0.01f);
      return true;
    }
    return false;
  };
  auto r = remat::exec::train_step(ex, plan, eg::make_input(b, 8, 16, 3), sgd);
  // --- doc end ---
  if (!r) return r.err();
  bool trained = true;
  remat::exec::for_each_layer(m, [&](auto& layer) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(layer)>, eg::linear>)
      for (const auto& p : layer.parameters()) trained = trained && p.grad.mat().norm() > 0;
  });
  return trained;
}

#if defined(REMAT_HAS_CBC)
void graph_checkmate(const remat::result<remat::graph>& g) {
  // --- doc docs/guide/graphs.md begin ---
  remat::checkmate<remat::milp::cbc> cm{.time_limit = 60};
  const remat::bytes budget = remat::fraction_of_store_all(*g, 0.8);
  auto s = cm.solve_detailed(*g, budget);  // result<solution<>>
  if (s)
    std::cout << s->program.predicted_time << " s, " << (s->optimal ? "optimal" : "not proven")
              << '\n'
              << remat::to_string(*g, s->program);  // the program with the graph's names
  else
    std::cout << s.message() << '\n';  // budget_too_small: the minimum, or where it lies
  // --- doc end ---
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(s->optimal);
}

int graph_rockmate(const remat::result<remat::graph>& g, remat::bytes budget) {
  // --- doc docs/guide/graphs.md begin ---
  remat::rockmate<remat::checkmate<remat::milp::cbc>> rm{.peak_budgets = 6, .save_budgets = 4};
  auto r = rm.solve_detailed(*g, budget);
  if (r)
    for (const remat::rockmate_block& b : r->details.blocks)
      std::cout << "kind " << b.kind << ": option " << b.chosen << " of " << b.options
                << ", forward runs " << b.forward_runs << '\n';
  // --- doc end ---
  REQUIRE_MESSAGE(r.ok(), r.message());
  return static_cast<int>(r->details.blocks.size());
}

// Returns the run's loss: the run's tensors hold buffers of the backend, which ends here.
remat::result<std::optional<double>> graph_executor() {
  // --- doc docs/guide/graphs.md begin ---
  eg::dag d = eg::make_attention_dag(/*width*/ 16, /*hidden*/ 32, /*batch*/ 8, /*seed*/ 1);
  remat::exec::host_backend b;
  auto f = remat::exec::profile_dag(d, eg::make_input(b, 8, 16, 2), b);  // measured
  auto g = remat::build_graph(*f);                                       // its training graph
  auto s = remat::checkmate<remat::milp::cbc>{.time_limit = 30}.solve(
      *g, remat::fraction_of_store_all(*g, 0.8));
  remat::exec::executor ex(d, *g, b);
  auto r = ex.run(*s, eg::make_input(b, 8, 16, 3));  // input gradient, measured peak, times
  // --- doc end ---
  if (!r) return r.err();
  return r->loss;
}

// offmate's program trained by managed_training, at the least budget offmate plans.
remat::result<bool> graph_offmate() {
  eg::dag d = eg::make_attention_dag(/*width*/ 16, /*hidden*/ 32, /*batch*/ 8, /*seed*/ 1);
  remat::exec::host_backend b;
  auto f = remat::exec::profile_dag(d, eg::make_input(b, 8, 16, 2), b);
  auto g = remat::build_graph(*f);
  remat::exec::executor ex(d, *g, b);
  remat::offmate<remat::milp::cbc> least;
  const remat::bytes budget =
      least.minimum_budget(remat::offmate_problem_of(*g, least.blocks, least.hw)->problem).value();
  b.set_budget(budget);
  // --- doc docs/guide/graphs.md begin ---
  remat::offmate<remat::milp::cbc> om;  // om.hw: the links, the GPU's and CPU's optimizer speeds
  auto a = om.plan(*g, budget);         // budget: the whole GPU's (weights, states, activations)
  if (!a) return a.err();
  remat::exec::managed_training train(ex, *a->program, remat::exec::adam{.lr = 1e-3f});
  for (int step = 0; step < 5; ++step)
    if (auto r = train.step(eg::make_input(b, 8, 16, step)); !r) return r.err();
  train.finish();  // the CPU's last steps; the parameters back in their layers
  // --- doc end ---
  return train.steps() == 5 && b.in_use() == 0;
}
#endif

// --- docs/executor.md ---------------------------------------------------------------------

template <class Model, class T>
remat::result<remat::bytes> dynamic_run(Model& model, const remat::chain& chain,
                                        remat::exec::host_backend& backend, remat::bytes budget,
                                        T input) {
  // --- doc docs/executor.md begin ---
  remat::exec::executor ex(model, chain, backend);  // or a DAG model on its graph
  // No plan: DTR's evictions as the run goes (h_dtr; or dynamic(budget, remat::h_lru{}))
  auto r = ex.run(remat::exec::dynamic(budget), std::move(input));
  if (!r) return r.err();  // budget_too_small: the op that does not fit, and what it needs
  const remat::schedule& decisions = *r->decisions;  // what ran: computes, fast-forwards, frees
  std::cout << r->measured_peak << " bytes at most, " << decisions.ops.size() << " instructions\n";
  // --- doc end ---
  return r->measured_peak;
}

// --- docs/offloading.md, docs/mixed-mode.md, docs/rockmate.md, docs/write-a-policy.md ----------

remat::result<remat::seconds> offload_usage(const remat::chain& chain, remat::bytes budget) {
  // --- doc docs/offloading.md begin ---
  remat::pofo p;                                // hw: PCIe 3 x16, 12e9 bytes/s each way
  p.hw = remat::machine::with_bandwidth(24e9);  // or .device_to_host / .host_to_device apart
  auto plan = p.solve_detailed(chain, budget);  // or p.solve(chain, budget) for the program alone
  if (!plan) return plan.err();  // budget_too_small: plan.err().minimum_budget (an optional)
  // The program, O/P/W included, checked by the simulator on p.hw:
  const remat::schedule& program = plan->program;
  const remat::offload_details& d = plan->details;
  std::cout << remat::to_string(d.ops) << '\n';  // the same as chain ops: "F1_ck O0 F2_none ... B1"
  std::cout << d.offloaded.size() << " inputs moved, " << d.offloaded_bytes << " bytes; "
            << d.model_time << " s in pofo's model, " << program.predicted_time
            << " s for the program, " << d.overlap() * 100 << " % of the copies hidden\n";
  // --- doc end ---
  return program.predicted_time;
}

remat::result<remat::seconds> mixed_mode_usage(remat::chain chain, remat::bytes budget) {
  // --- doc docs/mixed-mode.md begin ---
  chain.stages[2].control_flow = true;  // stage 3 branches at run time: no static plan holds it
  remat::mixed_mode<> p{.slots = 100, .search = remat::mixed_search::exact};
  p.dynamic.overhead = 20e-6;  // the runtime's seconds per op it runs (dispatch, bookkeeping)
  auto plan = p.solve_detailed(chain, budget);
  if (!plan) return plan.err();  // budget_too_small: plan.err().minimum_budget
  for (const remat::mixed_mode_details::segment& s : plan->details.segments)
    std::cout << "stages " << s.first << ".." << s.last << ": " << remat::to_string(s.mode) << ", "
              << s.share << " bytes, " << s.time << " s\n";
  // One program over the chain's graph, checked by the simulator; the executor runs it.
  const remat::schedule& program = plan->program;
  // --- doc end ---
  return program.predicted_time;
}

#if defined(REMAT_HAS_CBC)
// Compiled, not run (MadPipe on ResNet-50 takes seconds); test_pipeline_stages and the
// planners' tests run the same calls.
[[maybe_unused]] remat::result<remat::seconds> pipeline_usage() {
  // --- doc docs/pipeline.md begin ---
  auto dag =
      remat::zoo::resnet({.depth = 50, .batch = 8, .image = 1000}, remat::zoo::devices::v100());
  if (!dag) return dag.err();
  remat::pipeline_problem p{.layers = remat::sequential_chain(*dag).value(),
                            .processors = 4,
                            .memory = std::int64_t{8} << 30,  // each processor's
                            .bandwidth = 12e9};               // bytes per second, every link
  remat::madpipe<remat::milp::cbc> planner;  // madpipe<>: no MILP backend, phase 1 only
  planner.phase2_time_limit = 10;            // seconds for the ILP (default 60)
  auto plan = planner.solve(p);              // or remat::pipedream{}.solve(p)
  if (!plan) return plan.err();  // budget_too_small: plan.err().minimum_budget, an M that plans
  for (const remat::pipeline_stage& st : plan->plan.stages)
    std::cout << "layers " << st.first << ".." << st.last << " on processor " << st.processor
              << (st.recompute ? ", recomputing in its backward" : "") << '\n';
  std::cout << plan->report.normalized_period << " s per mini-batch, scheduled by "
            << plan->scheduler << '\n';
  // --- doc end ---
  return plan->report.normalized_period;
}
#endif

#if defined(REMAT_HAS_CBC)
// Runs on three stages of a 9-layer chain.
remat::result<remat::seconds> pipeline_ilp_usage(const remat::pipeline_problem& problem,
                                                 remat::seconds phase1_period,
                                                 const remat::pipeline_plan& phase1_plan) {
  // --- doc docs/pipeline.md begin ---
  remat::pipeline_ilp_options o;   // time_limit 60 s, as the thesis' phase 2
  o.period_bound = phase1_period;  // only plans with T <= this
  o.warm_start = phase1_plan;      // optional: a 1-periodic plan of the same stages
  auto r = remat::pipeline_ilp_schedule<remat::milp::cbc>(problem, {{1, 3}, {4, 7}, {8, 9}}, o);
  if (!r) return r.err();  // budget_too_small (minimum_budget), infeasible, time_limit, ...
  std::cout << r->plan.period << " s" << (r->optimal ? ", optimal" : "") << "; bound " << r->bound
            << " s, gap " << r->gap << '\n';
  // --- doc end ---
  return r->plan.period;
}

TEST_CASE("docs/pipeline.md: the ILP's example plans three stages") {
  remat::chain c{"nine", 4, {}};
  for (int l = 1; l <= 9; ++l) {
    remat::stage st;
    st.forward_time = 1 + l % 3;
    st.backward_time = 2 + l % 2;
    st.output_bytes = l == 9 ? 0 : 4;
    st.saved_bytes = st.output_bytes;
    st.weight_bytes = 2;
    c.stages.push_back(st);
  }
  remat::pipeline_problem p{.layers = c, .processors = 3, .memory = 100, .bandwidth = 4};
  // Phase 1's plan: the same three stages, contiguous, by 1F1B* (Alg. 7).
  auto phase1 = remat::one_f_one_b_star_fit(p, remat::contiguous_stages({3, 7, 9}));
  REQUIRE(phase1);
  auto t = pipeline_ilp_usage(p, phase1->period, *phase1);
  REQUIRE_MESSAGE(t, t.message());
  CHECK(*t <= phase1->period + 1e-9);
}

remat::result<remat::seconds> rockmate_usage(const remat::graph& graph, remat::bytes budget) {
  // --- doc docs/rockmate.md begin ---
  remat::rockmate<remat::checkmate<remat::milp::cbc>> p{.peak_budgets = 10, .save_budgets = 10};
  auto plan = p.solve_detailed(graph, budget);  // or p.solve(graph, budget) for the program alone
  if (!plan) return plan.err();
  // One program over the whole graph, checked by the simulator.
  const remat::schedule& program = plan->program;
  // Per block: its forward ops, its kind, its options, the one chosen, its forward runs.
  for (const remat::rockmate_block& b : plan->details.blocks)
    std::cout << "kind " << b.kind << ": option " << b.chosen << " of " << b.options
              << ", forward runs " << b.forward_runs << '\n';
  // What RK-Rotor planned: a stage per block, the options as cost sets.
  const remat::chain& blocks = plan->details.block_chain;
  std::cout << plan->details.kinds << " kinds, " << blocks.length() << " blocks, options in "
            << plan->details.options_time << " s, " << program.predicted_time << " s\n";
  // Notes: a graph with no cut point, a kind of block that found no option in time, ...
  for (const std::string& n : plan->notes) std::cout << n << '\n';
  // --- doc end ---
  return program.predicted_time;
}
#endif

namespace write_a_policy {
using namespace remat;
struct my_details {};
// --- doc docs/write-a-policy.md begin ---
struct my_policy {
  static constexpr std::string_view name = "my_policy";  // --policy my_policy
  static constexpr std::string_view summary = "one line for --help and the README";

  // Knobs: public members with defaults, so that designated initialisers work.
  std::int64_t slots = 500;
  seconds time_limit = std::numeric_limits<double>::infinity();
  std::function<void(double)> progress = {};                  // the fraction done, 0..1
  machine hw = machine::with_bandwidth(pcie3_x16_bandwidth);  // only if it plans transfers

  [[nodiscard]] result<schedule> solve(const chain& c, bytes budget) const {
    return detail::program_of(solve_detailed(c, budget));
  }
  [[nodiscard]] result<solution<my_details>> solve_detailed(const chain& c, bytes budget) const;
  [[nodiscard]] bytes minimum_budget(const chain& c) const;  // where it knows its minimum
};
// --- doc end ---
static_assert(Policy<my_policy, chain>);
}  // namespace write_a_policy

// --- docs/json-format.md ----------------------------------------------------------------------

#if defined(REMAT_DOC_JSON)
// Compiled, not run: it reads files relative to the working directory.
[[maybe_unused]] int json_usage() {
  // --- doc docs/json-format.md begin ---
  auto c = remat::io::load_chain("examples/chains/resnet_like.json");
  if (!c) return std::cerr << c.message() << '\n', 1;
  auto s = remat::rotor{}.solve(*c, 1_GiB);
  if (s) std::cout << remat::io::to_json(*s, *c).dump() << '\n';  // ["F1_ck","F2_none",...]

  // Replay a hand-written schedule (either notation) with transfers at 12 GB/s each way.
  std::ifstream file("schedule.json");
  auto p = remat::io::schedule_from_json(nlohmann::json::parse(file, nullptr, false), *c);
  if (p) {
    auto r =
        remat::sim::simulate(*c, *p, {.budget = 1_GiB, .hw = remat::machine::with_bandwidth(12e9)});
    std::cout << (r.valid ? "valid" : r.first_violation->message) << '\n';
  }
  // --- doc end ---
  return 0;
}
#endif

}  // namespace

TEST_CASE("README: the Example is examples/readme_example.cpp, whole") {
  const auto blocks = cpp_blocks(read_source("README.md"));
  int found = 0;
  for (const auto& b : blocks)
    if (b.section == "## Example") {
      CHECK(b.text == read_source("examples/readme_example.cpp"));
      ++found;
    }
  CHECK(found == 1);
}

TEST_CASE("docs: every C++ block of README.md and docs/guide/ is compiled by a test") {
  const std::vector<fragment> all = fragments();
  const std::string train = read_source("examples/train_example.cpp");
  std::set<std::string> pages_seen;
  int checked = 0;
  for (const auto& page : checked_pages()) {
    INFO("page ", page);
    const auto blocks = cpp_blocks(read_source(page));
    for (const auto& b : blocks) {
      INFO("in section ", b.section, ":\n", b.text);
      bool ok = false;
      if (page == "README.md" && b.section == "## Example")
        ok = true;  // the test case above
      else if (page == "docs/guide/train.md" && lines_of(b.text).size() > 100)
        ok = lines_in_order(b.text, train);  // the program: train_example without its checks
      else
        for (const auto& f : all) ok = ok || (f.page == page && f.text == b.text);
      CHECK_MESSAGE(ok, "this block is not compiled by any test: put it between \"// --- doc ",
                    page,
                    " begin ---\" and \"// --- doc end ---\" in a test (tests/examples/"
                    "test_doc_snippets.cpp), or make it an example's text");
      ++checked;
    }
    pages_seen.insert(page);
  }
  CHECK(checked >= 10);
  CHECK(pages_seen.count("docs/guide/train.md") == 1);
  // And every fragment is in its page, word for word: none is left behind by an edit.
  for (const auto& f : all) {
    INFO(f.where, ": a fragment of ", f.page, ":\n", f.text);
    bool in_page = false;
    for (const auto& b : cpp_blocks(read_source(f.page))) in_page = in_page || b.text == f.text;
    CHECK(in_page);
  }
  CHECK(all.size() >= 10);
}

TEST_CASE("doc fragments: the chain model and programs") {
  const remat::chain c = model_chain();
  CHECK(c == small_chain());
  const std::string out = printed([&] { model_programs(c); });
  CHECK(out.find("F1_ck F2_all F3_all B3 B2 F1_all B1\n") == 0);
  CHECK(out.find("valid, 0.0072 s, 36864 bytes") != std::string::npos);
}

TEST_CASE("doc fragments: offloading") {
  offload_machines();
  const remat::chain big = large_chain();
  const remat::bytes budget =
      (remat::pofo{}.minimum_budget(big) + remat::rotor{}.minimum_budget(big)) / 2;
  std::string out =
      printed([&] { CHECK_FALSE(offload_plan(big, budget).details.offloaded.empty()); });
  CHECK(out.find("activations offloaded") != std::string::npos);
  CHECK(offload_portfolio(big, budget) == "pofo");  // below rotor's minimum
  const auto r = offload_replay(small_chain());
  CHECK(r.valid);
  CHECK(r.host_peak == 4096);
  // An offloading plan run by the executor on the host backend.
  {
    auto model = toy::make_chain_model(5, 3, false);
    remat::exec::host_backend profiling;
    const auto chain =
        remat::exec::profile_chain(model, toy::tensor::make(profiling, 8), profiling);
    REQUIRE(chain.ok());
    const remat::pofo p{.hw = remat::machine::with_bandwidth(1e9), .slots = 0};
    const remat::bytes low = p.minimum_budget(*chain);
    const auto plan = p.solve_detailed(*chain, low);
    REQUIRE_MESSAGE(plan.ok(), plan.message());
    const auto peak = offload_run(model, *chain, plan, low, [](remat::exec::host_backend& b) {
      return toy::tensor::make(b, 8);
    });
    CHECK(peak <= low);
  }
}

TEST_CASE("doc fragments: the executor's dynamic mode") {
  auto model = toy::make_chain_model(6, 3, true);
  remat::exec::host_backend b;
  const auto chain = remat::exec::profile_chain(model, toy::tensor::make(b, 8), b);
  REQUIRE(chain.ok());
  const remat::graph g = remat::build_graph(*chain).value();
  const remat::bytes least = remat::dtr<>{}.minimum_budget(g);
  remat::result<remat::bytes> peak = remat::bytes{0};
  CHECK(printed([&] {
          peak = dynamic_run(model, *chain, b, least, toy::tensor::make(b, 8));
        }).find(" instructions") != std::string::npos);
  REQUIRE_MESSAGE(peak.ok(), peak.message());
  CHECK(*peak <= least);
  const auto small = dynamic_run(model, *chain, b, least / 2, toy::tensor::make(b, 8));
  REQUIRE_FALSE(small);
  CHECK(small.code() == remat::status::budget_too_small);
}

TEST_CASE("doc fragments: profile options") {
  auto model = toy::make_chain_model(3, 5, true);
  remat::exec::host_backend b;
  const toy::tensor x = toy::tensor::make(b, 4);
  const auto measured = train_profile(model, x, b);
  REQUIRE_MESSAGE(measured.ok(), measured.message());
  for (const auto& s : measured->stages) {
    const double steps = s.forward_time / 1e-5;
    CHECK(steps == doctest::Approx(std::round(steps)).epsilon(1e-9));
  }
  const auto fixed = train_fixed_times(model, x, b);
  REQUIRE_MESSAGE(fixed.ok(), fixed.message());
  CHECK(fixed->stages[0].backward_time == 2e-3);
}

TEST_CASE("doc fragments: offloading, rockmate") {
  remat::chain c{"doc", 1_KiB, {}};
  for (int i = 0; i < 6; ++i) c.stages.push_back({"s", 1e-3, 2e-3, 4_KiB, 8_KiB, 0, 0});
  const remat::bytes all = remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_peak;
  std::optional<remat::result<remat::seconds>> off;
  const std::string text = printed([&] { off = offload_usage(c, all / 2); });
  REQUIRE_MESSAGE(off->ok(), off->message());
  CHECK(text.find("F1_") != std::string::npos);
  CHECK(text.find("of the copies hidden") != std::string::npos);
  std::optional<remat::result<remat::seconds>> mixed;
  CHECK(printed([&] { mixed = mixed_mode_usage(c, all * 3 / 4); }).find(": dynamic, ") !=
        std::string::npos);
  REQUIRE_MESSAGE(mixed->ok(), mixed->message());
#if defined(REMAT_HAS_CBC)
  const auto g = graph_by_hand();
  REQUIRE(g.ok());
  std::optional<remat::result<remat::seconds>> rk;
  CHECK(printed([&] {
          rk = rockmate_usage(*g, remat::fraction_of_store_all(*g, 0.8));
        }).find("forward runs") != std::string::npos);
  REQUIRE_MESSAGE(rk->ok(), rk->message());
#endif
}

TEST_CASE("doc fragments: graphs") {
  const auto g = graph_by_hand();
  REQUIRE_MESSAGE(g.ok(), g.message());
  const auto by_hand = dag_model_by_hand();
  REQUIRE_MESSAGE(by_hand.ok(), by_hand.message());
  CHECK(*by_hand);
#if defined(REMAT_HAS_CBC)
  CHECK(printed([&] { graph_checkmate(g); }).find("fwd conv1") != std::string::npos);
  CHECK(printed([&] {
          CHECK(graph_rockmate(g, remat::fraction_of_store_all(*g, 0.8)) >= 1);
        }).find("forward runs") != std::string::npos);
  const auto r = graph_executor();
  // checkmate may recompute a backward, which the executor refuses; otherwise the run succeeds.
  CHECK_MESSAGE((r.ok() || r.message().find("runs a second time") != std::string::npos),
                r.message());
  if (r) CHECK(r->has_value());
  const auto o = graph_offmate();
  REQUIRE_MESSAGE(o.ok(), o.message());
  CHECK(*o);
#endif
}
