// remat::libtorch: LibTorch models trained by plans give plain LibTorch's losses,
// gradients, batch-norm statistics and generator state bit for bit, for every chain policy and
// rockmate (on the chain's graph) at 4 budgets, with dropout; measured peaks stay within the
// budget and equal the simulated ones (parameter gradients are model state); bad modules fail
// with messages that name them.
// LibTorch first: Debian's LibTorch logs with glog, whose CHECK macros doctest's replace.
#include <torch/nn.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_GT
#undef CHECK_GE
#undef CHECK_LT
#undef CHECK_LE

#include <malloc.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/rockmate.hpp>
#include <remat/remat.hpp>
#include <remat/torch.hpp>
#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
#include <remat/policy/checkmate.hpp>
#endif

#include "torch/models.hpp"
#include "torch/plain.hpp"

namespace tnn = torch::nn;
namespace models = remat_examples::torch_models;
using remat::libtorch::backend;
using remat::libtorch::layers_of;

namespace {

using models::copy_of;

std::vector<std::uint8_t> generator_state() {
  const torch::Tensor s = at::detail::getDefaultCPUGenerator().get_state();
  return {s.data_ptr<std::uint8_t>(), s.data_ptr<std::uint8_t>() + s.nbytes()};
}

/// One model of the tests: the network, the loss, a batch.
struct problem {
  std::string name;
  tnn::Sequential net;
  tnn::AnyModule loss;
  torch::Tensor x, targets;
};

problem mlp() {
  torch::manual_seed(1);
  tnn::Sequential net(tnn::Linear(12, 32), tnn::Tanh(), tnn::Dropout(0.3), tnn::Linear(32, 32),
                      tnn::ReLU(), tnn::Dropout(0.2), tnn::Linear(32, 32), tnn::Tanh(),
                      tnn::Linear(32, 5));
  return {"mlp with dropout", net, tnn::AnyModule(tnn::CrossEntropyLoss()), torch::randn({16, 12}),
          torch::randint(0, 5, {16})};
}
problem resnet() {
  torch::manual_seed(2);
  return {"resnet-like", models::resnet_like(4, 5), tnn::AnyModule(tnn::CrossEntropyLoss()),
          torch::randn({4, 3, 16, 16}), torch::randint(0, 5, {4})};
}
problem gpt() {
  torch::manual_seed(3);
  models::gpt_config cfg{
      .vocab = 40, .context = 8, .width = 16, .heads = 2, .layers = 3, .dropout = 0.2};
  return {"gpt-like", models::gpt_like(cfg), tnn::AnyModule(models::lm_loss()),
          torch::randint(0, 40, {3, 8}), torch::randint(0, 40, {3, 8})};
}

using plan_fn = std::function<remat::result<remat::schedule>(const remat::chain&, remat::bytes)>;

/// Trains a copy of p.net by `plan` and another copy plainly for `steps` SGD steps from the same
/// generator state; checks losses, gradients, buffers and the generator state bit for bit, and the
/// peak against the budget. Returns the largest measured peak; `peaks`, when given, receives
/// every step's.
remat::bytes train_both(const problem& p, const remat::chain& c, const remat::schedule& plan,
                        remat::bytes budget, int steps,
                        std::vector<remat::bytes>* peaks = nullptr) {
  tnn::Sequential ref = copy_of(p.net), mine = copy_of(p.net);
  tnn::AnyModule ref_loss = p.loss.clone(), my_loss = p.loss.clone();
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.05));
  torch::optim::SGD my_opt(mine->parameters(), torch::optim::SGDOptions(0.05));
  auto model = layers_of(mine, my_loss);
  backend b;
  const torch::Tensor x = p.x.clone(), targets = p.targets.clone();
  remat::exec::executor ex(model, c, b);
  b.set_budget(budget + b.in_use());  // the input and targets were allocated before
  remat::bytes peak = 0;
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(100 + step);
    const double ref_value = [&] {
      const remat::libtorch::uncounted plain;  // the reference runs beside the counted run
      return models::plain_step(ref, ref_loss, p.x, p.targets);
    }();
    const auto ref_gen = generator_state();
    torch::manual_seed(100 + step);
    remat::exec::zero_grad(model);
    auto r = ex.run(plan, x, targets);
    REQUIRE_MESSAGE(
        r, (r ? std::string() : r.err().message));  // lazily logged: -s prints it on success too
    CHECK(generator_state() == ref_gen);
    REQUIRE(r->loss);
    CHECK(*r->loss == ref_value);
    CHECK(models::same_state(*ref, *mine));  // gradients and batch norm's statistics
    CHECK(r->measured_peak <= budget);
    peak = std::max(peak, r->measured_peak);
    if (peaks) peaks->push_back(r->measured_peak);
    const remat::libtorch::uncounted optimizer;
    ref_opt.step();
    my_opt.step();
  }
  return peak;
}

