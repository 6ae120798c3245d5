// The executor on a GPU, with examples/cuda's GPT-2-style model:
//
//   BM_Gpu_HandWritten       store-all written by hand over the same layers (gpt::backprop)
//   BM_Gpu_Executor/100      the store-all schedule through remat::exec::executor (the overhead
//                            of the executor itself: target within 2% of the hand-written loop)
//   BM_Gpu_Rotor/P           rotor with a budget of P% of the store-all activation peak
//                            (P = 100, 50, 25); counters: planned and measured peak (MiB), the
//                            predicted time, and the overhead against BM_Gpu_Executor/100 when it
//                            ran first in the same process
//
// Times are wall-clock seconds per training step with the device synchronised before and after
// (manual time), so they are the GPU's work plus the launches. The model is profiled once
// (CUDA-event timings). Defaults are GPT-2 small on an H100 (12 layers, width 768, 12 heads,
// seq 512, batch 8, vocab 50257); shrink with the demo's flags before Google Benchmark's own:
//
//   bench_gpu [--layers N] [--width C] [--heads H] [--seq T] [--batch B] [--vocab V] [--tf32]
//             [--benchmark_...]
//
// Without a CUDA device it prints why and exits 77, as the GPU tests do.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>
#include <cuda/model.hpp>

#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/cuda/device.hpp>
#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/store_all.hpp>

namespace {

constexpr std::uint64_t seed = 7;

/// The model, its profiled chain and the memory the pools may take, set up once in main.
struct setup {
  gpt::config cfg;
  std::shared_ptr<gpt::blas> cublas;
  gpt::model m;
  remat::chain chain;
  remat::bytes peak = 0;                    ///< the store-all peak
  remat::bytes large_pool = 0;              ///< for the hand-written loop and store-all
  std::optional<double> store_all_seconds;  ///< BM_Gpu_Executor/100's time, for the overheads
};
setup* the_setup = nullptr;

double mib(remat::bytes b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

/// Times steps: the batch is loaded untimed, the device synchronised around each step. Returns
/// the median step time in seconds (0 when a step failed).
template <class Step>
double timed_steps(benchmark::State& state, gpt::backend& b, Step step) {
  setup& s = *the_setup;
  const gpt::token_batch tb = gpt::make_batch(s.cfg, seed);
  std::vector<double> times;
  for (auto _ : state) {
    gpt::zero_grad(s.m);
    gpt::tensor x = gpt::load_batch(s.m, s.cfg, tb, b);
    b.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    if (!step(std::move(x))) return 0.0;
    b.synchronize();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    state.SetIterationTime(times.back());
  }
  if (times.empty()) return 0.0;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void BM_Gpu_HandWritten(benchmark::State& state) {
  setup& s = *the_setup;
  gpt::backend b(s.large_pool);
  gpt::bind(s.m, b);
  timed_steps(state, b, [&](gpt::tensor x) {
    benchmark::DoNotOptimize(gpt::backprop(s.m, x, b));
    return true;
  });
  state.counters["measured_peak_MiB"] = mib(b.high_water());
}

/// The executor: store-all's schedule, or rotor's, at range(0)% of the store-all peak.
void run_executor(benchmark::State& state, bool rotor) {
  setup& s = *the_setup;
  const long pct = state.range(0);
  const remat::bytes budget = s.peak * pct / 100;
  auto plan =
      rotor ? remat::rotor{}.solve(s.chain, budget) : remat::store_all{}.solve(s.chain, budget);
  if (!plan) {
    state.SkipWithError(plan.message().c_str());
    return;
  }
  // The pool: the budget, plus 5% and 1 MiB for the 256-byte alignment and fragmentation.
  gpt::backend b(static_cast<remat::bytes>(static_cast<double>(budget) * 1.05) + (1 << 20));
  gpt::bind(s.m, b);
  remat::exec::executor ex(s.m, s.chain, b);
  remat::bytes measured = 0;
  const double median = timed_steps(state, b, [&](gpt::tensor x) {
    auto run = ex.run(*plan, std::move(x));
    if (!run) {
      state.SkipWithError(run.message().c_str());
      return false;
    }
    measured = std::max(measured, run->measured_peak);
    return true;
  });
  state.counters["budget_MiB"] = mib(budget);
  state.counters["planned_peak_MiB"] = mib(plan->predicted_peak);
  state.counters["measured_peak_MiB"] = mib(measured);
  state.counters["pool_extent_MiB"] = mib(b.extent_high_water());
  state.counters["predicted_s"] = plan->predicted_time;
  if (median <= 0.0) return;
  if (!rotor)
    s.store_all_seconds = median;
  else if (s.store_all_seconds)
    state.counters["overhead_pct"] = 100.0 * (median / *s.store_all_seconds - 1.0);
}

void BM_Gpu_Executor(benchmark::State& state) { run_executor(state, false); }
void BM_Gpu_Rotor(benchmark::State& state) { run_executor(state, true); }

/// Takes the model's flags out of argv (Google Benchmark rejects what it does not know).
gpt::config parse_model_flags(int& argc, char** argv) {
  gpt::config c;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    int* field = a == "--layers"  ? &c.layers
                 : a == "--width" ? &c.width
                 : a == "--heads" ? &c.heads
                 : a == "--seq"   ? &c.seq
                 : a == "--batch" ? &c.batch
                 : a == "--vocab" ? &c.vocab
                                  : nullptr;
    if (a == "--tf32") {
      c.tf32 = true;
    } else if (field != nullptr) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_gpu: missing value after %s\n", argv[i]);
        std::exit(2);
      }
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 0 || v > 1 << 24) {
        std::fprintf(stderr, "bench_gpu: bad value for %s: %s\n", argv[i - 1], argv[i]);
        std::exit(2);
      }
      *field = static_cast<int>(v);
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const gpt::config cfg = parse_model_flags(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (remat::cuda::device_count() == 0) {
    std::fprintf(stderr, "bench_gpu: no CUDA device (no GPU, or no driver); nothing to measure\n");
    return 77;
  }
  try {
    cfg.validate();
    setup s{cfg, std::make_shared<gpt::blas>(cfg.tf32), {}, {}, 0, 0, std::nullopt};
    s.m = gpt::make_gpt(cfg, seed, s.cublas);
    std::size_t free_bytes = 0, total_bytes = 0;
    REMAT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    s.large_pool = static_cast<remat::bytes>(static_cast<double>(free_bytes) * 0.85);
    {
      gpt::backend b(s.large_pool);
      gpt::bind(s.m, b);
      const gpt::tensor x = gpt::load_batch(s.m, cfg, gpt::make_batch(cfg, seed), b);
      auto c =
          remat::exec::profile_chain(s.m, x, b, {.repetitions = 5, .warmup = 2, .name = "gpt"});
      if (!c) {
        std::fprintf(stderr, "bench_gpu: %s\n", c.message().c_str());
        return 1;
      }
      s.chain = *c;
    }
    s.peak = remat::store_all{}.solve(s.chain, remat::unlimited_bytes)->predicted_peak;
    the_setup = &s;
    benchmark::RegisterBenchmark("BM_Gpu_HandWritten", BM_Gpu_HandWritten)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_Gpu_Executor", BM_Gpu_Executor)
        ->Arg(100)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_Gpu_Rotor", BM_Gpu_Rotor)
        ->Arg(100)
        ->Arg(50)
        ->Arg(25)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    the_setup = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
