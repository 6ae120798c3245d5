// remat-pipeline-demo: the Eigen residual model trained by a pipelined plan over MPI ranks
// (remat/dist/mpi.hpp). Rank 0 profiles the model (every rank measures the same sizes; rank 0's
// times go to all, so that every rank plans the same), the layers get weight_bytes from their
// parameters, the chain is cut into one contiguous stage per rank balanced by work, and
// 1F1B* (Alg. 7) plans it. Then a few training steps; each rank also trains a single-process
// copy of the model on the same micro-batches, accumulated in the same order, and compares its
// own stages' gradients and parameters bit for bit. Rank 0 prints, per rank: planned and
// measured peak, planned and measured time per mini-batch (training step), and the comparison.
//
//   mpirun -np 4 --oversubscribe --allow-run-as-root build/examples/remat-pipeline-demo
//   options: --depth D --width W --hidden H --batch B --micro-batches N --steps S --dropout P

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <eigen/models.hpp>
#include <eigen/wire.hpp>

#include <remat/dist/mpi.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>

namespace {

struct demo_options {
  int depth = 6;
  eg::index width = 64, hidden = 256, batch = 16;
  int micro_batches = 8;
  int steps = 3;
  float dropout = 0.1f;
};

/// The last layer of each of `parts` contiguous stages, the largest stage work (F + B) as small
/// as it can be (the linear-partition DP).
std::vector<int> balanced_lasts(const remat::chain& c, int parts) {
  const int n = c.length();
  std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0);
  for (int l = 1; l <= n; ++l)
    prefix[static_cast<std::size_t>(l)] =
        prefix[static_cast<std::size_t>(l - 1)] + c.uf(l) + c.ub(l);
  const double inf = std::numeric_limits<double>::infinity();
  // best[p][l]: layers 1..l in p stages; cut[p][l]: the last layer of stage p - 1.
  std::vector<std::vector<double>> best(static_cast<std::size_t>(parts) + 1,
                                        std::vector<double>(static_cast<std::size_t>(n) + 1, inf));
  std::vector<std::vector<int>> cut(best.size(),
                                    std::vector<int>(static_cast<std::size_t>(n) + 1, 0));
  best[0][0] = 0;
  for (int p = 1; p <= parts; ++p)
    for (int l = p; l <= n; ++l)
      for (int j = p - 1; j < l; ++j) {
        const double w =
            std::max(best[static_cast<std::size_t>(p - 1)][static_cast<std::size_t>(j)],
                     prefix[static_cast<std::size_t>(l)] - prefix[static_cast<std::size_t>(j)]);
        if (w < best[static_cast<std::size_t>(p)][static_cast<std::size_t>(l)]) {
          best[static_cast<std::size_t>(p)][static_cast<std::size_t>(l)] = w;
          cut[static_cast<std::size_t>(p)][static_cast<std::size_t>(l)] = j;
        }
      }
  std::vector<int> lasts(static_cast<std::size_t>(parts));
  for (int p = parts, l = n; p >= 1; --p) {
    lasts[static_cast<std::size_t>(p - 1)] = l;
    l = cut[static_cast<std::size_t>(p)][static_cast<std::size_t>(l)];
  }
  return lasts;
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
  int first, last, bitwise;
  double loss;
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
  // The plan: contiguous stages balanced by work, 1F1B* at the smallest period that fits.
  auto plan =
      remat::one_f_one_b_star_fit(problem, remat::contiguous_stages(balanced_lasts(*c, size)));
  if (!plan) {
    if (rank == 0) std::fprintf(stderr, "remat-pipeline-demo: %s\n", plan.message().c_str());
    return 1;
  }

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
    const auto& first = plan->stages[static_cast<std::size_t>(r->stages.front() - 1)];
    const auto& last = plan->stages[static_cast<std::size_t>(r->stages.back() - 1)];
    for (int l = first.first; l <= last.last; ++l) {
      auto p = model[static_cast<std::size_t>(l - 1)]->parameters();
      auto q = reference[static_cast<std::size_t>(l - 1)]->parameters();
      for (std::size_t k = 0; k < p.size(); ++k)
        same = same && eg::bitwise_equal(p[k].grad, q[k].grad);
    }
    eg::sgd_step(reference, 0.01f);
    for (int l = first.first; l <= last.last; ++l) {
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
           first.first,
           last.last,
           (step == 0 ? 1 : row.bitwise) & (same ? 1 : 0),
           r->loss.value_or(0)};
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
    std::printf(
        "plan: 1F1B* (Alg. 7), period %.3g ms (k = %d), %d micro-batches per step, %d steps; "
        "figures of the last step\n",
        plan->normalized_period() * 1e3, plan->k, o.micro_batches, o.steps);
    std::printf("%4s %8s %14s %14s %14s %12s %12s %8s\n", "rank", "layers", "plan tensors",
                "measured", "plan weights", "plan ms/step", "ms/step", "bitwise");
    bool all = true;
    for (int i = 0; i < size; ++i) {
      const demo_row& w = rows[static_cast<std::size_t>(i)];
      std::printf("%4d %3d..%-4d %14lld %14lld %14lld %12.3f %12.3f %8s\n", i, w.first, w.last,
                  w.planned_peak - w.planned_weights, w.measured_peak, w.planned_weights,
                  w.planned_time * 1e3, w.measured_time * 1e3, w.bitwise ? "yes" : "NO");
      all = all && w.bitwise == 1;
    }
    std::printf("loss (sum over the last step's micro-batches): %.6f\n",
                rows[static_cast<std::size_t>(size - 1)].loss);
    std::printf("%s\n", all ? "all ranks bitwise equal to single-process training"
                            : "some rank differs from single-process training");
    return all ? 0 : 1;
  }
  return 0;
}