struct profiled {
  problem p;
  remat::chain c;
};
profiled profile(problem p) {
  auto copy = copy_of(p.net);
  tnn::AnyModule loss = p.loss.clone();
  auto model = layers_of(copy, loss);
  backend b;
  auto c = remat::exec::profile_chain(model, p.x, p.targets, b,
                                      {.repetitions = 1, .warmup = 0, .name = p.name});
  REQUIRE_MESSAGE(c, (c ? std::string() : c.err().message));
  return {std::move(p), std::move(*c)};
}

}  // namespace

TEST_SUITE_BEGIN("torch");

// Test names have no comma or semicolon: doctest_discover_tests finds a case's suite (its CTest
// label) by filtering on its name, where a comma separates filters.
TEST_CASE(
    "every chain policy trains LibTorch models bit for bit like plain LibTorch and within the "
    "budget") {
  const std::vector<std::pair<std::string, plan_fn>> policies = {
    {"store_all",
     [](const remat::chain& c, remat::bytes m) { return remat::store_all{}.solve(c, m); }},
    {"periodic",
     [](const remat::chain& c, remat::bytes m) { return remat::periodic{}.solve(c, m); }},
    {"revolve", [](const remat::chain& c, remat::bytes m) { return remat::revolve{}.solve(c, m); }},
    {"rotor", [](const remat::chain& c, remat::bytes m) { return remat::rotor{}.solve(c, m); }},
    {"rotor_floating",
     [](const remat::chain& c, remat::bytes m) { return remat::rotor_floating{}.solve(c, m); }},
    // rockmate plans the chain's training graph, every stage a block.
    {"rockmate<store_all>",
     [](const remat::chain& c, remat::bytes m) {
       return remat::rockmate<remat::store_all>{.threads = 1}.solve(c, m);
     }},
#if defined(REMAT_HAS_CBC)
    {"rockmate<checkmate<cbc>>",
     [](const remat::chain& c, remat::bytes m) {
       return remat::rockmate<remat::checkmate<remat::milp::cbc>>{
           .peak_budgets = 4, .save_budgets = 3, .threads = 1}
           .solve(c, m);
     }},
#endif
  };
  for (auto make : {mlp, resnet, gpt}) {
    const profiled pr = profile(make());
    const remat::bytes all = remat::peak_of_store_all(pr.c);
    const remat::bytes least = [&] {
      auto r = remat::rotor{.slots = 0}.solve(pr.c, 1);
      REQUIRE(!r);
      REQUIRE(r.err().minimum_budget);
      return *r.err().minimum_budget;
    }();
    int ran = 0, recomputed = 0;
    double worst = 0;
    for (int k = 0; k < 4; ++k) {
      const remat::bytes budget = least + (all - least) * k / 3;
      for (const auto& [name, solve] : policies) {
        auto plan = solve(pr.c, budget);
        if (!plan) continue;  // below this policy's own minimum
        CAPTURE(pr.p.name);
        CAPTURE(name);
        CAPTURE(budget);
        const auto sim = remat::sim::simulate(pr.c, *plan);
        REQUIRE(sim.valid);
        const remat::bytes measured = train_both(pr.p, pr.c, *plan, budget, 2);
        worst = std::max(worst, std::abs(static_cast<double>(measured - sim.peak)) /
                                    static_cast<double>(sim.peak));
        ++ran;
        recomputed += plan->ops.size() > remat::store_all{}.solve(pr.c, all)->ops.size();
      }
    }
    MESSAGE(pr.p.name << ": " << ran
                      << " plans, largest |measured - simulated| / simulated peak = " << worst);
    CHECK(ran >= 16);
    CHECK(recomputed >= 4);
    CHECK(worst == 0);  // every byte goes through the counted allocator (docs/guide/libtorch.md)
  }
}

