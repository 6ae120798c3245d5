// remat-torch-demo: LibTorch models trained under memory budgets.
//
// A ResNet-18-like convolutional network and a small GPT-like decoder, written with LibTorch's
// C++ modules (examples/torch/models.hpp), are profiled into chains through remat::libtorch's
// counting backend, planned by store_all, periodic, revolve, rotor and rotor_floating at budgets
// from rotor's minimum to the store-all peak (and at 50% of it), and trained a few SGD steps by
// the executor, each step beside plain LibTorch training of a copy of the same model from the same
// weights and generator state. For each plan it prints the planned and measured peak (LibTorch's
// own bytes), the predicted overhead (the plan's time against store-all's, from the profile) and
// the measured one (the step against plain LibTorch's forward and backward), and whether the loss,
// every parameter gradient, batch norm's running statistics and the generator's state were plain
// LibTorch's, bit for bit.
//
//   remat-torch-demo [--model resnet|gpt|both] [--steps K] [--batch B] [--width W] [--image S]
//                    [--budgets K] [--threads N] [--trace FILE] [--json]
// --trace FILE writes a Chrome / Perfetto trace (remat/io/trace.hpp) of rotor's plan at 50% of the
// first model's store-all peak: the planned timeline and the measured one of its last step, as
// two processes side by side (chrome://tracing or ui.perfetto.dev).
// --threads sets LibTorch's intra-op threads: on a shared or loaded machine, 1 gives steadier
// timings (the overheads in README were measured so).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <cli.hpp>
#include <torch/nn.h>
#include <torch/optim/sgd.h>

#include <remat/io/trace.hpp>
#include <remat/remat.hpp>
#include <remat/torch.hpp>

#include "models.hpp"
#include "plain.hpp"

namespace {

namespace tnn = torch::nn;
namespace models = remat_examples::torch_models;

struct options {
  std::string model = "both";
  int steps = 3, batch = 8, width = 32, image = 32, budgets = 4;
  int threads = 0;    ///< LibTorch's intra-op threads (0: its default)
  std::string trace;  ///< where to write the trace of rotor at 50% (empty: none)
  bool json = false;
};

constexpr const char* usage_text =
    "usage: remat-torch-demo [--model resnet|gpt|both] [--steps K] [--batch B] [--width W] "
    "[--image S]\n"
    "                        [--budgets K] [--threads N] [--trace FILE] [--json]\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "remat-torch-demo: %s\n%s", why.c_str(), usage_text);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto integer = [&](int lo) {
      if (i + 1 >= argc) usage("missing value after " + std::string(a));
      char* end = nullptr;
      const long x = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || x < lo || x > 1 << 16)
        usage("bad value for " + std::string(a) + ": " + argv[i]);
      return static_cast<int>(x);
    };
    if (a == "--json")
      o.json = true;
    else if (a == "--model") {
      if (i + 1 >= argc) usage("missing value after --model");
      o.model = argv[++i];
    } else if (a == "--steps")
      o.steps = integer(1);
    else if (a == "--batch")
      o.batch = integer(1);
    else if (a == "--width")
      o.width = integer(2);
    else if (a == "--image")
      o.image = integer(8);
    else if (a == "--budgets")
      o.budgets = integer(2);
    else if (a == "--threads")
      o.threads = integer(1);
    else if (a == "--trace") {
      if (i + 1 >= argc) usage("missing value after --trace");
      o.trace = argv[++i];
      if (auto why = remat_cli::unwritable(o.trace)) usage(*why);
    } else if (a == "-h" || a == "--help") {
      std::printf("%s", usage_text);
      std::exit(0);
    } else
      usage("unknown option " + std::string(a));
  }
  if (o.model != "resnet" && o.model != "gpt" && o.model != "both")
    usage("--model is resnet, gpt or both");
  return o;
}

/// A model of the demo: the network, its loss and one batch.
struct problem {
  std::string name;
  tnn::Sequential net;
  tnn::AnyModule loss;
  torch::Tensor x, targets;
};

problem resnet(const options& o) {
  torch::manual_seed(2026);
  return {"resnet18-like", models::resnet_like(o.width, 10),
          tnn::AnyModule(tnn::CrossEntropyLoss()), torch::randn({o.batch, 3, o.image, o.image}),
          torch::randint(0, 10, {o.batch})};
}
problem gpt(const options& o) {
  torch::manual_seed(2027);
  const models::gpt_config cfg{
      .vocab = 1024, .context = 64, .width = 4 * o.width, .heads = 4, .layers = 4, .dropout = 0.1};
  return {"gpt-like", models::gpt_like(cfg), tnn::AnyModule(models::lm_loss()),
          torch::randint(0, cfg.vocab, {o.batch, cfg.context}),
          torch::randint(0, cfg.vocab, {o.batch, cfg.context})};
}

