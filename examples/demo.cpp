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
// pofo's rows (recompute + offload at 12 GB/s, docs/offloading.md) follow the chain policies', at
// the same budgets and below rotor's minimum, trained the same way; they add the bytes offloaded
// and the share of the copies hidden behind compute.
//
// Then a DAG model (an attention block: layer norm, q/k/v projections, attention, residual adds,
// an MLP; examples/eigen/models.hpp), profiled into a forward DAG (profile_dag), planned by
// checkmate (CBC when built in, else lp_solve; without either this part says it is skipped) at
// budgets from the smallest feasible to the store-all peak, and trained by the same executor.
//
// Last, its pictures (<remat/io/svg.hpp>): the budget -> overhead curve of every
// chain policy on the profiled chain (remat::sweep) and the memory timeline of one plan (pofo's at
// its lowest budget, transfers included; rotor's when pofo has none), as SVG files in a folder
// (--pictures DIR, default remat-demo-pictures in the working directory; --no-pictures: none).
//
//   remat-demo [--model residual|mlp] [--depth N] [--width W] [--hidden H] [--batch B]
//              [--steps K] [--dropout P] [--budgets K] [--pictures DIR | --no-pictures] [--json]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <eigen/models.hpp>

#include <remat/io/svg.hpp>
#include <remat/remat.hpp>
#include <remat/sweep.hpp>

#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
using demo_milp = remat::milp::cbc;
#elif defined(REMAT_HAS_LPSOLVE)
#include <remat/milp/lpsolve.hpp>
using demo_milp = remat::milp::lpsolve;
#endif
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
#include <remat/policy/checkmate.hpp>
#endif
#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>

namespace {

struct options {
  std::string model = "residual";
  int depth = 8, width = 256, hidden = 1024, batch = 64, steps = 3, budgets = 5;
  float dropout = 0.1f;
  bool json = false;
  std::string pictures = "remat-demo-pictures";  ///< the pictures' folder; "" = none
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "remat-demo: %s\nusage: remat-demo [--model residual|mlp] [--depth N] [--width W] "
               "[--hidden H]\n"
               "                  [--batch B] [--steps K] [--dropout P] [--budgets K]\n"
               "                  [--pictures DIR | --no-pictures] [--json]\n",
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
      if (*end != '\0' || x < lo || x > 1 << 20)
        usage(("bad value for " + std::string(a) + ": " + v).c_str());
      return static_cast<int>(x);
    };
    if (a == "--json")
      o.json = true;
    else if (a == "--no-pictures")
      o.pictures.clear();
    else if (a == "--pictures") {
      o.pictures = value();
      if (o.pictures.empty()) usage("--pictures needs a folder (or give --no-pictures)");
    } else if (a == "--model")
      o.model = value();
    else if (a == "--depth")
      o.depth = integer(1);
    else if (a == "--width")
      o.width = integer(1);
    else if (a == "--hidden")
      o.hidden = integer(1);
    else if (a == "--batch")
      o.batch = integer(1);
    else if (a == "--steps")
      o.steps = integer(1);
    else if (a == "--budgets")
      o.budgets = integer(2);
    else if (a == "--dropout") {
      const char* v = value();
      char* end = nullptr;
      o.dropout = std::strtof(v, &end);
      if (*end != '\0' || o.dropout < 0 || o.dropout >= 1)
        usage("--dropout takes a probability in [0, 1)");
    } else if (a == "-h" || a == "--help") {
      std::printf(
          "usage: remat-demo [--model residual|mlp] [--depth N] [--width W] [--hidden H] [--batch "
          "B]\n"
          "                  [--steps K] [--dropout P] [--budgets K] [--pictures DIR | "
          "--no-pictures]\n"
          "                  [--json]\n"
          "--pictures DIR: the folder of its SVG pictures (default remat-demo-pictures)\n");
      std::exit(0);
    } else {
      usage(("unknown option " + std::string(a)).c_str());
    }
  }
  if (o.model != "residual" && o.model != "mlp") usage("--model is residual or mlp");
  if (!o.pictures.empty()) {
    // Before the minutes of training, not after.
    std::error_code ec;
    std::filesystem::create_directories(o.pictures, ec);
    if (ec || !std::filesystem::is_directory(o.pictures, ec))
      usage(("--pictures: cannot create the folder '" + o.pictures + "'" +
             (ec ? ": " + ec.message() : std::string()) +
             "; give another with --pictures DIR, or --no-pictures")
                .c_str());
  }
  return o;
}

