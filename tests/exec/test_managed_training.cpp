// managed_training (exec/managed_training.hpp): OFFMATE's programs, planned on the profiled graph
// of an Eigen DAG model at budgets from the least to plenty, run on the host backend with a real
// Adam on the device side and on the CPU side: after 5 steps the parameters are bitwise those of
// 5 steps of plain training with the same Adam, and every step's measured device and host peaks
// are the simulator's. Bad uses come back as statuses.
#include <doctest/doctest.h>

#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <eigen/models.hpp>

#include <remat/exec/managed_training.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/exec/train.hpp>
#include <remat/policy/offmate.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>

#include "checkmate_backend.hpp"  // milp_backend: CBC, else lp_solve

using namespace remat;
using exec::host_backend;

namespace {

constexpr int depth = 3;
constexpr eg::index width = 32, hidden = 64, batch = 8;
constexpr std::uint64_t seed = 11;
constexpr int steps = 5;

eg::dag make_model() { return eg::make_residual_dag(depth, width, hidden, batch, seed); }
eg::tensor batch_input(host_backend& b, int k) {
  return eg::make_input(b, batch, width, eg::derive_seed(seed, 100 + static_cast<unsigned>(k)));
}

/// The profiled graph, with fixed times (the plans do not depend on the machine's noise).
graph profiled() {
  host_backend b;
  eg::dag m = make_model();
  const auto x = batch_input(b, 0);
  exec::profile_options o{.repetitions = 1, .warmup = 0, .name = "residual"};
  for (std::size_t i = 0; i < m.ops.size(); ++i) o.fixed_times.push_back({1e-3, 2e-3});
  auto f = exec::profile_dag(m, x, b, o);
  REQUIRE_MESSAGE(f.ok(), f.message());
  return build_graph(*f).value();
}

/// Every parameter value of the model, in order.
std::vector<float> values_of(eg::dag& m) {
  std::vector<float> v;
  for (auto& l : m.layers)
    for (const auto& p : l->parameters()) {
      REQUIRE(p.value.data() != nullptr);
      v.insert(v.end(), p.value.data(), p.value.data() + p.value.size());
    }
  return v;
}

/// Plain training: store-all, then the same Adam on every parameter, `steps` times.
std::vector<float> plain_training(const graph& g, const exec::adam& opt) {
  host_backend b;
  eg::dag m = make_model();
  exec::executor ex(m, g, b);
  const schedule sa{store_all_program(g), g.ideal_time(), 0};
  std::map<const void*, std::vector<float>> states;
  for (int k = 1; k <= steps; ++k) {
    auto r = exec::train_step(ex, sa, batch_input(b, k), [&](eg::layer& l) {
      for (auto& p : l.parameters()) {
        auto& s = states[&p];
        s.resize(static_cast<std::size_t>(2 * p.value.size()), 0.0f);
        opt.step(p.value.data(), p.grad.data(), s.data(), static_cast<std::size_t>(p.value.size()),
                 k);
      }
    });
    REQUIRE_MESSAGE(r.ok(), r.message());
  }
  return values_of(m);
}

struct features {
  int cpu_updates = 0, gpu_updates = 0, weight_moves = 0, state_moves = 0, gradient_moves = 0;
  int lagging = 0;  // CPU steps that take the previous iteration's gradient
};
features features_of(const schedule& s) {
  features f;
  for (const auto& st : s.parameters.start) f.lagging += st.gradient_on_host;
  for (const auto& ins : s.ops) {
    f.cpu_updates += ins.op == op_kind::cpu_update;
    f.gpu_updates += ins.op == op_kind::update;
    const bool move = ins.op == op_kind::offload || ins.op == op_kind::prefetch;
    f.weight_moves += move && ins.part == tensor_part::weight;
    f.state_moves += move && ins.part == tensor_part::states;
    f.gradient_moves += move && ins.part == tensor_part::gradient;
  }
  return f;
}

/// The program with the CPU steps of the parameters that start off the device moved to its
/// beginning: each takes the previous iteration's gradient, waiting on the host (a plan whose
/// CPU is busy until the next iteration); none runs at the first step, finish() runs the last.
schedule lagging(const graph& g, schedule s) {
  std::vector<instruction> front, rest;
  for (const auto& ins : s.ops) {
    const bool moves = ins.op == op_kind::cpu_update &&
                       !s.parameters.start[static_cast<std::size_t>(ins.node)].weight_on_device;
    (moves ? front : rest).push_back(ins);
    if (moves) s.parameters.start[static_cast<std::size_t>(ins.node)].gradient_on_host = true;
  }
  REQUIRE_FALSE(front.empty());
  front.insert(front.end(), rest.begin(), rest.end());
  s.ops = std::move(front);
  const auto r = sim::simulate(g, s);
  REQUIRE_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : std::string()));
  s.predicted_peak = r.peak;
  return s;
}

}  // namespace