struct row {
  std::string policy;
  remat::bytes budget = 0;
  std::string status = "ok";
  remat::bytes planned_peak = 0, measured_peak = 0;
  double predicted_overhead = 0, measured_overhead = 0;
  bool bitwise = false;
  bool run_failed = false;  ///< a plan the executor could not train (not a policy finding no plan)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Trains a copy of the model by `plan` beside plain LibTorch training of another copy; returns
/// the row (measured overhead: the median step against plain LibTorch's median step).
/// `measured`: when given, the report of the last step (exec::measured_report).
row train(const options& o, const problem& p, const remat::chain& c, const remat::schedule& plan,
          std::string policy, remat::bytes budget, double store_all_time,
          remat::sim::report* measured = nullptr) {
  row r{std::move(policy),
        budget,
        "ok",
        plan.predicted_peak,
        0,
        plan.predicted_time / store_all_time - 1,
        0,
        true};
  tnn::Sequential ref = models::copy_of(p.net), mine = models::copy_of(p.net);
  tnn::AnyModule ref_loss = p.loss.clone(), my_loss = p.loss.clone();
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.01));
  torch::optim::SGD my_opt(mine->parameters(), torch::optim::SGDOptions(0.01));
  auto model = remat::libtorch::layers_of(mine, my_loss);
  remat::libtorch::backend b;
  const torch::Tensor x = p.x.clone(), targets = p.targets.clone();
  remat::exec::executor ex(model, c, b);
  b.set_budget(budget + b.in_use());  // x and the targets are already counted
  std::vector<double> plain_times, times;
  for (int step = 0; step < o.steps; ++step) {
    std::vector<std::uint8_t> plain_generator;
    double plain_loss = 0;
    {
      const remat::libtorch::uncounted plain;
      torch::manual_seed(7 + step);
      const auto t0 = std::chrono::steady_clock::now();
      plain_loss = models::plain_step(ref, ref_loss, p.x, p.targets);
      plain_times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      const torch::Tensor g = at::detail::getDefaultCPUGenerator().get_state();
      plain_generator.assign(g.data_ptr<std::uint8_t>(), g.data_ptr<std::uint8_t>() + g.nbytes());
    }
    torch::manual_seed(7 + step);
    remat::exec::zero_grad(model);
    auto run = ex.run(plan, x, targets);
    if (!run) {
      r.status = std::string(remat::to_string(run.code())) + ": " + run.message();
      r.bitwise = false;
      r.run_failed = true;
      return r;
    }
    const remat::libtorch::uncounted checks;
    const torch::Tensor g = at::detail::getDefaultCPUGenerator().get_state();
    r.bitwise =
        r.bitwise && run->loss && *run->loss == plain_loss && models::same_state(*ref, *mine) &&
        std::equal(plain_generator.begin(), plain_generator.end(), g.data_ptr<std::uint8_t>());
    r.measured_peak = std::max(r.measured_peak, run->measured_peak);
    times.push_back(run->elapsed);
    if (measured != nullptr && step + 1 == o.steps)
      *measured = *remat::exec::measured_report(plan, *run);
    ref_opt.step();
    my_opt.step();
  }
  r.measured_overhead = median(times) / median(plain_times) - 1;
  return r;
}