constexpr std::uint64_t seed = 2026;

eg::model build(const options& o) {
  return o.model == "mlp"
             ? eg::make_mlp(o.depth, o.width, o.batch, seed, o.dropout)
             : eg::make_residual_stack(o.depth, o.width, o.hidden, o.batch, seed, o.dropout);
}

/// What plain training gives, step by step: the loss and every parameter gradient.
struct step_record {
  float loss = 0;
  std::vector<float> grads;
};

eg::model& layers_of(eg::model& m) { return m; }
eg::model& layers_of(eg::dag& d) { return d.layers; }

/// Plain training of a model from `make` (a chain or a DAG model).
template <class Make>
std::vector<step_record> plain_training(const options& o, Make make) {
  auto m = make();
  remat::exec::host_backend b;
  std::vector<step_record> out;
  for (int k = 0; k < o.steps; ++k) {
    eg::zero_grad(layers_of(m));
    const eg::tensor x =
        eg::make_input(b, o.batch, o.width, seed + 1 + static_cast<std::uint64_t>(k));
    const float loss = eg::backprop(m, x, b);
    out.push_back({loss, eg::flat_gradients(layers_of(m))});
    eg::sgd_step(layers_of(m), 1e-3f);
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
  bool run_failed = false;  ///< a plan the executor could not train (not a policy finding no plan)
  // pofo's rows: what went to the host and back, and the share of copying hidden behind compute.
  remat::bytes offloaded = 0;
  double overlap = -1;  ///< < 0: not an offloading row
};

/// Trains o.steps steps of the schedule inside a backend limited to the budget, over a model
/// from `make`: a chain model on its chain, or a DAG model on its graph (one executor for both).
template <class Make, class Problem>
row train(const options& o, Make make, const Problem& problem, const remat::schedule& s,
          std::string policy, remat::bytes budget, const std::vector<step_record>& reference) {
  row r{std::move(policy), budget, "ok", s.predicted_peak, 0, s.predicted_time, 0, true};
  auto m = make();
  remat::exec::host_backend b(budget);
  remat::exec::executor ex(m, problem, b);
  std::vector<double> times;
  for (int k = 0; k < o.steps; ++k) {
    eg::zero_grad(layers_of(m));
    auto run =
        ex.run(s, eg::make_input(b, o.batch, o.width, seed + 1 + static_cast<std::uint64_t>(k)));
    if (!run) {
      r.status = std::string(remat::to_string(run.code())) + ": " + run.message();
      r.match = false;
      r.run_failed = true;
      return r;
    }
    const auto& ref = reference[static_cast<std::size_t>(k)];
    const auto* loss = dynamic_cast<const eg::mse_loss*>(layers_of(m).back().get());
    r.match = r.match && loss != nullptr && loss->last_value() == ref.loss &&
              eg::flat_gradients(layers_of(m)) == ref.grads;
    r.measured_peak = std::max(r.measured_peak, run->measured_peak);
    times.push_back(run->elapsed);
    eg::sgd_step(layers_of(m), 1e-3f);
  }
  std::sort(times.begin(), times.end());
  r.measured = times[times.size() / 2];
  return r;
}

double mib(remat::bytes b) { return static_cast<double>(b) / (1024.0 * 1024.0); }

/// The demo's pictures in o.pictures: the sweep's curve and one plan's memory timeline. Returns
/// the lines that name the files, or an empty list after printing why they could not be written.
std::vector<std::string> write_pictures(const options& o, const remat::chain& c,
                                        remat::bytes pofo_budget, remat::bytes rotor_budget) {
  std::vector<std::string> lines;
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "remat-demo: no pictures: %s\n", why.c_str());
    return std::vector<std::string>{};
  };
  const std::filesystem::path dir(o.pictures);
  // 8 budgets: under a second on the default model (19 stages), a few percent of the demo's time.
  auto sw = remat::sweep(c, {.budgets = 8, .hw = remat::machine::with_bandwidth(12e9)});
  if (!sw) return fail(sw.message());
  const auto curve = dir / "overhead_curve.svg";
  if (auto w = remat::io::write_text_file(curve, remat::io::overhead_curve_svg(*sw)); !w)
    return fail(w.message());
  lines.push_back(curve.string() + ": the budget -> overhead curve of " +
                  std::to_string(sw->policies.size()) + " policies at " +
                  std::to_string(sw->budgets.size()) + " budgets");
  // pofo's plan at its lowest budget (recompute and offload), else rotor's.
  const remat::pofo offloading{.hw = remat::machine::with_bandwidth(12e9)};
  auto planned = offloading.solve(c, pofo_budget);
  std::string policy = "pofo";
  remat::bytes budget = pofo_budget;
  remat::machine hw = remat::machine_of(offloading);
  if (!planned) {
    planned = remat::rotor{}.solve(c, rotor_budget);
    policy = "rotor";
    budget = rotor_budget;
    hw = {};
  }
  if (!planned) return fail(planned.message());
  const auto r = remat::sim::simulate(c, *planned, {.budget = budget, .hw = hw});
  const auto timeline = dir / ("timeline_" + policy + ".svg");
  if (auto w = remat::io::write_text_file(
          timeline,
          remat::io::memory_timeline_svg(
              r, remat::io::timeline_labels{c.name, policy, budget}.with_program(c, *planned)));
      !w)
    return fail(w.message());
  lines.push_back(timeline.string() + ": device memory over time of " + policy + "'s plan at " +
                  remat::format_bytes(budget));
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  eg::model probe = build(o);
  remat::exec::host_backend profiling;
  auto profiled =
      remat::exec::profile_chain(probe, eg::make_input(profiling, o.batch, o.width, seed),
                                 profiling, {.repetitions = 3, .warmup = 1, .name = o.model});
  if (!profiled) {
    std::fprintf(stderr, "remat-demo: %s\n", profiled.message().c_str());
    return 1;
  }
  const remat::chain& c = *profiled;
  const auto make = [&] { return build(o); };
  const auto reference = plain_training(o, make);
  const remat::bytes peak = remat::store_all{}.solve(c, remat::unlimited_bytes)->predicted_peak;
  const remat::bytes lo = remat::rotor{}.minimum_budget(c);
  const bool floating = c.length() <= 24;

  std::vector<row> rows;
  auto add = [&](const auto& policy, remat::bytes budget) {
    auto s = policy.solve(c, budget);
    if (!s) {
      rows.push_back({std::string(policy.name), budget, std::string(remat::to_string(s.code())), 0,
                      0, 0, 0, false});
      return;
    }
    rows.push_back(train(o, make, c, *s, std::string(policy.name), budget, reference));
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

  // pofo: recompute and offload (docs/offloading.md), at PCIe 3 x16's 12 GB/s each way, at the
  // same budgets and below rotor's minimum where offloading the checkpoints lets it go lower.
  // host_backend copies synchronously: its measured time is not the point, its peaks are.
  const remat::pofo offloading{.hw = remat::machine::with_bandwidth(12e9)};
  const remat::bytes pofo_lo = offloading.minimum_budget(c);
  std::vector<remat::bytes> pofo_budgets;
  if (pofo_lo < lo) pofo_budgets = {pofo_lo, pofo_lo + (lo - pofo_lo) / 2};
  for (int i = 0; i < o.budgets; ++i)
    pofo_budgets.push_back(lo + (peak - lo) * i / (o.budgets - 1));
  for (const remat::bytes budget : pofo_budgets) {
    auto p = offloading.solve_detailed(c, budget);
    if (!p) {
      rows.push_back({"pofo", budget, std::string(remat::to_string(p.code())), 0, 0, 0, 0, false});
      continue;
    }
    rows.push_back(train(o, make, c, p->program, "pofo", budget, reference));
    rows.back().offloaded = p->details.offloaded_bytes;
    rows.back().overlap = p->details.overlap();
  }

  // A DAG model: profiled into a forward DAG, planned by checkmate, run by the executor.
  const std::size_t graph_first_row = rows.size();
  double graph_store_all_time = 0;
  remat::bytes graph_peak = 0, graph_lo = 0;
  std::size_t graph_ops = 0;
#if defined(REMAT_HAS_CBC) || defined(REMAT_HAS_LPSOLVE)
  {
    // Its MLP is 2 x width wide, so that attention and the MLP weigh alike in memory.
    const auto make_dag = [&] {
      return eg::make_attention_dag(o.width, 2 * o.width, o.batch, seed);
    };
    eg::dag probe_dag = make_dag();
    graph_ops = probe_dag.ops.size();
    auto f = remat::exec::profile_dag(probe_dag, eg::make_input(profiling, o.batch, o.width, seed),
                                      profiling,
                                      {.repetitions = 3, .warmup = 1, .name = "attention block"});
    auto g = f ? remat::build_graph(*f) : remat::result<remat::graph>(f.err());
    if (!g) {
      std::fprintf(stderr, "remat-demo: %s\n", g.message().c_str());
      return 1;
    }
    const auto dag_reference = plain_training(o, make_dag);
    remat::schedule sa{remat::store_all_program(*g), g->ideal_time(), 0};
    graph_peak = sa.predicted_peak = remat::sim::simulate(*g, sa).peak;
    rows.push_back(train(o, make_dag, *g, sa, "graph store_all", graph_peak, dag_reference));
    graph_store_all_time = rows.back().measured;
    const remat::checkmate<demo_milp> cm{.time_limit = 10};
    const std::string name = "checkmate-" + std::string(demo_milp::name);
    // Budgets from 60% of the store-all peak up (the exact minimum would take a bisection of
    // MILPs).
    graph_lo = graph_peak * 3 / 5;
    for (int i = 0; i < o.budgets; ++i) {
      const remat::bytes budget = graph_lo + (graph_peak - graph_lo) * i / (o.budgets - 1);
      auto s = cm.solve(*g, budget);
      if (!s)
        rows.push_back({name, budget, std::string(remat::to_string(s.code())), 0, 0, 0, 0, false});
      else
        rows.push_back(train(o, make_dag, *g, *s, name, budget, dag_reference));
    }
  }
#endif

  if (o.json) {
    std::printf("[");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      if (r.status == "ok")
        std::printf(
            "%s\n {\"policy\":\"%s\",\"budget_bytes\":%lld,\"planned_peak_bytes\":%lld,"
            "\"measured_peak_bytes\":%lld,\"predicted_time_s\":%.6g,\"measured_time_s\":%.6g,"
            "\"gradients_match\":%s,\"peak_within_plan\":%s%s}",
            i ? "," : "", r.policy.c_str(), static_cast<long long>(r.budget),
            static_cast<long long>(r.planned_peak), static_cast<long long>(r.measured_peak),
            r.predicted, r.measured, r.match ? "true" : "false",
            r.measured_peak <= r.planned_peak ? "true" : "false",
            r.overlap < 0 ? ""
                          : (",\"offloaded_bytes\":" + std::to_string(r.offloaded) +
                             ",\"overlap\":" + std::to_string(r.overlap))
                                .c_str());
      else
        std::printf(
            "%s\n {\"policy\":\"%s\",\"budget_bytes\":%lld,\"planned_peak_bytes\":null,"
            "\"measured_peak_bytes\":null,\"predicted_time_s\":null,\"measured_time_s\":null,"
            "\"gradients_match\":null,\"status\":\"%s\",\"run_failed\":%s}",
            i ? "," : "", r.policy.c_str(), static_cast<long long>(r.budget), r.status.c_str(),
            r.run_failed ? "true" : "false");
    }
    std::printf("\n]\n");
  } else {
    std::printf(
        "remat demo: %s model, %d stages, batch %d, width %d; profiled, planned, trained %d SGD "
        "steps\n",
        o.model.c_str(), c.length(), o.batch, o.width, o.steps);
    std::printf(
        "store-all peak %.2f MiB; rotor needs at least %.2f MiB, pofo (offloading at 12 GB/s) %.2f "
        "MiB;\n"
        "times are per step (median); host copies are synchronous, so pofo's measured time is not "
        "the\n"
        "point, its planned and measured peaks are\n\n",
        mib(peak), mib(lo), mib(pofo_lo));
    std::printf("%-15s %10s %12s %12s %11s %11s %9s  %s\n", "policy", "budget MiB", "planned MiB",
                "measured MiB", "predicted s", "measured s", "overhead", "gradients");
    double baseline = store_all_time;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      if (i == graph_first_row) {
        baseline = graph_store_all_time;
        std::printf(
            "\nattention block (a DAG: q/k/v read one layer norm, two residual adds), %d ops; "
            "store-all "
            "peak %.2f MiB; checkmate from %.2f MiB\n",
            static_cast<int>(graph_ops), mib(graph_peak), mib(graph_lo));
      }
      if (r.status != "ok") {
        std::printf("%-15s %10.2f  %s%s\n", r.policy.c_str(), mib(r.budget),
                    r.run_failed ? "FAILED to train: " : "", r.status.c_str());
        continue;
      }
      std::printf("%-15s %10.2f %12.2f %12.2f %11.4f %11.4f %+8.1f%%  %s", r.policy.c_str(),
                  mib(r.budget), mib(r.planned_peak), mib(r.measured_peak), r.predicted, r.measured,
                  100.0 * (r.measured / baseline - 1.0),
                  !r.match                           ? "DIFFER"
                  : r.measured_peak > r.planned_peak ? "PEAK > PLANNED"
                                                     : "bitwise equal");
      if (r.overlap >= 0)
        std::printf("  (offloads %.2f MiB, %.0f%% hidden)", mib(r.offloaded), 100.0 * r.overlap);
      std::printf("\n");
    }
  }
#if !defined(REMAT_HAS_CBC) && !defined(REMAT_HAS_LPSOLVE)
  if (!o.json)
    std::printf(
        "\nattention block planned by checkmate: skipped (remat-demo was built without CBC or "
        "lp_solve)\n");
#endif
  if (!o.pictures.empty()) {
    // On stderr with --json, whose stdout is one JSON array.
    const auto lines = write_pictures(o, c, pofo_budgets.front(), lo + (peak - lo) / 2);
    if (lines.empty()) return 1;
    std::fprintf(o.json ? stderr : stdout, "\npictures (SVG, open in a browser):\n");
    for (const auto& l : lines) std::fprintf(o.json ? stderr : stdout, "  %s\n", l.c_str());
  }
  // Every plan must train: gradients bitwise those of plain training, the measured peak within
  // the planned one. A policy that finds no plan for a budget is not a failure (its row says
  // why); a plan the executor could not run is.
  bool all_match = true;
  for (const row& r : rows)
    all_match = all_match && !r.run_failed &&
                (r.status != "ok" || (r.match && r.measured_peak <= r.planned_peak));
  return all_match ? 0 : 1;
}
