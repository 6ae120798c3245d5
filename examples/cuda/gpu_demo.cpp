// remat-gpu-demo: a GPT-2-style transformer (examples/cuda/) profiled, planned and trained under
// GPU memory budgets, the CUDA counterpart of remat-demo.
//
// It profiles the model through the CUDA backend (CUDA-event timings), trains a few SGD steps by
// hand with plain store-all backprop (the reference, and the hand-written loop the executor is
// compared with), then, for store-all and each policy at budgets from rotor's minimum to the
// store-all peak (and rotor at 100%, 50% and 25% of that peak), trains the same steps from the
// same weights with the executor inside a backend whose device pool is the budget. For each it
// prints: the planned and measured peak (the bytes the layers held at once, and the pool's
// extent with alignment and fragmentation), the predicted and measured time per step, the
// overhead against store-all, and whether every step's loss and parameter gradients equal those
// of plain training bit for bit. Exits 77 when there is no CUDA device, 1 when a row's
// gradients differ or a run fails, 2 on bad usage.
//
//   remat-gpu-demo [--layers N] [--width C] [--heads H] [--seq T] [--batch B] [--vocab V]
//                  [--steps K] [--budgets K] [--pool-slack F] [--tf32] [--device D] [--json]

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <cuda/model.hpp>

#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/cuda/device.hpp>
#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/periodic.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/rotor_floating.hpp>
#include <remat/policy/store_all.hpp>

namespace {

constexpr const char* usage_text =
    "usage: remat-gpu-demo [--layers N] [--width C] [--heads H] [--seq T] [--batch B] [--vocab V]\n"
    "                      [--steps K] [--budgets K] [--pool-slack F] [--tf32] [--device D] "
    "[--json]\n"
    "defaults: GPT-2 small on an H100: --layers 12 --width 768 --heads 12 --seq 512 --batch 8\n"
    "          --vocab 50257 --steps 3 --budgets 5 --pool-slack 0.05\n";

struct options {
  gpt::config model;
  int steps = 3, budgets = 5, device = 0;
  double pool_slack = 0.05;
  bool json = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "remat-gpu-demo: %s\n%s", why.c_str(), usage_text);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage("missing value after " + std::string(a));
      return argv[++i];
    };
    auto integer = [&](int lo) {
      const char* v = value();
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (*end != '\0' || x < lo || x > 1 << 24)
        usage("bad value for " + std::string(a) + ": " + v);
      return static_cast<int>(x);
    };
    if (a == "--json")
      o.json = true;
    else if (a == "--tf32")
      o.model.tf32 = true;
    else if (a == "--layers")
      o.model.layers = integer(0);
    else if (a == "--width")
      o.model.width = integer(1);
    else if (a == "--heads")
      o.model.heads = integer(1);
    else if (a == "--seq")
      o.model.seq = integer(1);
    else if (a == "--batch")
      o.model.batch = integer(1);
    else if (a == "--vocab")
      o.model.vocab = integer(2);
    else if (a == "--steps")
      o.steps = integer(1);
    else if (a == "--budgets")
      o.budgets = integer(2);
    else if (a == "--device")
      o.device = integer(0);
    else if (a == "--pool-slack") {
      const char* v = value();
      char* end = nullptr;
      o.pool_slack = std::strtod(v, &end);
      if (*end != '\0' || o.pool_slack < 0 || o.pool_slack > 1)
        usage("--pool-slack takes a fraction in [0, 1]");
    } else if (a == "-h" || a == "--help") {
      std::printf("%s", usage_text);
      std::exit(0);
    } else {
      usage("unknown option " + std::string(a));
    }
  }
  try {
    o.model.validate();
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  return o;
}

constexpr std::uint64_t seed = 2026;
constexpr float learning_rate = 1e-3f;

gpt::token_batch batch_of_step(const options& o, int k) {
  return gpt::make_batch(o.model, seed + 1 + static_cast<std::uint64_t>(k));
}