double mib(remat::bytes b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

/// The rows of one model; `trace`: where to write the trace of rotor at 50% (empty: none).
std::vector<row> demo(const options& o, const problem& p, remat::chain& c,
                      const std::string& trace) {
  {
    auto copy = models::copy_of(p.net);
    tnn::AnyModule loss = p.loss.clone();
    auto model = remat::libtorch::layers_of(copy, loss);
    remat::libtorch::backend b;
    auto profiled = remat::exec::profile_chain(model, p.x, p.targets, b,
                                               {.repetitions = 3, .warmup = 1, .name = p.name});
    if (!profiled) {
      std::fprintf(stderr, "remat-torch-demo: %s\n", profiled.message().c_str());
      std::exit(1);
    }
    c = std::move(*profiled);
  }
  const remat::bytes peak = remat::peak_of_store_all(c);
  const remat::bytes lo = remat::rotor{}.minimum_budget(c);
  auto store_all = remat::store_all{}.solve(c, peak);
  const double store_all_time = store_all->predicted_time;
  std::vector<row> rows;
  auto add = [&](const auto& policy, remat::bytes budget) {
    auto s = policy.solve(c, budget);
    if (!s) {
      rows.push_back({std::string(policy.name), budget, std::string(remat::to_string(s.code()))});
      return;
    }
    rows.push_back(train(o, p, c, *s, std::string(policy.name), budget, store_all_time));
  };
  add(remat::store_all{}, peak);
  std::vector<remat::bytes> budgets;
  for (int i = 0; i < o.budgets; ++i) budgets.push_back(lo + (peak - lo) * i / (o.budgets - 1));
  budgets.push_back(remat::fraction_of_store_all(c, 0.5));  // 50% of store-all's peak
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  if (!trace.empty()) {
    const remat::bytes budget = remat::fraction_of_store_all(c, 0.5);
    auto plan = remat::rotor{}.solve(c, budget);
    if (!plan) {
      std::fprintf(stderr, "remat-torch-demo: no trace: %s\n", plan.message().c_str());
    } else {
      remat::sim::report measured;
      (void)train(o, p, c, *plan, "rotor", budget, store_all_time, &measured);
      const remat::sim::report planned = remat::sim::simulate(c, *plan, {.budget = budget});
      const std::vector<remat::io::trace_process> processes = {
          remat::io::trace_of(c, *plan, planned, "planned: rotor at 50% (" + p.name + ")", budget),
          remat::io::trace_of(c, *plan, measured, "measured: rotor at 50% (" + p.name + ")",
                              budget)};
      auto json = remat::io::chrome_trace(processes);
      if (!json) {
        std::fprintf(stderr, "remat-torch-demo: %s\n", json.message().c_str());
        std::exit(1);
      }
      if (auto why = remat_cli::write_file(trace, *json)) {
        std::fprintf(stderr, "remat-torch-demo: %s\n", why->c_str());
        std::exit(1);
      }
      std::fprintf(stderr, "remat-torch-demo: wrote %s (%zu bytes)\n", trace.c_str(), json->size());
    }
  }
  for (const remat::bytes budget : budgets) {
    add(remat::periodic{}, budget);
    add(remat::revolve{}, budget);
    add(remat::rotor{}, budget);
    if (c.length() <= 24) add(remat::rotor_floating{}, budget);
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  if (o.threads > 0) torch::set_num_threads(o.threads);
  std::vector<problem> problems;
  if (o.model != "gpt") problems.push_back(resnet(o));
  if (o.model != "resnet") problems.push_back(gpt(o));
  if (o.json) std::printf("[");
  bool first = true;
  for (const problem& p : problems) {
    remat::chain c;
    const std::vector<row> rows = demo(o, p, c, &p == &problems.front() ? o.trace : std::string());
    const remat::bytes peak = remat::peak_of_store_all(c);
    if (o.json) {
      for (const row& r : rows) {
        std::printf(
            "%s\n {\"model\":\"%s\",\"policy\":\"%s\",\"budget_bytes\":%lld,\"status\":\"%s\"",
            first ? "" : ",", p.name.c_str(), r.policy.c_str(), static_cast<long long>(r.budget),
            r.run_failed ? "run_failed" : r.status.c_str());
        if (r.status == "ok")
          std::printf(
              ",\"planned_peak_bytes\":%lld,\"measured_peak_bytes\":%lld,\"predicted_overhead\":%."
              "4f,"
              "\"measured_overhead\":%.4f,\"bitwise\":%s,\"peak_within_budget\":%s",
              static_cast<long long>(r.planned_peak), static_cast<long long>(r.measured_peak),
              r.predicted_overhead, r.measured_overhead, r.bitwise ? "true" : "false",
              r.measured_peak <= r.budget ? "true" : "false");
        std::printf("}");
        first = false;
      }
      continue;
    }
    std::printf(
        "%s: %d stages, store-all activation peak %.2f MiB, rotor's minimum %.2f MiB (%.0f%%)\n",
        p.name.c_str(), c.length(), mib(peak), mib(remat::rotor{}.minimum_budget(c)),
        100.0 * static_cast<double>(remat::rotor{}.minimum_budget(c)) / static_cast<double>(peak));
    std::printf("  %-15s %9s %5s %10s %10s %10s %10s  %s\n", "policy", "budget", "%", "planned",
                "measured", "predicted", "measured", "bitwise");
    std::printf("  %-15s %9s %5s %10s %10s %10s %10s\n", "", "MiB", "", "peak MiB", "peak MiB",
                "overhead", "overhead");
    for (const row& r : rows) {
      const double pct = 100.0 * static_cast<double>(r.budget) / static_cast<double>(peak);
      if (r.status != "ok") {
        std::printf("  %-15s %9.2f %4.0f%% %s\n", r.policy.c_str(), mib(r.budget), pct,
                    r.status.c_str());
        continue;
      }
      std::printf("  %-15s %9.2f %4.0f%% %10.2f %10.2f %+9.1f%% %+9.1f%%  %s\n", r.policy.c_str(),
                  mib(r.budget), pct, mib(r.planned_peak), mib(r.measured_peak),
                  100 * r.predicted_overhead, 100 * r.measured_overhead, r.bitwise ? "yes" : "NO");
    }
    std::printf(
        "  (measured overhead: remat's step against plain LibTorch's forward and backward, medians "
        "of %d steps;\n"
        "   predicted: the plan's time against store-all's, from the profile)\n\n",
        o.steps);
  }
  if (o.json) std::printf("\n]\n");
}