TEST_CASE(
    "parameter gradients are model state: no op counts them and every step peaks where the plan "
    "says") {
  const profiled pr = profile(mlp());
  // A backward makes its parameters' gradients, which live until the optimizer's step beside the
  // weights: they are not the op's transient memory (the Linear stages' would be 4,224 bytes).
  const auto children = pr.p.net->children();
  int with_parameters = 0;
  for (std::size_t i = 0; i < children.size(); ++i) {
    remat::bytes gradients = 0;
    for (const auto& w : children[i]->parameters())
      gradients += static_cast<remat::bytes>(w.numel() * w.element_size());
    if (gradients == 0) continue;
    ++with_parameters;
    CAPTURE(pr.c.stages[i].name);
    CHECK(pr.c.stages[i].backward_overhead_bytes < gradients);
  }
  CHECK(with_parameters == 4);
  // With SGD, whose zero_grad() zeroes the gradients in place: every step, the first (which
  // makes the gradients) and the later ones (which add into them), peaks at the simulated peak.
  for (const double fraction : {0.6, 1.0}) {
    CAPTURE(fraction);
    const remat::bytes budget = remat::fraction_of_store_all(pr.c, fraction);
    const auto plan = remat::rotor{}.solve(pr.c, budget);
    REQUIRE(plan);
    const auto sim = remat::sim::simulate(pr.c, *plan);
    REQUIRE(sim.valid);
    std::vector<remat::bytes> peaks;
    train_both(pr.p, pr.c, *plan, budget, 3, &peaks);
    CHECK(peaks == std::vector<remat::bytes>(3, sim.peak));
  }
}

namespace {
struct pair_out_impl : tnn::Module {
  std::tuple<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) {
    return {x * 2, x * 3};
  }
};
TORCH_MODULE_IMPL(pair_out, pair_out_impl);
struct keeps_input_impl : tnn::Module {
  torch::Tensor last;
  torch::Tensor forward(const torch::Tensor& x) {
    last = x;
    return x * 2;
  }
};
TORCH_MODULE_IMPL(keeps_input, keeps_input_impl);

/// The message of a failed profile of `net` followed by `loss`.
template <class Loss>
std::string profile_error(const tnn::Sequential& net, const Loss& loss, const torch::Tensor& x,
                          const torch::Tensor& targets) {
  auto model = layers_of(net, loss);
  backend b;
  auto c = remat::exec::profile_chain(model, x, targets, b, {.repetitions = 1, .warmup = 0});
  REQUIRE(!c);
  return c.err().message;
}
}  // namespace

TEST_CASE("bad LibTorch modules fail with a message that names the module") {
  const torch::Tensor x = torch::randn({4, 6}), labels = torch::randint(0, 3, {4});
  SUBCASE("a forward that returns a tuple") {
    const std::string m = profile_error(tnn::Sequential(tnn::Linear(6, 6), pair_out()),
                                        tnn::CrossEntropyLoss(), x, labels);
    CHECK(m.find("module '1 (pair_out)'") != std::string::npos);
    CHECK(m.find("returns std::tuple<at::Tensor, at::Tensor>, not a tensor") != std::string::npos);
  }
  SUBCASE("a module that changes its input in place") {
    const std::string m = profile_error(
        tnn::Sequential(tnn::Linear(6, 6), tnn::ReLU(tnn::ReLUOptions(true)), tnn::Linear(6, 3)),
        tnn::CrossEntropyLoss(), x, labels);
    CHECK(m.find("module '1 (ReLU)' changed its input in place") != std::string::npos);
  }
  SUBCASE("a module that keeps a reference to its input") {
    const std::string m =
        profile_error(tnn::Sequential(tnn::Linear(6, 6), keeps_input(), tnn::Linear(6, 3)),
                      tnn::CrossEntropyLoss(), x, labels);
    CHECK(m.find("module '1 (keeps_input)' keeps a reference to its input") != std::string::npos);
  }
  SUBCASE("a loss that is not one number") {
    const std::string m = profile_error(
        tnn::Sequential(tnn::Linear(6, 3)),
        tnn::CrossEntropyLoss(tnn::CrossEntropyLossOptions().reduction(torch::kNone)), x, labels);
    CHECK(
        m.find("module 'loss (CrossEntropyLoss)' is the loss but returns a tensor of shape [4]") !=
        std::string::npos);
  }
  SUBCASE("a stage whose forward takes two tensors") {
    const std::string m = profile_error(
        tnn::Sequential(tnn::Linear(6, 3), tnn::CrossEntropyLoss(), tnn::Linear(1, 1)),
        tnn::MSELoss(), x, labels);
    CHECK(m.find("module '1 (CrossEntropyLoss)'") != std::string::npos);
    CHECK(m.find("a chain stage's forward takes one tensor") != std::string::npos);
  }
  SUBCASE("a loss called without the targets it needs") {
    auto model = layers_of(tnn::Sequential(tnn::Linear(6, 3)), tnn::CrossEntropyLoss());
    backend b;
    auto c = remat::exec::profile_chain(model, x, b, {.repetitions = 1, .warmup = 0});
    REQUIRE(!c);
    CHECK(c.err().message.find(
              "this loss is called as forward(x): a loss that takes targets needs them") !=
          std::string::npos);
  }
  SUBCASE("an empty Sequential") {
    CHECK_THROWS_WITH_AS(layers_of(tnn::Sequential()),
                         "remat::libtorch::layers_of: the Sequential has no module",
                         std::invalid_argument);
  }
}