double mib(remat::bytes b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// What plain training gives, step by step: the loss and every parameter gradient.
struct step_record {
  float loss = 0;
  std::vector<float> grads;
};

struct row {
  std::string policy;
  remat::bytes budget = 0;
  std::string status = "ok";
  remat::bytes planned_peak = 0, measured_peak = 0, pool_extent = 0;
  double predicted = 0, measured = 0;
  bool match = false;
  bool failed = false;  ///< planned, but the run failed (not a mere "budget too small")
};

/// The demo's state: one model, trained from the same weights for every row.
struct demo {
  options o;
  std::shared_ptr<gpt::blas> cublas;
  gpt::model m;
  std::vector<float> initial;
  remat::bytes pool_bytes = 0;  ///< what the profiling and reference pools get

  /// A backend whose pool holds `budget` bytes plus the slack for alignment and fragmentation.
  [[nodiscard]] std::unique_ptr<gpt::backend> backend_for(remat::bytes budget) {
    const auto pool =
        static_cast<remat::bytes>(static_cast<double>(budget) * (1.0 + o.pool_slack)) + (1 << 20);
    auto b = std::make_unique<gpt::backend>(pool, o.device);
    gpt::bind(m, *b);
    return b;
  }

  /// Plain training from the initial weights: the reference, and the hand-written loop's time.
  std::vector<step_record> plain_training(double& loop_time) {
    auto b = std::make_unique<gpt::backend>(pool_bytes, o.device);
    gpt::bind(m, *b);
    gpt::set_parameters(m, initial);
    std::vector<step_record> out;
    std::vector<double> times;
    for (int k = 0; k < o.steps; ++k) {
      gpt::zero_grad(m);
      const gpt::tensor x = gpt::load_batch(m, o.model, batch_of_step(o, k), *b);
      b->synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      const float loss = gpt::backprop(m, x, *b);
      b->synchronize();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      out.push_back({loss, gpt::flat_gradients(m)});
      gpt::sgd_step(m, learning_rate);
    }
    loop_time = median(times);
    return out;
  }

  /// Trains o.steps steps of the schedule with the executor, from the initial weights, inside a
  /// pool for the budget; compares each step with the reference.
  row train(const remat::chain& c, const remat::schedule& s, std::string policy,
            remat::bytes budget, const std::vector<step_record>& reference) {
    row r{
        std::move(policy), budget, "ok", s.predicted_peak, 0, 0, s.predicted_time, 0, true, false};
    try {
      auto b = backend_for(budget);
      gpt::set_parameters(m, initial);
      remat::exec::executor ex(m, c, *b);
      std::vector<double> times;
      for (int k = 0; k < o.steps; ++k) {
        gpt::zero_grad(m);
        gpt::tensor x = gpt::load_batch(m, o.model, batch_of_step(o, k), *b);
        b->synchronize();
        b->reset_high_water();
        const auto t0 = std::chrono::steady_clock::now();
        auto run = ex.run(s, std::move(x));
        b->synchronize();
        times.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (!run) {
          r.status = std::string(remat::to_string(run.code())) + ": " + run.message();
          r.match = false;
          r.failed = true;
          return r;
        }
        const auto& ref = reference[static_cast<std::size_t>(k)];
        r.match = r.match && gpt::loss_layer(m).last_value() == ref.loss &&
                  gpt::flat_gradients(m) == ref.grads;
        r.measured_peak = std::max(r.measured_peak, run->measured_peak);
        r.pool_extent = std::max(r.pool_extent, b->extent_high_water());
        gpt::sgd_step(m, learning_rate);
      }
      r.measured = median(times);
      if (r.measured_peak > budget) {
        r.status = "measured peak " + std::to_string(r.measured_peak) + " B over the budget";
        r.failed = true;
      }
    } catch (const std::exception& e) {
      r.status = std::string("error: ") + e.what();
      r.match = false;
      r.failed = true;
    }
    return r;
  }
};

void print_json(const std::vector<row>& rows) {
  std::printf("[");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    if (r.status == "ok")
      std::printf(
          "%s\n {\"policy\":\"%s\",\"budget_bytes\":%lld,\"planned_peak_bytes\":%lld,"
          "\"measured_peak_bytes\":%lld,\"pool_extent_bytes\":%lld,\"predicted_time_s\":%.6g,"
          "\"measured_time_s\":%.6g,\"gradients_match\":%s}",
          i ? "," : "", r.policy.c_str(), static_cast<long long>(r.budget),
          static_cast<long long>(r.planned_peak), static_cast<long long>(r.measured_peak),
          static_cast<long long>(r.pool_extent), r.predicted, r.measured,
          r.match ? "true" : "false");
    else {
      std::string msg;  // JSON-escape the status
      for (char ch : r.status) {
        if (ch == '"' || ch == '\\') msg += '\\';
        msg += ch == '\n' ? ' ' : ch;
      }
      std::printf(
          "%s\n {\"policy\":\"%s\",\"budget_bytes\":%lld,\"planned_peak_bytes\":null,"
          "\"measured_peak_bytes\":null,\"pool_extent_bytes\":null,\"predicted_time_s\":null,"
          "\"measured_time_s\":null,\"gradients_match\":%s,\"status\":\"%s\"}",
          i ? "," : "", r.policy.c_str(), static_cast<long long>(r.budget),
          r.failed ? "false" : "null", msg.c_str());
    }
  }
  std::printf("\n]\n");
}