TEST_CASE(
    "managed_training: offmate's programs train bitwise as plain Adam, at the simulated peaks") {
  const graph g = profiled();
  REQUIRE(g.parameters().size() == static_cast<std::size_t>(4 * depth + 2));
  CHECK(g.parameters()[0].name == "fc1a.weight");
  const exec::adam opt{.lr = 1e-2f};
  const std::vector<float> reference = plain_training(g, opt);

  offmate<milp_backend> pol;
  pol.time_limit = 30;
  auto gp = offmate_problem_of(g, pol.blocks, pol.hw);
  REQUIRE_MESSAGE(gp.ok(), gp.message());
  const bytes least = pol.minimum_budget(gp->problem).value();
  features seen;
  for (const double more : {0.0, 0.2, 0.6, 3.0}) {
    const bytes budget = least + static_cast<bytes>(more * static_cast<double>(least));
    INFO("budget " << budget << " (least " << least << ")");
    const auto a = pol.plan(g, budget);
    REQUIRE_MESSAGE(a.ok(), a.message());
    REQUIRE(a->program);
    for (const bool lag : {false, true}) {
      if (lag && features_of(*a->program).cpu_updates == 0) continue;
      const schedule program = lag ? lagging(g, *a->program) : *a->program;
      INFO((lag ? "CPU steps a step behind" : "offmate's program"));
      const features f = features_of(program);
      seen.cpu_updates += f.cpu_updates;
      seen.gpu_updates += f.gpu_updates;
      seen.weight_moves += f.weight_moves;
      seen.state_moves += f.state_moves;
      seen.gradient_moves += f.gradient_moves;
      seen.lagging += f.lagging;
      // The host backend copies at once: the simulator on a machine whose copies take no time.
      const auto sim = sim::simulate(g, program);
      REQUIRE(sim.valid);

      host_backend b(budget);
      eg::dag m = make_model();
      exec::executor ex(m, g, b);
      exec::managed_training t(ex, program, opt);
      for (int k = 1; k <= steps; ++k) {
        auto r = t.step(batch_input(b, k));
        REQUIRE_MESSAGE(r.ok(), r.message());
        CHECK(r->measured_peak == sim.peak);
        CHECK(r->measured_peak <= budget);
        REQUIRE(r->measured_host_peak);
        CHECK(*r->measured_host_peak == sim.host_peak);
      }
      CHECK(t.steps() == steps);
      t.finish();
      CHECK(b.in_use() == 0);  // every parameter back in a host buffer
      CHECK(values_of(m) == reference);
    }
  }
  // The programs used every kind of instruction on parameters.
  CHECK(seen.cpu_updates > 0);
  CHECK(seen.gpu_updates > 0);
  CHECK(seen.weight_moves > 0);
  CHECK(seen.gradient_moves > 0);
  CHECK(seen.lagging > 0);
}

namespace {
/// offmate's program at the least budget (CPU steps, some of them a step behind).
schedule tight_program(const graph& g, bytes& budget) {
  offmate<milp_backend> pol;
  pol.time_limit = 30;
  auto gp = offmate_problem_of(g, pol.blocks, pol.hw);
  REQUIRE(gp.ok());
  budget = pol.minimum_budget(gp->problem).value();
  auto a = pol.plan(g, budget);
  REQUIRE_MESSAGE(a.ok(), a.message());
  return *a->program;
}
}  // namespace