TEST_CASE(
    "a budget below a layer's need: the planner gives the minimum and the backend names the "
    "module") {
  problem p = mlp();
  const profiled pr = profile(p);
  auto r = remat::rotor{}.solve(pr.c, 1000);
  REQUIRE(!r);
  CHECK(r.err().code == remat::status::budget_too_small);
  REQUIRE(r.err().minimum_budget);
  // A plan run with less memory than it needs stops at the allocation that does not fit.
  auto plan = remat::store_all{}.solve(pr.c, remat::unlimited_bytes);
  auto model = layers_of(pr.p.net, pr.p.loss);
  backend b(remat::peak_of_store_all(pr.c) / 2);
  remat::exec::executor ex(model, pr.c, b);
  auto run = ex.run(*plan, pr.p.x, pr.p.targets);
  REQUIRE(!run);
  CHECK(run.err().code == remat::status::execution_error);
  CHECK(run.err().message.find("would exceed the budget") != std::string::npos);
  // e.g. "instruction 5 (C5), 'fwd 5 (Dropout)' (compute 5): allocating 2048 bytes ..."
  CHECK_MESSAGE(run.err().message.find("'fwd 5 (Dropout)'") != std::string::npos,
                run.err().message);
}

TEST_CASE(
    "Adam's state made inside the budget: the second step's error names optimizer state, and "
    "an uncounted guard around step() trains") {
  const profiled pr = profile(mlp());
  const auto plan = *remat::store_all{}.solve(pr.c, remat::unlimited_bytes);
  for (const bool guarded : {false, true}) {
    CAPTURE(guarded);
    tnn::Sequential net = copy_of(pr.p.net);
    tnn::AnyModule loss = pr.p.loss.clone();
    auto model = layers_of(net, loss);
    // Adam's two moments per parameter, made at its first step.
    remat::bytes state = 0;
    for (const auto& w : net->parameters())
      state += 2 * static_cast<remat::bytes>(w.numel() * w.element_size());
    backend b;
    const torch::Tensor x = pr.p.x.clone(), targets = pr.p.targets.clone();
    // Unguarded: room for the first step's Adam state beside the batch, but not for it and the
    // plan's peak together (half of it). Guarded: room for the plan only.
    b.set_budget(b.in_use() + plan.predicted_peak + (guarded ? 0 : state / 2));
    remat::exec::executor ex(model, pr.c, b);
    torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
    for (int step = 0; step < 2; ++step) {
      adam.zero_grad();
      auto r = ex.run(plan, x, targets);
      if (!guarded && step == 1) {
        REQUIRE_FALSE(r.ok());
        CHECK_MESSAGE(r.message().find(remat::format_bytes(state) +
                                       " of them since the last run ended") != std::string::npos,
                      r.message());
        CHECK(r.message().find("optimizer's state") != std::string::npos);
        break;
      }
      REQUIRE_MESSAGE(r.ok(), r.message());
      if (guarded) {
        const remat::libtorch::uncounted outside_the_budget;
        adam.step();
      } else {
        adam.step();
      }
    }
  }
}

