// The MPI pipeline (remat/dist/mpi.hpp) under mpirun, one mode per CTest entry
// (tests/CMakeLists.txt):
//   bitwise contiguous     a 1F1B* plan over every rank: each rank's parameter gradients, over two
//                          steps, bit for bit those of one process accumulating the same
//                          micro-batches in the same order (with dropout), and the parameters
//                          after the updates
//   bitwise noncontiguous  2 ranks: stages {1, 3} on rank 0, {2} on rank 1, the same checks
//   bitwise local          2 ranks: stages {1, 2} on rank 0 (a local hand-over), {3} on rank 1
//   bitwise recompute      2 ranks, both stages recomputing (rotor's program at its least
//                          memory, which recomputes forwards of dropout layers): the same checks
//   bitwise recompute_revolve 2 ranks, as recompute with revolve's programs (any chain policy's
//                          program runs a stage)
//   bitwise recompute_local 2 ranks: stages 1 (layers 1-2, recomputing) and 2 (3-5) on rank 0,
//                          handed over locally, 3 (6-7, recomputing) on rank 1
//   bitwise LAYOUT targets the same, the loss taking each micro-batch's targets
//   doc                    docs/distributed.md's example on 2 ranks
//   mismatch               a plan for one processor more than the ranks: every rank's error
//   throw                  a layer of rank 1 throws on micro-batch 1: rank 1 prints why and aborts
//   throw recompute        the same in the F of a recomputing stage, on micro-batch 0
//   silent                 rank 1 never steps: rank 0 gives up after its timeout (1 s), aborting
//   hang                   a layer of rank 1 sleeps 5 s in micro-batch 0's forward: rank 0 gives
//                          up waiting for the gradient after its timeout (1 s), aborting
//   return                 as throw, with abort_on_error off: rank 1 returns its error, rank 0
//                          its timeout's, and both go on (a barrier after)
// Exit status 0 when the mode's expectation holds on this rank.

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <eigen/models.hpp>
#include <eigen/wire.hpp>

#include <remat/dist/mpi.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

namespace {

constexpr eg::index dist_width = 16, dist_hidden = 32, dist_batch = 4;
constexpr int dist_micro_batches = 4;
using dist_pipeline = remat::dist::mpi_pipeline<remat::exec::host_backend, eg::model, eg::tensor>;

/// An identity layer that, once armed, throws at its forward number `at` (0-based), or sleeps
/// there for `sleep` seconds when sleep > 0.
class dist_fault final : public eg::layer {
 public:
  dist_fault() : eg::layer("fault") {}
  void arm(int at, int sleep = 0) {
    throw_at_ = at;
    sleep_ = sleep;
    calls_ = 0;
  }

