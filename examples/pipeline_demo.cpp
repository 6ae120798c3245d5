// remat-pipeline-demo: the Eigen residual model trained by a pipelined plan over MPI ranks
// (remat/dist/mpi.hpp). Rank 0 profiles the model (every rank measures the same sizes; rank 0's
// times go to all, so that every rank plans the same), the layers get weight_bytes from their
// parameters, and MadPipe (phase 1: its DP, and PipeDream's partition as a candidate) plans it
// within a memory M per rank: its stages may recompute in their backwards (rotor's program) where
// storing does not fit. Then a few training steps; each rank also trains a single-process copy of
// the model on the same micro-batches, accumulated in the same order, and compares its own
// stages' gradients and parameters bit for bit. Rank 0 prints, per rank: its stages (R: one that
// recomputes), planned and measured peak, planned and measured time per mini-batch (training
// step), and the comparison.
//
//   mpirun -np 4 --oversubscribe --allow-run-as-root build/examples/remat-pipeline-demo
//   options: --depth D --width W --hidden H --batch B --micro-batches N --steps S --dropout P
//            --memory M (bytes per rank, weights included; default: halfway between the least M
//            MadPipe plans with and the least it plans with when no stage may recompute, so that
//            some stage must recompute)

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <eigen/models.hpp>
#include <eigen/wire.hpp>

#include <remat/dist/mpi.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/madpipe.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>

namespace {

struct demo_options {
  int depth = 6;
  eg::index width = 64, hidden = 256, batch = 16;
  int micro_batches = 8;
  int steps = 3;
  float dropout = 0.1f;
  remat::bytes memory = 0;  // per rank; 0: the default (see the header)
};

/// The least M with which the policy plans `p` (its budget_too_small's minimum_budget), or
/// nothing.
std::optional<remat::bytes> least_memory(const remat::madpipe<>& policy,
                                         remat::pipeline_problem p) {
  p.memory = 0;
  auto r = policy.solve(p);
  if (r || r.code() != remat::status::budget_too_small || !r.err().minimum_budget)
    return std::nullopt;
  return *r.err().minimum_budget;
}

eg::model demo_model(const demo_options& o) {
  return eg::make_residual_stack(o.depth, o.width, o.hidden, o.batch, 11, o.dropout);
}

eg::tensor demo_input(const demo_options& o, int step, int m, eg::backend& b) {
  return eg::make_input(b, o.batch, o.width, static_cast<std::uint64_t>(5000 + 1000 * step + m));
}

/// One rank's figures, gathered on rank 0.
struct demo_row {
  double planned_time, measured_time;
  long long planned_peak, planned_weights, measured_peak;
  int bitwise;
  double loss;
  char stages[48];  // "1-3R,7-8": its stages' layers, R where the stage recomputes
};

}  // namespace