TEST_CASE("the model's input gradient is computed when asked for and is plain LibTorch's") {
  problem p = mlp();
  const profiled pr = profile(p);
  auto plan = remat::rotor{}.solve(pr.c, remat::fraction_of_store_all(pr.c, 0.7));
  REQUIRE(plan);
  // Plain LibTorch with an input that requires a gradient.
  tnn::Sequential ref = copy_of(p.net), mine = copy_of(p.net);
  tnn::AnyModule ref_loss = p.loss.clone(), my_loss = p.loss.clone();
  const torch::Tensor leaf = p.x.clone().requires_grad_(true);
  torch::manual_seed(5);
  ref_loss.forward(ref->forward(leaf), p.targets).backward();
  for (const bool asked : {false, true}) {
    auto model = layers_of(mine, my_loss, {.input_gradient = asked});
    backend b;
    remat::exec::executor ex(model, pr.c, b);
    torch::manual_seed(5);
    auto r = ex.run(*plan, p.x, p.targets);
    REQUIRE(r);
    CHECK(r->input_gradient.defined() == asked);
    if (asked) CHECK(models::same_bits(r->input_gradient, leaf.grad()));
  }
}

TEST_CASE("one backend counts at a time and memory outlives its backend safely") {
  torch::Tensor kept;
  {
    backend b;
    CHECK_THROWS_AS(backend(), std::logic_error);
    kept = torch::ones({256});
    CHECK(b.in_use() == 1024);
    torch::Tensor t = torch::zeros({64});
    CHECK(b.high_water() == 1280);
    t = torch::Tensor();
    CHECK(b.in_use() == 1024);
    {
      const remat::libtorch::uncounted outside;
      torch::Tensor u = torch::ones({1000});
      CHECK(b.in_use() == 1024);
    }
  }
  backend second;
  kept = torch::Tensor();  // counted by the first backend: not this one's
  CHECK(second.in_use() == 0);
}

TEST_CASE(
    "a state window: what becomes state leaves the count and the high water as if never counted") {
  backend b(4096);
  const torch::Tensor before = torch::zeros({256});  // 1,024 bytes, made before the window
  CHECK(b.high_water() == 1024);
  torch::Tensor state, kept;
  {
    remat::libtorch::state_window window(2048);     // room for 2,048 bytes of state besides 4,096
    torch::Tensor transient = torch::zeros({512});  // 2,048 bytes
    state = torch::zeros({512});                    // 2,048 bytes: in use 5,120 > 4,096
    transient = torch::Tensor();
    kept = torch::zeros({128});  // 512 bytes, still the op's
    CHECK(b.in_use() == 1024 + 2048 + 512);
    CHECK(b.high_water() == 1024 + 2048 + 2048);
    CHECK(window.close({state, before}) == 2048 + 1024);
  }
  // Replayed without the state: the transient's 2,048 beside the first 1,024 (then 512 more).
  CHECK(b.high_water() == 1024 + 2048);
  CHECK(b.in_use() == 512);
  state = torch::Tensor();  // no longer counted: freeing it changes nothing
  CHECK(b.in_use() == 512);
  {
    const remat::libtorch::state_window window(0);  // closed with nothing on leaving the scope
    CHECK_THROWS_AS(remat::libtorch::state_window(0), std::logic_error);
  }
  CHECK_THROWS_AS(torch::zeros({1024}), remat::exec::out_of_budget);
}

TEST_CASE("raw allocations through the counting allocator are freed, counted or not") {
  // LibTorch's kernels also take raw memory (Allocator::raw_allocate / raw_deallocate). 64 MiB is
  // above glibc's largest mmap threshold, so a leak would stay in mallinfo2().hblkhd.
  constexpr std::size_t n = std::size_t{64} << 20;
  backend b;
  c10::Allocator* a = c10::GetCPUAllocator();
  const auto mapped = mallinfo2().hblkhd;
  void* p = a->raw_allocate(n);
  CHECK(b.in_use() == static_cast<remat::bytes>(n));
  a->raw_deallocate(p);
  CHECK(b.in_use() == 0);
  {
    const remat::libtorch::uncounted outside;
    void* q = a->raw_allocate(n);
    CHECK(b.in_use() == 0);
    a->raw_deallocate(q);
  }
  CHECK(mallinfo2().hblkhd == mapped);
}

TEST_SUITE_END();
