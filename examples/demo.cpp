// The main demo: a user's model, profiled, planned and trained under memory budgets.
//
// It builds an Eigen model (examples/eigen/: a transformer-like stack of residual MLP blocks
// with dropout, or an MLP), profiles it through the host backend, and for store-all and each
// policy, at budgets from the smallest feasible to the store-all peak, trains a few SGD steps
// on synthetic data with the executor inside a backend that enforces the budget. For each it
// prints: the planned and measured peak, the predicted and measured time per step, the
// overhead against store-all, and whether every step's loss and parameter gradients equal
// those of plain training bit for bit.
//
//   remat-demo [--model residual|mlp] [--depth N] [--width W] [--hidden H] [--batch B]
//              [--steps K] [--dropout P] [--budgets K] [--json]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <remat/remat.hpp>

#include <eigen/models.hpp>

namespace {

struct options {
  std::string model = "residual";
  int depth = 8, width = 256, hidden = 1024, batch = 64, steps = 3, budgets = 5;
  float dropout = 0.1f;
  bool json = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "remat-demo: %s\nusage: remat-demo [--model residual|mlp] [--depth N] [--width W] [--hidden H]\n"
               "                  [--batch B] [--steps K] [--dropout P] [--budgets K] [--json]\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + std::string(a)).c_str());
      return argv[++i];
    };
    auto integer = [&](int lo) {
      const char* v = value();
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (*end != '\0' || x < lo || x > 1 << 20) usage(("bad value for " + std::string(a) + ": " + v).c_str());
      return static_cast<int>(x);
    };
    if (a == "--json") o.json = true;
    else if (a == "--model") o.model = value();
    else if (a == "--depth") o.depth = integer(1);
    else if (a == "--width") o.width = integer(1);
    else if (a == "--hidden") o.hidden = integer(1);
    else if (a == "--batch") o.batch = integer(1);
    else if (a == "--steps") o.steps = integer(1);
    else if (a == "--budgets") o.budgets = integer(2);
    else if (a == "--dropout") {
      const char* v = value();
      char* end = nullptr;
      o.dropout = std::strtof(v, &end);
      if (*end != '\0' || o.dropout < 0 || o.dropout >= 1) usage("--dropout takes a probability in [0, 1)");
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: remat-demo [--model residual|mlp] [--depth N] [--width W] [--hidden H] [--batch B]\n"
                  "                  [--steps K] [--dropout P] [--budgets K] [--json]\n");
      std::exit(0);
    } else {
      usage(("unknown option " + std::string(a)).c_str());
    }
  }
  if (o.model != "residual" && o.model != "mlp") usage("--model is residual or mlp");
  return o;
}

constexpr std::uint64_t seed = 2026;

eg::model build(const options& o) {
  return o.model == "mlp" ? eg::make_mlp(o.depth, o.width, o.batch, seed, o.dropout)
                          : eg::make_residual_stack(o.depth, o.width, o.hidden, o.batch, seed, o.dropout);
}

/// What plain training gives, step by step: the loss and every parameter gradient.
struct step_record {
  float loss = 0;
  std::vector<float> grads;
};

std::vector<step_record> plain_training(const options& o) {
  eg::model m = build(o);
  remat::exec::host_backend b;
  std::vector<step_record> out;
  for (int k = 0; k < o.steps; ++k) {
    eg::zero_grad(m);
    const eg::tensor x = eg::make_input(b, o.batch, o.width, seed + 1 + static_cast<std::uint64_t>(k));
    const float loss = eg::backprop(m, x, b);
    out.push_back({loss, eg::flat_gradients(m)});
    eg::sgd_step(m, 1e-3f);
  }
  return out;
}

struct row {
  std::string policy;
  remat::bytes budget = 0;
  std::string status = "ok";
  remat::bytes planned_peak = 0, measured_peak = 0;
  double predicted = 0, measured = 0;
  bool match = false;
};