int run_demo(const options& o) {
  demo d{o, nullptr, {}, {}, 0};
  REMAT_CUDA_CHECK(cudaSetDevice(o.device));
  d.cublas = std::make_shared<gpt::blas>(o.model.tf32);
  d.m = gpt::make_gpt(o.model, seed, d.cublas);
  d.initial = gpt::flat_parameters(d.m);
  // The pools of the profiling and reference runs take most of what the weights left free.
  std::size_t free_bytes = 0, total_bytes = 0;
  REMAT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  d.pool_bytes = static_cast<remat::bytes>(static_cast<double>(free_bytes) * 0.85);

  remat::chain c;
  {
    auto b = std::make_unique<gpt::backend>(d.pool_bytes, o.device);
    gpt::bind(d.m, *b);
    const gpt::tensor x = gpt::load_batch(d.m, o.model, batch_of_step(o, 0), *b);
    auto profiled =
        remat::exec::profile_chain(d.m, x, *b, {.repetitions = 3, .warmup = 1, .name = "gpt"});
    if (!profiled) {
      std::fprintf(stderr, "remat-gpu-demo: %s\n", profiled.message().c_str());
      return 1;
    }
    c = *profiled;
  }
  double loop_time = 0;
  const auto reference = d.plain_training(loop_time);
  const remat::bytes peak = remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_peak;
  const remat::bytes lo = remat::rotor{}.minimum_budget(c);
  if (peak > d.pool_bytes) {
    std::fprintf(
        stderr,
        "remat-gpu-demo: the store-all peak (%.1f MiB) does not fit the device's free memory; "
        "shrink the model (--batch, --seq, --layers)\n",
        mib(peak));
    return 1;
  }
  const bool floating = c.length() <= 24;

  std::vector<row> rows;
  auto add = [&](const auto& policy, remat::bytes budget) {
    auto s = policy.solve(c, budget);
    if (!s) {
      rows.push_back({std::string(policy.name), budget, std::string(remat::to_string(s.code())), 0,
                      0, 0, 0, 0, false, false});
      return;
    }
    rows.push_back(d.train(c, *s, std::string(policy.name), budget, reference));
  };
  add(remat::store_all{}, peak);
  const double store_all_time = rows.front().measured;
  for (int i = 0; i < o.budgets; ++i) {
    const remat::bytes budget = lo + (peak - lo) * i / (o.budgets - 1);
    add(remat::periodic{}, budget);
    add(remat::revolve{}, budget);
    add(remat::rotor{}, budget);
    if (floating) add(remat::rotor_floating{}, budget);
  }
  // The reference figures: rotor at fixed fractions of the store-all activation peak.
  for (int pct : {100, 50, 25}) add(remat::rotor{}, peak * pct / 100);

  if (o.json) {
    print_json(rows);
  } else {
    cudaDeviceProp prop{};
    REMAT_CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
    std::printf(
        "remat GPU demo on %s: GPT-2-style, %d layers, width %d, %d heads, seq %d, batch %d, vocab "
        "%d "
        "(%.1f M parameters, %s GEMMs)\n",
        prop.name, o.model.layers, o.model.width, o.model.heads, o.model.seq, o.model.batch,
        o.model.vocab, static_cast<double>(gpt::parameter_count(d.m)) / 1e6,
        o.model.tf32 ? "TF32" : "FP32");
    std::printf(
        "%d stages profiled with CUDA events; store-all peak %.1f MiB; rotor needs at least %.1f "
        "MiB; "
        "%d SGD steps per row, times per step (median)\n",
        c.length(), mib(peak), mib(lo), o.steps);
    std::printf("hand-written store-all loop %.4f s; executor store-all %.4f s (%+.2f%%)\n\n",
                loop_time, store_all_time, 100.0 * (store_all_time / loop_time - 1.0));
    std::printf("%-15s %10s %12s %12s %10s %11s %11s %9s  %s\n", "policy", "budget MiB",
                "planned MiB", "measured MiB", "pool MiB", "predicted s", "measured s", "overhead",
                "gradients");
    for (const row& r : rows) {
      if (r.status != "ok") {
        std::printf("%-15s %10.1f  %s\n", r.policy.c_str(), mib(r.budget), r.status.c_str());
        continue;
      }
      std::printf("%-15s %10.1f %12.1f %12.1f %10.1f %11.4f %11.4f %+8.1f%%  %s\n",
                  r.policy.c_str(), mib(r.budget), mib(r.planned_peak), mib(r.measured_peak),
                  mib(r.pool_extent), r.predicted, r.measured,
                  100.0 * (r.measured / store_all_time - 1.0),
                  r.match ? "bitwise equal" : "DIFFER");
    }
  }
  bool ok = true;
  for (const row& r : rows) ok = ok && !r.failed && (r.status != "ok" || r.match);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  if (remat::cuda::device_count() == 0) {
    std::fprintf(stderr, "remat-gpu-demo: no CUDA device (no GPU, or no driver); nothing to run\n");
    return 77;
  }
  if (o.device >= remat::cuda::device_count())
    usage("--device " + std::to_string(o.device) + ": no such device");
  try {
    return run_demo(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remat-gpu-demo: %s\n", e.what());
    return 1;
  }
}