int main(int argc, char** argv) {
  remat::dist::mpi_session mpi(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  demo_options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (k == "--depth")
      o.depth = static_cast<int>(v);
    else if (k == "--width")
      o.width = v;
    else if (k == "--hidden")
      o.hidden = v;
    else if (k == "--batch")
      o.batch = v;
    else if (k == "--micro-batches")
      o.micro_batches = static_cast<int>(v);
    else if (k == "--steps")
      o.steps = static_cast<int>(v);
    else if (k == "--dropout")
      o.dropout = std::strtof(argv[i + 1], nullptr);
    else if (k == "--memory")
      o.memory = static_cast<remat::bytes>(std::strtoll(argv[i + 1], nullptr, 10));
    else {
      if (rank == 0) std::fprintf(stderr, "remat-pipeline-demo: unknown option %s\n", k.c_str());
      return 2;
    }
  }

  eg::model model = demo_model(o);
  eg::model reference = demo_model(o);
  remat::exec::host_backend b, b_ref;
  // The chain: sizes measured here, times rank 0's.
  remat::exec::profile_options popt;
  popt.resolution = 1e-6;
  auto c = remat::exec::profile_chain(model, eg::make_input(b, o.batch, o.width, 1), b, popt);
  if (!c) {
    std::fprintf(stderr, "rank %d: profiling failed: %s\n", rank, c.message().c_str());
    return 1;
  }
  std::vector<double> times;
  for (const auto& s : c->stages) {
    times.push_back(s.forward_time);
    times.push_back(s.backward_time);
  }
  MPI_Bcast(times.data(), static_cast<int>(times.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  for (std::size_t i = 0; i < c->stages.size(); ++i) {
    c->stages[i].forward_time = times[2 * i];
    c->stages[i].backward_time = times[2 * i + 1];
    c->stages[i].weight_bytes =
        static_cast<remat::bytes>(model[i]->parameter_count() * sizeof(float));
  }

  remat::pipeline_problem problem;
  problem.layers = *c;
  problem.processors = size;
  if (size > problem.layers.length()) {
    if (rank == 0)
      std::fprintf(stderr, "remat-pipeline-demo: %d ranks for a model of %d layers; use fewer\n",
                   size, problem.layers.length());
    return 1;
  }
  // The plan: MadPipe within M per rank (phase 1; every rank plans the same from the same chain).
  remat::madpipe<> policy;
  std::string memory_note = "--memory";
  if (o.memory > 0) {
    problem.memory = o.memory;
  } else {
    remat::madpipe<> storing;
    storing.recompute = false;
    const auto any = least_memory(policy, problem), store = least_memory(storing, problem);
    if (any && store) {
      problem.memory = *any + (*store - *any) / 2;
      memory_note = "halfway between MadPipe's least " + std::to_string(*any) +
                    " and its least without recomputation " + std::to_string(*store);
    } else {
      problem.memory = remat::unlimited_bytes;
      memory_note = "unlimited";
    }
  }
  auto solved = policy.solve(problem);
  if (!solved) {
    if (rank == 0) std::fprintf(stderr, "remat-pipeline-demo: %s\n", solved.message().c_str());
    return 1;
  }
  const remat::pipeline_plan* plan = &solved->plan;

  remat::dist::mpi_pipeline<remat::exec::host_backend, eg::model, eg::tensor> pipe(
      MPI_COMM_WORLD, model, problem, *plan, o.micro_batches, b);
  demo_row row{};
  for (int step = 0; step < o.steps; ++step) {
    auto r = pipe.step([&](int m, eg::backend& bb) { return demo_input(o, step, m, bb); },
                       remat::dist::no_targets_fn{}, [](eg::layer& l) { l.sgd_step(0.01f); });
    if (!r) {
      std::fprintf(stderr, "rank %d: %s\n", rank, r.message().c_str());
      return 1;
    }
    eg::zero_grad(reference);
    for (int m = 0; m < o.micro_batches; ++m)
      (void)eg::backprop(reference, demo_input(o, step, m, b_ref), b_ref);
    bool same = true;
    // This rank's layers (its stages need not be contiguous).
    std::vector<int> mine;
    std::string stages;
    for (int s : r->stages) {
      const auto& st = plan->stages[static_cast<std::size_t>(s - 1)];
      for (int l = st.first; l <= st.last; ++l) mine.push_back(l);
      stages += (stages.empty() ? "" : ",") + std::to_string(st.first) + "-" +
                std::to_string(st.last) + (st.recompute ? "R" : "");
    }
    for (int l : mine) {
      auto p = model[static_cast<std::size_t>(l - 1)]->parameters();
      auto q = reference[static_cast<std::size_t>(l - 1)]->parameters();
      for (std::size_t k = 0; k < p.size(); ++k)
        same = same && eg::bitwise_equal(p[k].grad, q[k].grad);
    }
    eg::sgd_step(reference, 0.01f);
    for (int l : mine) {
      auto p = model[static_cast<std::size_t>(l - 1)]->parameters();
      auto q = reference[static_cast<std::size_t>(l - 1)]->parameters();
      for (std::size_t k = 0; k < p.size(); ++k)
        same = same && eg::bitwise_equal(p[k].value, q[k].value);
    }
    row = {r->predicted_step_time,
           r->step_time,
           static_cast<long long>(r->planned_peak),
           static_cast<long long>(r->planned_weights),
           static_cast<long long>(r->measured_peak),
           (step == 0 ? 1 : row.bitwise) & (same ? 1 : 0),
           r->loss.value_or(0),
           {}};
    std::snprintf(row.stages, sizeof(row.stages), "%s", stages.c_str());
  }

  std::vector<demo_row> rows(static_cast<std::size_t>(size));
  MPI_Gather(&row, sizeof(demo_row), MPI_BYTE, rows.data(), sizeof(demo_row), MPI_BYTE, 0,
             MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(
        "remat-pipeline-demo: residual stack of %d layers (depth %d, width %ld, hidden %ld, "
        "batch %ld, dropout %.2f) over %d ranks\n",
        problem.layers.length(), o.depth, static_cast<long>(o.width), static_cast<long>(o.hidden),
        static_cast<long>(o.batch), static_cast<double>(o.dropout), size);
    std::printf("M = %lld bytes per rank (%s)\n", static_cast<long long>(problem.memory),
                memory_note.c_str());
    std::printf(
        "plan: MadPipe (%s), period %.3g ms (k = %d), %d micro-batches per step, %d steps; "
        "figures of the last step\n",
        solved->scheduler.c_str(), plan->normalized_period() * 1e3, plan->k, o.micro_batches,
        o.steps);
    std::printf("%4s %-16s %14s %14s %14s %12s %12s %8s\n", "rank", "layers", "plan tensors",
                "measured", "plan weights", "plan ms/step", "ms/step", "bitwise");
    bool all = true;
    for (int i = 0; i < size; ++i) {
      const demo_row& w = rows[static_cast<std::size_t>(i)];
      std::printf("%4d %-16s %14lld %14lld %14lld %12.3f %12.3f %8s\n", i, w.stages,
                  w.planned_peak - w.planned_weights, w.measured_peak, w.planned_weights,
                  w.planned_time * 1e3, w.measured_time * 1e3, w.bitwise ? "yes" : "NO");
      all = all && w.bitwise == 1;
    }
    // On the rank of the last stage.
    const double loss = rows[static_cast<std::size_t>(plan->stages.back().processor)].loss;
    std::printf("loss (sum over the last step's micro-batches): %.6f\n", loss);
    std::printf("%s\n", all ? "all ranks bitwise equal to single-process training"
                            : "some rank differs from single-process training");
    return all ? 0 : 1;
  }
  return 0;
}