/// Trains o.steps steps of the schedule inside a backend limited to the budget.
row train(const options& o, const remat::chain& c, const remat::schedule& s, std::string policy,
          remat::bytes budget, const std::vector<step_record>& reference) {
  row r{std::move(policy), budget, "ok", s.predicted_peak, 0, s.predicted_time, 0, true};
  eg::model m = build(o);
  remat::exec::host_backend b(budget);
  remat::exec::executor ex(m, c, b);
  std::vector<double> times;
  for (int k = 0; k < o.steps; ++k) {
    eg::zero_grad(m);
    auto run = ex.run(s, eg::make_input(b, o.batch, o.width, seed + 1 + static_cast<std::uint64_t>(k)));
    if (!run) {
      r.status = std::string(remat::to_string(run.code())) + ": " + run.message();
      r.match = false;
      return r;
    }
    const auto& ref = reference[static_cast<std::size_t>(k)];
    const auto* loss = dynamic_cast<const eg::mse_loss*>(m.back().get());
    r.match = r.match && loss != nullptr && loss->last_value() == ref.loss && eg::flat_gradients(m) == ref.grads;
    r.measured_peak = std::max(r.measured_peak, run->measured_peak);
    times.push_back(run->elapsed);
    eg::sgd_step(m, 1e-3f);
  }
  std::sort(times.begin(), times.end());
  r.measured = times[times.size() / 2];
  return r;
}

double mib(remat::bytes b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  eg::model probe = build(o);
  remat::exec::host_backend profiling;
  auto profiled = remat::exec::profile(probe, eg::make_input(profiling, o.batch, o.width, seed), profiling,
                                       {.repetitions = 3, .warmup = 1, .name = o.model});
  if (!profiled) {
    std::fprintf(stderr, "remat-demo: %s\n", profiled.message().c_str());
    return 1;
  }
  const remat::chain& c = *profiled;
  const auto reference = plain_training(o);
  const remat::bytes peak = remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_peak;
  const remat::bytes lo = remat::rotor::minimum_budget(c);
  const bool floating = c.length() <= 24;

  std::vector<row> rows;
  auto add = [&](const auto& policy, remat::bytes budget) {
    auto s = policy.solve(c, budget);
    if (!s) {
      rows.push_back({std::string(policy.name), budget, std::string(remat::to_string(s.code())), 0, 0, 0, 0, false});
      return;
    }
    rows.push_back(train(o, c, *s, std::string(policy.name), budget, reference));
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

  if (o.json) {
    std::printf("[");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      if (r.status == "ok")
        std::printf("%s\n {\"policy\":\"%s\",\"budget_bytes\":%lld,\"planned_peak_bytes\":%lld,"
                    "\"measured_peak_bytes\":%lld,\"predicted_time_s\":%.6g,\"measured_time_s\":%.6g,"
                    "\"gradients_match\":%s}",
                    i ? "," : "", r.policy.c_str(), static_cast<long long>(r.budget),
                    static_cast<long long>(r.planned_peak), static_cast<long long>(r.measured_peak), r.predicted,
                    r.measured, r.match ? "true" : "false");
      else
        std::printf("%s\n {\"policy\":\"%s\",\"budget_bytes\":%lld,\"planned_peak_bytes\":null,"
                    "\"measured_peak_bytes\":null,\"predicted_time_s\":null,\"measured_time_s\":null,"
                    "\"gradients_match\":null,\"status\":\"%s\"}",
                    i ? "," : "", r.policy.c_str(), static_cast<long long>(r.budget), r.status.c_str());
    }
    std::printf("\n]\n");
  } else {
    std::printf("remat demo: %s model, %d stages, batch %d, width %d; profiled, planned, trained %d SGD steps\n",
                o.model.c_str(), c.length(), o.batch, o.width, o.steps);
    std::printf("store-all peak %.2f MiB; rotor needs at least %.2f MiB; times are per step (median)\n\n", mib(peak),
                mib(lo));
    std::printf("%-15s %10s %12s %12s %11s %11s %9s  %s\n", "policy", "budget MiB", "planned MiB", "measured MiB",
                "predicted s", "measured s", "overhead", "gradients");
    for (const row& r : rows) {
      if (r.status != "ok") {
        std::printf("%-15s %10.2f  %s\n", r.policy.c_str(), mib(r.budget), r.status.c_str());
        continue;
      }
      std::printf("%-15s %10.2f %12.2f %12.2f %11.4f %11.4f %+8.1f%%  %s\n", r.policy.c_str(), mib(r.budget),
                  mib(r.planned_peak), mib(r.measured_peak), r.predicted, r.measured,
                  100.0 * (r.measured / store_all_time - 1.0), r.match ? "bitwise equal" : "DIFFER");
    }
  }
  bool all_match = true;
  for (const row& r : rows) all_match = all_match && (r.status != "ok" || r.match);
  return all_match ? 0 : 1;
}
