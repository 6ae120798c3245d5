// remat::libtorch on the host: a LibTorch model's training step by a plan against plain
// LibTorch's, on examples/torch's ResNet-18-like network (width 32, 8 images of 32x32, 10 classes).
//
//   BM_plain            plain LibTorch: zero_grad, forward of the whole Sequential, loss, backward
//   BM_remat/100        the store-all schedule through remat::exec::executor and the counting
//                       backend (the adapter's own cost)
//   BM_remat/P          rotor at P% of the store-all activation peak; the counter
//                       `predicted_overhead` is the plan's time against store-all's, from the
//                       profile, to set beside the measured ratio to BM_plain
// Every step is the same batch; the optimizer is left out of both.

#include <benchmark/benchmark.h>
#include <torch/models.hpp>
#include <torch/nn.h>
#include <torch/plain.hpp>

#include <remat/remat.hpp>
#include <remat/torch.hpp>

namespace {

namespace tnn = torch::nn;
namespace models = remat_examples::torch_models;

struct setup {
  tnn::Sequential net;
  tnn::AnyModule loss{tnn::CrossEntropyLoss()};
  torch::Tensor x, targets;
  remat::chain chain;
};

setup& problem() {
  static setup s = [] {
    torch::manual_seed(2026);
    setup p{models::resnet_like(32, 10),
            tnn::AnyModule(tnn::CrossEntropyLoss()),
            torch::randn({8, 3, 32, 32}),
            torch::randint(0, 10, {8}),
            {}};
    auto copy = models::copy_of(p.net);
    tnn::AnyModule loss = p.loss.clone();
    auto model = remat::libtorch::layers_of(copy, loss);
    remat::libtorch::backend b;
    p.chain = *remat::exec::profile_chain(model, p.x, p.targets, b,
                                          {.repetitions = 5, .warmup = 2, .name = "resnet18-like"});
    return p;
  }();
  return s;
}

void BM_plain(benchmark::State& state) {
  setup& p = problem();
  auto net = models::copy_of(p.net);
  tnn::AnyModule loss = p.loss.clone();
  for (auto _ : state) benchmark::DoNotOptimize(models::plain_step(net, loss, p.x, p.targets));
}
BENCHMARK(BM_plain)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_remat(benchmark::State& state) {
  setup& p = problem();
  const remat::chain& c = p.chain;
  const double fraction = static_cast<double>(state.range(0)) / 100.0;
  auto plan = remat::rotor{}.solve(c, remat::fraction_of_store_all(c, fraction));
  if (!plan) {
    state.SkipWithError(plan.message().c_str());
    return;
  }
  const double store_all_time = remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_time;
  auto net = models::copy_of(p.net);
  tnn::AnyModule loss = p.loss.clone();
  auto model = remat::libtorch::layers_of(net, loss);
  remat::libtorch::backend b;
  remat::exec::executor ex(model, c, b);
  remat::bytes peak = 0;
  for (auto _ : state) {
    remat::exec::zero_grad(model);
    auto r = ex.run(*plan, p.x, p.targets);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
    peak = r->measured_peak;
  }
  state.counters["predicted_overhead"] = plan->predicted_time / store_all_time - 1;
  state.counters["measured_peak_MiB"] = static_cast<double>(peak) / (1 << 20);
  state.counters["planned_peak_MiB"] = static_cast<double>(plan->predicted_peak) / (1 << 20);
}
BENCHMARK(BM_remat)->Arg(100)->Arg(60)->Arg(50)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