 private:
  eg::tensor do_forward(const eg::tensor& x, eg::backend& b) override { return run(x, b); }
  eg::tensor do_forward_save(const eg::tensor& x, eg::context&, eg::backend& b) override {
    return run(x, b);
  }
  eg::tensor do_backward(const eg::tensor&, const eg::tensor&, const eg::context&,
                         const eg::tensor& dy, eg::backend& b) override {
    return dy.clone(b);
  }
  eg::tensor run(const eg::tensor& x, eg::backend& b) {
    if (calls_++ == throw_at_ && throw_at_ >= 0) {
      if (sleep_ > 0)
        std::this_thread::sleep_for(std::chrono::seconds(sleep_));
      else
        throw std::runtime_error("the fault layer failed on purpose");
    }
    return x.clone(b);
  }
  int throw_at_ = -1;
  int sleep_ = 0;
  int calls_ = 0;
};

/// The residual stack with dropout: block1, drop1, block2, drop2, ln_f, head, loss (7 layers);
/// with a fault layer after block2 (8 layers).
eg::model dist_model(bool fault = false) {
  eg::model m = eg::make_residual_stack(2, dist_width, dist_hidden, dist_batch, 7, 0.1f);
  if (fault) m.insert(m.begin() + 3, std::make_unique<dist_fault>());
  return m;
}

/// Micro-batch m of step `step`.
eg::tensor dist_input(int step, int m, eg::backend& b) {
  return eg::make_input(b, dist_batch, dist_width,
                        static_cast<std::uint64_t>(1000 + 100 * step + m));
}

/// The model's chain, with sizes measured and fixed times (the same on every rank): layer l takes
/// times[l - 1] forward and as long backward; weight_bytes from its parameters.
remat::chain dist_chain(eg::model& m, const std::vector<double>& times) {
  remat::exec::host_backend b;
  remat::exec::profile_options opt;
  for (double t : times) opt.fixed_times.push_back({t, t});
  auto c = remat::exec::profile_chain(m, eg::make_input(b, dist_batch, dist_width, 1), b, opt);
  if (!c) throw std::runtime_error(c.message());
  for (std::size_t i = 0; i < m.size(); ++i)
    c->stages[i].weight_bytes = static_cast<remat::bytes>(m[i]->parameter_count() * sizeof(float));
  return *c;
}

int dist_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int dist_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

/// Micro-batch m's targets (a batch x width matrix) in step `step`.
eg::matrix dist_targets(int step, int m) {
  eg::matrix t(dist_batch, dist_width);
  eg::fill_synthetic(t, static_cast<std::uint64_t>(7000 + 100 * step + m));
  return t;
}

/// Plain training with the batch's targets (eg::backprop's, the loss taking them).
void dist_backprop(eg::model& m, const eg::tensor& x, const eg::matrix& t, eg::backend& b) {
  const std::size_t n = m.size();
  std::vector<eg::tensor> ys(n);
  std::vector<eg::context> ctxs(n);
  const auto input = [&](std::size_t i) -> const eg::tensor& { return i == 0 ? x : ys[i - 1]; };
  for (std::size_t i = 0; i + 1 < n; ++i) ys[i] = m[i]->forward_save(input(i), ctxs[i], b);
  ys[n - 1] = m[n - 1]->forward_save(input(n - 1), t, ctxs[n - 1], b);
  eg::tensor dy = m[n - 1]->backward(input(n - 1), ys[n - 1], ctxs[n - 1], t, b);
  for (std::size_t i = n - 1; i-- > 0;) dy = m[i]->backward(input(i), ys[i], ctxs[i], dy, b);
}

/// Two steps of the plan against a single process; true when every gradient and parameter of
/// this rank's layers is bitwise the reference's.
bool dist_bitwise(const remat::pipeline_problem& problem, const remat::pipeline_plan& plan,
                  bool targets = false) {
  const int rank = dist_rank();
  eg::model m = dist_model();
  eg::model ref = dist_model();
  remat::exec::host_backend b, b_ref;
  dist_pipeline pipe(MPI_COMM_WORLD, m, problem, plan, dist_micro_batches, b);
  bool ok = true;
  for (int step = 0; step < 2; ++step) {
    const auto input = [&](int mb, eg::backend& bb) { return dist_input(step, mb, bb); };
    const auto update = [](eg::layer& l) { l.sgd_step(0.05f); };
    auto r = targets ? pipe.step(
                           input, [&](int mb) { return dist_targets(step, mb); }, update)
                     : pipe.step(input, remat::dist::no_targets_fn{}, update);
    if (!r) {
      std::printf("rank %d: step %d failed: %s\n", rank, step, r.message().c_str());
      return false;
    }
    // The reference: micro-batches 0..n-1 accumulated by plain training, then the same update.
    eg::zero_grad(ref);
    for (int mb = 0; mb < dist_micro_batches; ++mb) {
      if (targets)
        dist_backprop(ref, dist_input(step, mb, b_ref), dist_targets(step, mb), b_ref);
      else
        (void)eg::backprop(ref, dist_input(step, mb, b_ref), b_ref);
    }
    std::size_t floats = 0;
    bool same = true;
    for (int s : r->stages) {
      const auto& st = plan.stages[static_cast<std::size_t>(s - 1)];
      for (int l = st.first; l <= st.last; ++l) {
        const auto i = static_cast<std::size_t>(l - 1);
        auto pg = m[i]->parameters();
        auto rg = ref[i]->parameters();
        for (std::size_t k = 0; k < pg.size(); ++k) {
          same = same && eg::bitwise_equal(pg[k].grad, rg[k].grad);
          floats += static_cast<std::size_t>(pg[k].grad.size());
        }
      }
    }
    eg::sgd_step(ref, 0.05f);
    for (int s : r->stages) {
      const auto& st = plan.stages[static_cast<std::size_t>(s - 1)];
      for (int l = st.first; l <= st.last; ++l) {
        const auto i = static_cast<std::size_t>(l - 1);
        auto pv = m[i]->parameters();
        auto rv = ref[i]->parameters();
        for (std::size_t k = 0; k < pv.size(); ++k)
          same = same && eg::bitwise_equal(pv[k].value, rv[k].value);
      }
    }
    std::printf(
        "rank %d: step %d: %zu gradient floats of its stages %s; peak %lld bytes (plan %lld "
        "+ weights %lld)%s\n",
        rank, step, floats, same ? "bitwise equal" : "DIFFER",
        static_cast<long long>(r->measured_peak),
        static_cast<long long>(r->planned_peak - r->planned_weights),
        static_cast<long long>(r->planned_weights),
        r->loss ? (", loss " + std::to_string(*r->loss)).c_str() : "");
    ok = ok && same && floats > 0;
  }
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s\n", all ? "all ranks bitwise equal" : "some rank differs");
  return all == 1;
}

/// Contiguous stages balanced over `procs` processors for the 7 layers.
std::vector<int> dist_lasts(int procs) {
  switch (procs) {
    case 1:
      return {7};
    case 2:
      return {4, 7};
    case 3:
      return {2, 4, 7};
    default:
      return {2, 3, 5, 7};
  }
}

/// docs/distributed.md's example, compiled here and run by the mode "doc".
remat::result<remat::dist::step_report> dist_doc_example(int ranks, std::vector<int> lasts) {
  // --- doc docs/distributed.md begin ---
  remat::exec::host_backend backend;
  eg::model model = eg::make_residual_stack(2, 16, 32, 4, /*seed*/ 1, /*dropout*/ 0.1f);
  remat::exec::profile_options same;  // every rank must plan the same: fixed times here (or
  same.fixed_times.assign(model.size(), {1e-3, 2e-3});  // rank 0's, broadcast: the demo)
  auto c = remat::exec::profile_chain(model, eg::make_input(backend, 4, 16, 1), backend, same);
  if (!c) return c.err();
  remat::pipeline_problem problem;
  problem.layers = *c;  // the model's chain: the executor checks every tensor against its sizes
  problem.processors = ranks;
  auto plan = remat::one_f_one_b_star_fit(problem, remat::contiguous_stages(lasts));
  if (!plan) return plan.err();
  remat::dist::mpi_pipeline<remat::exec::host_backend, eg::model, eg::tensor> pipe(
      MPI_COMM_WORLD, model, problem, *plan, /*micro_batches*/ 8, backend);
  auto r = pipe.step(
      [](int m, eg::backend& b) {
        return eg::make_input(b, 4, 16, 100u + static_cast<unsigned>(m));
      },
      remat::dist::no_targets_fn{},              // or [&](int m) { return targets_of(m); }
      [](eg::layer& l) { l.sgd_step(0.01f); });  // each of its layers, at the end
  if (!r) return r.err();                        // the rank count, a plan that does not replay
  std::printf("rank %d: %.3f ms per step (plan %.3f), %lld bytes of tensors (plan %lld)\n", r->rank,
              r->step_time * 1e3, r->predicted_step_time * 1e3,
              static_cast<long long>(r->measured_peak),
              static_cast<long long>(r->planned_peak - r->planned_weights));
  // --- doc end ---
  return r;
}

/// Layers first..last as a stage that recomputes: the chain policy's program at its least memory
/// (rotor's by default), checked to run more forwards than the segment's layers (it recomputes).
template <class Policy = remat::rotor>
remat::pipeline_stage dist_recomputing(const remat::chain& c, int first, int last, int proc) {
  remat::pipeline_stage st{first, last, proc};
  const remat::chain seg = remat::detail::segment_chain(c, first, last);
  const Policy r;
  auto program = r.solve(seg, r.minimum_budget(seg));
  if (!program) throw std::runtime_error(program.message());
  int runs = 0;
  for (const auto& op : program->ops) runs += op.is_compute() ? 1 : 0;
  if (runs <= 2 * seg.length())
    throw std::runtime_error(std::string(Policy::name) + "'s least-memory program of layers " +
                             std::to_string(first) + ".." + std::to_string(last) +
                             " recomputes nothing");
  st.recompute = std::move(*program);
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  remat::dist::mpi_session mpi(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string layout = argc > 2 ? argv[2] : "contiguous";
  const int rank = dist_rank(), size = dist_size();
  try {
    if (mode == "bitwise") {
      eg::model m = dist_model();
      remat::pipeline_problem p;
      // Stages of work 1, 2, 1 for the non-contiguous layout (the thesis' costs (1, 2, 1)).
      p.layers = dist_chain(m, {0.25, 0.25, 0.5, 0.25, 0.25, 0.25, 0.25});
      p.processors = size;
      remat::pipeline_plan plan;
      if (layout == "noncontiguous") {
        if (size != 2) throw std::runtime_error("the non-contiguous layout runs on 2 ranks");
        // Stages 1 (layers 1-2) and 3 (6-7) on rank 0, stage 2 (3-5) on rank 1, period 2.
        using k = remat::pipeline_op_kind;
        plan.stages = {{1, 2, 0}, {3, 5, 1}, {6, 7, 0}};
        plan.period = 2;
        const std::vector<std::pair<k, std::pair<int, double>>> timeline = {
            {k::forward, {1, 0}},         {k::send_activation, {1, 0.5}},
            {k::forward, {2, 0.5}},       {k::send_activation, {2, 1.5}},
            {k::forward, {3, 1.5}},       {k::backward, {3, 2.5}},
            {k::send_gradient, {2, 3}},   {k::backward, {2, 3.5}},
            {k::send_gradient, {1, 4.5}}, {k::backward, {1, 5}}};
        for (const auto& [kind, at] : timeline)
          plan.ops.push_back(remat::place_op(kind, at.first, at.second, 0, plan.period));
      } else if (layout == "local") {
        if (size != 2) throw std::runtime_error("the local layout runs on 2 ranks");
        // Stages 1 (layers 1-2) and 2 (3-5) on rank 0, handed over locally, stage 3 on rank 1;
        // one micro-batch at a time (period 4, the whole work).
        using k = remat::pipeline_op_kind;
        plan.stages = {{1, 2, 0}, {3, 5, 0}, {6, 7, 1}};
        plan.period = 4;
        const std::vector<std::pair<k, std::pair<int, double>>> timeline = {
            {k::forward, {1, 0}},    {k::forward, {2, 0.5}}, {k::send_activation, {2, 1.5}},
            {k::forward, {3, 1.5}},  {k::backward, {3, 2}},  {k::send_gradient, {2, 2.5}},
            {k::backward, {2, 2.5}}, {k::backward, {1, 3.5}}};
        for (const auto& [kind, at] : timeline)
          plan.ops.push_back(remat::place_op(kind, at.first, at.second, 0, plan.period));
      } else if (layout == "recompute") {
        if (size != 2) throw std::runtime_error("the recompute layout runs on 2 ranks");
        // Layers 1-4 (with both dropouts) on rank 0 and 5-7 (the loss) on rank 1, both
        // recomputing in their backwards.
        auto fit = remat::one_f_one_b_star_fit(
            p, {dist_recomputing(p.layers, 1, 4, 0), dist_recomputing(p.layers, 5, 7, 1)});
        if (!fit) throw std::runtime_error(fit.message());
        plan = *fit;
      } else if (layout == "recompute_revolve") {
        if (size != 2) throw std::runtime_error("the recompute_revolve layout runs on 2 ranks");
        // As "recompute", the stages' programs revolve's (any chain policy may run a stage).
        auto fit =
            remat::one_f_one_b_star_fit(p, {dist_recomputing<remat::revolve>(p.layers, 1, 4, 0),
                                            dist_recomputing<remat::revolve>(p.layers, 5, 7, 1)});
        if (!fit) throw std::runtime_error(fit.message());
        plan = *fit;
      } else if (layout == "recompute_local") {
        if (size != 2) throw std::runtime_error("the recompute_local layout runs on 2 ranks");
        // One micro-batch at a time, as the local layout, with the stages' own costs (a
        // recomputing stage's B is its program's makespan).
        using k = remat::pipeline_op_kind;
        plan.stages = {dist_recomputing(p.layers, 1, 2, 0), remat::pipeline_stage{3, 5, 0},
                       dist_recomputing(p.layers, 6, 7, 1)};
        std::vector<remat::sim::pipeline_stage_cost> cost;
        for (const auto& st : plan.stages) {
          auto sc = remat::sim::stage_cost(p.layers, st);
          if (!sc) throw std::runtime_error(sc.message());
          cost.push_back(*sc);
        }
        const double f1 = cost[0].forward, f2 = f1 + cost[1].forward, f3 = f2 + cost[2].forward;
        const double b3 = f3 + cost[2].backward, b2 = b3 + cost[1].backward;
        plan.period = b2 + cost[0].backward;
        const std::vector<std::pair<k, std::pair<int, double>>> timeline = {
            {k::forward, {1, 0}},   {k::forward, {2, f1}},  {k::send_activation, {2, f2}},
            {k::forward, {3, f2}},  {k::backward, {3, f3}}, {k::send_gradient, {2, b3}},
            {k::backward, {2, b3}}, {k::backward, {1, b2}}};
        for (const auto& [kind, at] : timeline)
          plan.ops.push_back(remat::place_op(kind, at.first, at.second, 0, plan.period));
      } else {
        auto fit = remat::one_f_one_b_star_fit(p, remat::contiguous_stages(dist_lasts(size)));
        if (!fit) throw std::runtime_error(fit.message());
        plan = *fit;
      }
      return dist_bitwise(p, plan, argc > 3 && std::string(argv[3]) == "targets") ? 0 : 1;
    }
    if (mode == "doc") {
      if (size != 2) throw std::runtime_error("the doc example runs on 2 ranks");
      auto r = dist_doc_example(2, {4, 7});
      if (!r) std::printf("rank %d: %s\n", rank, r.message().c_str());
      return r ? 0 : 1;
    }
    if (mode == "mismatch") {
      eg::model m = dist_model();
      remat::pipeline_problem p;
      p.layers = dist_chain(m, std::vector<double>(7, 0.1));
      p.processors = size + 1;
      auto plan = remat::one_f_one_b_star_fit(p, remat::contiguous_stages(dist_lasts(size + 1)));
      if (!plan) throw std::runtime_error(plan.message());
      remat::exec::host_backend b;
      dist_pipeline pipe(MPI_COMM_WORLD, m, p, *plan, 2, b);
      auto r = pipe.step([](int mb, eg::backend& bb) { return dist_input(0, mb, bb); },
                         remat::dist::no_targets_fn{}, [](eg::layer&) {});
      std::printf("rank %d: %s\n", rank, r ? "the step ran" : r.message().c_str());
      return r ? 1 : 0;
    }
    if (mode == "throw" || mode == "silent" || mode == "hang" || mode == "return") {
      const bool fault = mode != "silent";
      eg::model m = dist_model(fault);
      remat::pipeline_problem p;
      p.layers = dist_chain(m, std::vector<double>(m.size(), 0.1));
      const bool recompute = mode == "throw" && layout == "recompute";
      if (mode == "throw" || mode == "return")
        static_cast<dist_fault&>(*m[3]).arm(recompute ? 0 : 1);  // micro-batch 0's or 1's forward
      if (mode == "hang") static_cast<dist_fault&>(*m[3]).arm(0, 5);
      p.processors = 2;
      auto plan = recompute ? remat::one_f_one_b_star_fit(p, {remat::pipeline_stage{1, 3, 0},
                                                              dist_recomputing(p.layers, 4, 8, 1)})
                            : remat::one_f_one_b_star_fit(
                                  p, remat::contiguous_stages(fault ? std::vector<int>{3, 8}
                                                                    : std::vector<int>{4, 7}));
      if (!plan) throw std::runtime_error(plan.message());
      remat::exec::host_backend b;
      remat::dist::mpi_options opt;
      if (mode != "throw") opt.timeout = 1;
      opt.abort_on_error = mode != "return";
      dist_pipeline pipe(MPI_COMM_WORLD, m, p, *plan, dist_micro_batches, b, opt);
      if (!fault && rank == 1) return 0;  // gone without a word
      auto r = pipe.step([](int mb, eg::backend& bb) { return dist_input(0, mb, bb); },
                         remat::dist::no_targets_fn{}, [](eg::layer&) {});
      std::printf("rank %d: %s\n", rank, r ? "the step ran" : r.message().c_str());
      if (mode == "return" && !r) {  // the error came back, the runs in flight were ended
        std::fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) std::printf("both ranks returned their errors\n");
        return 0;
      }
      return 1;  // the step should have aborted the job
    }
    std::printf(
        "usage: test_dist_mpi bitwise [contiguous|noncontiguous|local|recompute] [targets] | doc | "
        "mismatch | throw [recompute] | silent | hang | return\n");
    return 2;
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    return 1;
  }
}