TEST_CASE(
    "managed_training: the offload option's cheap operations, made again in the backward, "
    "train bitwise") {
  // A slow link: every operation (1 ms) takes less than its output's round trip (4 ms), so each
  // offloading block frees what it would move and makes it again [Offmate24, §4.1].
  const graph g = profiled();
  const exec::adam opt{.lr = 1e-2f};
  const std::vector<float> reference = plain_training(g, opt);
  offmate<milp_backend> pol;
  pol.time_limit = 30;
  pol.hw.device_to_host = pol.hw.host_to_device = 1e6;
  pol.blocks.recompute = false;  // store-all or offload
  auto gp = offmate_problem_of(g, pol.blocks, pol.hw);
  REQUIRE_MESSAGE(gp.ok(), gp.message());
  const bytes least = pol.minimum_budget(gp->problem).value();
  int again = 0;  // forwards run a second time
  for (const double more : {0.0, 0.3}) {
    const bytes budget = least + static_cast<bytes>(more * static_cast<double>(least));
    INFO("budget " << budget);
    const auto a = pol.plan(g, budget);
    REQUIRE_MESSAGE(a.ok(), a.message());
    REQUIRE(a->program);
    std::vector<int> runs(static_cast<std::size_t>(g.compute_count()), 0);
    for (const auto& ins : a->program->ops)
      if (ins.op == op_kind::compute) ++runs[static_cast<std::size_t>(ins.node)];
    for (int c = 0; c < g.compute_count(); ++c)
      again += g.compute(c).kind == compute_kind::forward && runs[static_cast<std::size_t>(c)] > 1;
    const auto sim = sim::simulate(g, *a->program);
    REQUIRE(sim.valid);
    host_backend b(budget);
    eg::dag m = make_model();
    exec::executor ex(m, g, b);
    exec::managed_training t(ex, *a->program, opt);
    for (int k = 1; k <= steps; ++k) {
      auto r = t.step(batch_input(b, k));
      REQUIRE_MESSAGE(r.ok(), r.message());
      CHECK(r->measured_peak == sim.peak);
      CHECK(r->measured_peak <= budget);
    }
    t.finish();
    CHECK(values_of(m) == reference);
  }
  CHECK(again > 0);
}

TEST_CASE("managed_training: steps after finish() go on from where it left the parameters") {
  const graph g = profiled();
  const exec::adam opt{.lr = 1e-2f};
  bytes budget = 0;
  const schedule program = lagging(g, tight_program(g, budget));
  host_backend b(budget);
  eg::dag m = make_model();
  exec::executor ex(m, g, b);
  exec::managed_training t(ex, program, opt);
  for (int k = 1; k <= steps; ++k) {
    REQUIRE(t.step(batch_input(b, k)).ok());
    if (k == 2) {  // the parameters back in the layers, then placed again at the next step
      t.finish();
      CHECK(t.device_bytes() == 0);
      CHECK(b.in_use() == 0);
    }
  }
  t.finish();
  CHECK(values_of(m) == plain_training(g, opt));
}

TEST_CASE("managed_training: bad uses are statuses that say what would work") {
  const graph g = profiled();
  bytes budget = 0;
  const schedule program = tight_program(g, budget);
  host_backend b;
  eg::dag m = make_model(), fresh = make_model();
  exec::executor ex(m, g, b);
  SUBCASE("the executor alone refuses a program that manages parameters") {
    auto r = ex.run(program, batch_input(b, 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == status::invalid_problem);
    CHECK(r.message().find("managed_training") != std::string::npos);
  }
  SUBCASE("a program that does not manage them") {
    const schedule sa{store_all_program(g), g.ideal_time(), 0};
    exec::managed_training t(ex, sa);
    auto r = t.step(batch_input(b, 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().find("does not manage the parameters") != std::string::npos);
  }
  SUBCASE("optimizer states other than Adam's") {
    schedule s = program;
    s.parameters.optimizer_states = 1;
    exec::managed_training t(ex, s);
    auto r = t.step(batch_input(b, 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().find("Adam keeps 2") != std::string::npos);
  }
  SUBCASE("bad hyperparameters") {
    exec::managed_training t(ex, program, exec::adam{.beta1 = 1.5f});
    auto r = t.step(batch_input(b, 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.message().find("beta1") != std::string::npos);
  }
  SUBCASE("parameters that do not fit where the program starts them") {
    b.set_budget(budget / 4);
    exec::managed_training t(ex, program);
    auto r = t.step(batch_input(b, 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == status::execution_error);
    CHECK(r.message().find("placing parameter") != std::string::npos);
    CHECK(r.message().find("back in their layers") != std::string::npos);
    CHECK(values_of(m) == values_of(fresh));  // untouched
  }
  SUBCASE("a step that runs out of memory hands the parameters back") {
    const auto sim = sim::simulate(g, program);
    b.set_budget(sim.peak - 1);
    exec::managed_training t(ex, program);
    auto r = t.step(batch_input(b, 1));
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().code == status::execution_error);
    CHECK(r.message().find("back in their layers") != std::string::npos);
    CHECK(values_of(m).size() == values_of(fresh).size());  // every value readable
    CHECK(b.in_use() == 0);
  }
}

#endif
