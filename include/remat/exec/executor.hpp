#pragma once
// executor<Backend, Model>: runs a schedule (schedule/schedule.hpp) over the user's layers
// (DESIGN.md §6, docs/design.md): one executor for every model. A DAG model (dag_model, the
// ops of a forward DAG, exec/concepts.hpp) runs on the graph it was planned with; a chain
// model (a range or tuple of chain layers, exec/concepts.hpp) runs on its chain's graph,
// build_graph(chain), each chain layer entering through an adapter (as_graph_layer, which users
// may also put in a DAG model): users' chain models work unchanged. The semantics are the
// simulator's (sim/simulate.hpp), and nothing else stays alive:
//   compute(fwd o)       y = forward_save(x..., ctx): stores o's output and its context (the
//                        phantom "phantom o"); a chain's F_l^all
//   fast_forward(fwd o)  y = forward(x...): stores o's output, no context; F_l^ck, F_l^none
//   compute(loss)        the loss op's output gradient, the constant 1: nothing is allocated
//   compute(bwd o)       backward(x..., y, ctx, dy, dx...): o's contribution to the gradient of
//                        each input, created by the first contribution, accumulated in place by
//                        the next ones (exec/concepts.hpp); a chain layer returns its dx
//   free(d)              releases the tensor (or context) of data node d, or its host copy
//   offload(d)           the buffer of d goes to the host through backend.offload (a
//                        TransferBackend and a TransferableTensor, exec/concepts.hpp); its device
//                        memory is released as soon as the copy is ready (at once on
//                        host_backend, whose copies are synchronous), at the latest at wait(d)
//   prefetch(d)          backend.prefetch: a new device buffer, counted from now, refilled from
//                        the host copy
//   wait(d)              backend.wait: later work waits for the copy; the host copy of a
//                        prefetch is released once the copy is ready (at the latest when the run
//                        ends)
// On host_backend the measured per-instruction memory is the simulator's with an infinite
// bandwidth; on an asynchronous backend an offload frees its memory when its copy is seen done,
// which can be later than the simulator's model of the link says (the pool's budget still
// holds: an allocation that does not fit is an execution_error).
//
// A DAG model must be the one the graph was built from: build_graph(profile_dag(model, ...)),
// or any forward DAG with the model's ops, inputs and backward reads. The executor checks this up
// front (node names, kinds and edges; the costs are free), and maps op o to "fwd o", "bwd o",
// data nodes "o", "grad o", "phantom o"; the graph input is data node 0, its gradient node 1. A
// chain model must have one layer per stage; stage l is op l - 1 (training_layout).
//
// Bitwise equality with plain training. Activations are recomputed from the same inputs and
// random state (the executor saves an op's random state before its first forward of a run and
// restores it before every recomputation), so they are the same bits; a gradient is the sum of
// its contributions, each the same bits, added in place by the layers with one rounding per
// contribution. The sum then depends only on the order in which contributions are added, and
// that order is the one the schedule runs the backwards in. The decision, so that the guarantee
// holds for every schedule the executor accepts:
//   * the reference order is store-all's (store_all_program): compute nodes in index order, so
//     contributions to a gradient in increasing compute index (for a built graph, the readers'
//     backwards in reverse topological order);
//   * with one or two contributions any order gives the same bits: c1 + c2 == c2 + c1 exactly;
//   * with three or more, ((c1 + c2) + c3) can differ from ((c1 + c3) + c2) in the last bit, so
//     the executor accepts a schedule only if, for every gradient with 3+ producers, its first two
//     contributions are store-all's first two (in either order) and every later one comes in
//     store-all's position; any other order is rejected up front (status::invalid_problem), naming
//     the instruction, the gradient and the order expected. Store-all's schedules pass, and
//     checkmate's whenever they run each backward once: its stage t ends with the first run of
//     compute node t, so first runs are in index order;
//   * a backward runs at most once: layers accumulate parameter gradients, so a second run would
//     add them twice; a schedule that recomputes a backward is rejected up front too (checkmate's
//     MILP allows recomputing a backward, and does so at some tight budgets).
//
// Times are the wall clock's, or, for a TimingBackend (the CUDA backend), the backend's own marks
// (events recorded between the instructions, read once the run has ended, so the host never
// waits in between). A RunAwareBackend is told where the run begins and ends (begin_run,
// end_run, also after a failure), so a run can be recorded and its static placement replayed
// (exec/placement.hpp). The input, allocated before the run, is a fixed buffer of the placement.
//
// The loss is the last op. run(schedule, input, targets) hands the batch's targets to its
// forward, forward_save and backward (exec/concepts.hpp), and run_result::loss is its output at its
// first forward, read with tensor_traits<T>::item. detail::check_model stops at compile time a
// model whose layers cannot run so: a tuple model's layers each in its place (only the last a
// loss), a range's one type in every place (whether the object at a place is a loss, as for a
// base class, is checked when the run gets there).
//
// Failures come back as status::invalid_problem (a schedule the simulator rejects, one rejected
// by the rules above, a model that does not match the graph or chain, transfers on a backend or
// tensor that cannot move data) before anything runs, or status::execution_error (a layer threw,
// returned a tensor larger than planned, left a gradient empty, or an allocation went past the
// backend's budget), naming the instruction and the node. When memory besides the input was
// already in use when the run started (a run_result's input_gradient kept from an earlier step,
// say), a budget error says how much, and on host_backend which activities allocated the largest
// part of it (live_summary). The run is not refused up front for it: the plan's peak is a
// prediction from the profile, and not every backend has a budget to compare with. A run whose
// forwards' outputs the backend did not see allocated (less than half of their
// tensor_traits<T>::size in all: tensors that hold memory of their own, such as a std::vector) is
// an execution_error too, after the run, since its measured memory means nothing
// (detail::allocation_check, the profiler's check). After a failure the layers' random states
// are as before the run and the parameters are untouched (parameter gradients may hold a partial
// accumulation: zero them).

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <remat/core/result.hpp>
#include <remat/exec/as_graph_layer.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/detail/allocation_check.hpp>
#include <remat/exec/detail/check_model.hpp>
#include <remat/exec/detail/layer_calls.hpp>
#include <remat/exec/detail/model_graph.hpp>
#include <remat/exec/detail/sum_order.hpp>
#include <remat/exec/detail/type_erasure.hpp>
#include <remat/exec/host_backend.hpp>
#include <remat/exec/run_result.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::exec {

namespace detail {

template <class L>
using random_state_t = std::remove_cvref_t<decltype(deref(std::declval<L&>()).random_state())>;

/// Puts back, for each layer i of `model` with a saved state saved[first + i], that random
/// state (the executor keeps op i's at i: first = 0).
template <class Model>
void restore_random_states(Model& model, std::size_t layers,
                           const std::vector<std::unique_ptr<box_base>>& saved, std::size_t first) {
  for (std::size_t i = 0; i < layers; ++i) {
    const auto& box = saved[first + i];
    if (!box) continue;
    model_traits<Model>::visit(model, i, [&](auto& layer) {
      using layer_t = std::remove_reference_t<decltype(layer)>;
      if constexpr (HasRandomState<layer_t>)
        deref(layer).set_random_state(unbox<random_state_t<layer_t>>(box));
    });
  }
}

/// Tells a RunAwareBackend of the end of a run, however the run ends.
template <class B>
struct run_scope {
  B& b;
  bool begun = false;
  void begin() {
    if constexpr (RunAwareBackend<B>) b.begin_run();
    begun = true;
  }
  ~run_scope() {
    if constexpr (RunAwareBackend<B>)
      if (begun) b.end_run();
  }
};

/// For an out-of-budget message: `held` bytes were in use in backend b when the run started,
/// besides the input; with the largest holders when b names them (host_backend::live_summary).
template <class B>
std::string held_at_start(const B& b, bytes held) {
  std::string s = "; " + format_bytes(held) +
                  " were already in use in the backend when the run started, besides the input";
  if constexpr (requires {
                  {
                    b.live_summary(std::size_t{3}).front().activity
                    } -> std::convertible_to<std::string>;
                  { b.live_summary(std::size_t{3}).front().size } -> std::convertible_to<bytes>;
                }) {
    std::string who;
    for (const auto& l : b.live_summary(3))
      who += (who.empty() ? "" : ", ") + format_bytes(l.size) +
             (l.activity == "an allocation"
                  ? std::string(" allocated outside a run")  // the backend's default
                  : " allocated by " + l.activity);
    if (!who.empty()) s += " (the largest holders then, the input included: " + who + ")";
  }
  return s +
         ", such as a run_result's input_gradient kept from an earlier step: free them, or give "
         "the backend room "
         "for them";
}

/// What the executor runs: the layers (a DAG model's, or a chain model's through chain_stage),
/// the graph (the one given, or the chain's), and where each op's nodes are.
struct run_plan {
  const graph* g = nullptr;
  std::vector<op_nodes> nodes;
  std::vector<backward_needs> reads;
};

}  // namespace detail

template <class B, class Model>
class executor {
  static_assert(Backend<B>,
                "remat: executor<Backend, Model>: Backend must satisfy remat::exec::Backend");

 public:
  /// A DAG model (dag_model) on the graph it was planned with.
  executor(Model& model, const graph& g, B& backend) requires detail::is_dag_model<Model>
      : model_(model), graph_(&g), backend_(backend) {}
  /// A chain model (a range or tuple of chain layers, one per stage) on its chain.
  executor(Model& model, const chain& c, B& backend) requires(!detail::is_dag_model<Model>)
      : model_(model), chain_(&c), backend_(backend) {}
  /// Refused: the executor keeps a reference to the graph or chain (and builds the chain's graph
  /// from it at every run), so a temporary would dangle at the first run. Pass a named graph or
  /// chain that outlives the executor. (A template, so that the error is this static_assert's
  /// message rather than a dangling reference at run time.)
  template <class P>
  requires(!std::is_lvalue_reference_v<P> &&
           (std::same_as<std::remove_cv_t<P>, graph> || std::same_as<std::remove_cv_t<P>, chain>))
      executor(Model& model, P&& problem, B& backend)
      : model_(model), backend_(backend) {
    static_assert(!std::is_same_v<P, P>,
                  "remat: the executor keeps a reference to the graph or chain; pass an "
                  "lvalue that outlives the executor, not a temporary");
    (void)problem;
  }

  /// Runs the schedule on `input` (the graph input, a chain's a_0, which the run consumes).
  /// Returns the input gradient and the measurements, or why the run failed.
  template <class T>
  result<run_result<T>> run(const schedule& s, T input) {
    return run(s, std::move(input), no_targets{});
  }
  /// The same, handing the batch's targets (of any type) to the loss, the last layer, whose
  /// forward, forward_save and backward take them (exec/concepts.hpp).
  template <class T, class Tg>
  result<run_result<T>> run(const schedule& s, T input, const Tg& targets);

  /// The model it runs (for train_step, exec/train.hpp).
  Model& model() noexcept { return model_; }
  /// The backend it runs on.
  B& backend() noexcept { return backend_; }

 private:
  /// The graph and the ops' nodes, or why the model and the problem do not match.
  result<detail::run_plan> plan();
  template <class T, class Tg, class Layers>
  result<run_result<T>> run_on(Layers& layers, const detail::run_plan& p, const schedule& s,
                               T input, const Tg& targets);

  Model& model_;
  const graph* graph_ = nullptr;
  const chain* chain_ = nullptr;
  std::optional<graph> chain_graph_;  // build_graph(*chain_) of the current run
  B& backend_;
};

template <class B, class Model>
result<detail::run_plan> executor<B, Model>::plan() {
  if constexpr (detail::is_dag_model<Model>) {
    auto ref = detail::model_graph(model_, graph_->name);
    if (!ref) return ref.err();
    if (auto diff = detail::structure_difference(*graph_, ref->g); !diff.empty())
      return error{status::invalid_problem,
                   "executor: graph '" + graph_->name + "' was not built from this model: " + diff +
                       "; plan with build_graph(profile_dag(model, ...))",
                   {}};
    return detail::run_plan{graph_, std::move(ref->ops),
                            detail::reads_of(model_)};  // same nodes, same indices
  } else {
    const int n = chain_->length();
    const auto layers = model_traits<Model>::size(model_);
    if (static_cast<int>(layers) != n)
      return error{status::invalid_problem,
                   "executor: the model has " + std::to_string(layers) + " layers but the chain '" +
                       chain_->name + "' has " + std::to_string(n) +
                       " stages; plan with the chain of this model",
                   {}};
    // Built at every run from the chain as it is now (the executor holds the chain by reference).
    auto g = build_graph(*chain_);
    if (!g) return g.err();
    chain_graph_ = std::move(*g);
    return detail::run_plan{&*chain_graph_, detail::chain_op_nodes(n),
                            std::vector<backward_needs>(static_cast<std::size_t>(n))};
  }
}

template <class B, class Model>
template <class T, class Tg>
result<run_result<T>> executor<B, Model>::run(const schedule& s, T input, const Tg& targets) {
  static_assert(
      Tensor<T>,
      "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` member "
      "returning its size in bytes) and must be movable");
  static_assert(detail::check_model<Model, T, Tg, B>());
  auto p = plan();
  if (!p) return p.err();
  if constexpr (detail::is_dag_model<Model>) {
    return run_on(model_.layers, *p, s, std::move(input), targets);
  } else {
    detail::chain_layers<Model> layers{&model_};
    return run_on(layers, *p, s, std::move(input), targets);
  }
}

template <class B, class Model>
template <class T, class Tg, class Layers>
result<run_result<T>> executor<B, Model>::run_on(Layers& layers, const detail::run_plan& p,
                                                 const schedule& s, T input, const Tg& targets) {
  using clock = std::chrono::steady_clock;
  using mt = model_traits<Layers>;
  const graph& g = *p.g;
  const std::vector<detail::op_nodes>& nodes = p.nodes;
  const std::vector<backward_needs>& reads = p.reads;
  auto invalid = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (const auto rep = sim::simulate(g, s, {.record_timeline = false}); !rep.valid)
    return invalid("executor: the schedule is not valid for graph '" + g.name +
                   "': " + rep.first_violation->message);
  if (auto why = detail::sum_order_violation(g, s); !why.empty())
    return invalid("executor: graph '" + g.name + "', " + why);
  constexpr bool can_transfer = TransferBackend<B> && TransferableTensor<T, B>;
  if constexpr (!can_transfer) {
    for (std::size_t j = 0; j < s.ops.size(); ++j)
      if (!s.ops[j].is_compute() && s.ops[j].op != op_kind::free)
        return invalid(
            "executor: instruction " + std::to_string(j) + " (" + to_string(s.ops[j]) +
            ") moves a tensor, but " +
            (TransferBackend<B>
                 ? std::string("the tensor type does not name its backend buffer: give it a "
                               "`storage()` member returning the buffer by reference, or "
                               "specialise tensor_traits<T>::storage")
                 : std::string("the backend has no offload/prefetch/wait (it is not a "
                               "remat::exec::TransferBackend)")));
  }
  const bytes input_bytes = g.data(training_layout::input).size;
  if (tensor_traits<T>::size(input) > input_bytes)
    return error{status::execution_error,
                 "executor: the input has " + format_bytes(tensor_traits<T>::size(input)) +
                     ", more than the graph input's " + format_bytes(input_bytes) +
                     " it was planned with",
                 {}};

  const auto n_ops = nodes.size();
  const auto nd = static_cast<std::size_t>(g.data_count());
  auto k = [](int i) { return static_cast<std::size_t>(i); };
  std::vector<int> op_of(static_cast<std::size_t>(g.compute_count()), -1);  // fwd and bwd -> op
  for (std::size_t i = 0; i < n_ops; ++i)
    op_of[k(nodes[i].fwd)] = op_of[k(nodes[i].bwd)] = static_cast<int>(i);
  const int loss_op = static_cast<int>(n_ops) - 1;

  using host_t = typename detail::transfer_types<B>::host;
  using handle_t = typename detail::transfer_types<B>::handle;
  std::vector<std::optional<T>> tensors(nd);                    // activations and gradients
  std::vector<std::unique_ptr<detail::box_base>> contexts(nd);  // phantoms
  std::vector<std::unique_ptr<detail::box_base>> rng_before(n_ops), rng_after(n_ops);
  // Transfers: d's host copy, its transfer in flight (offload or prefetch, until its wait),
  // whether that is an offload, whether the offload's device buffer is still held, and prefetches
  // waited for whose host copy is released once the copy is ready.
  std::vector<std::optional<host_t>> host_copy(can_transfer ? nd : 0);
  std::vector<std::optional<handle_t>> moving(can_transfer ? nd : 0);
  std::vector<char> offloading(can_transfer ? nd : 0, 0), leaving(can_transfer ? nd : 0, 0);
  std::vector<std::pair<host_t, handle_t>> retiring;
  struct {
    std::vector<bytes> op_peaks;
    std::vector<seconds> op_times;
    std::vector<int> forwards;
    std::optional<double> loss;
  } out;
  out.forwards.assign(n_ops, 0);
  out.op_peaks.reserve(s.ops.size());
  out.op_times.reserve(s.ops.size());
  // The run's memory is measured from here, with the input counted.
  const bytes baseline = backend_.in_use() - tensor_traits<T>::size(input);
  // Memory held before the run, besides the input: named if the run runs out of budget.
  const std::string held = baseline > 0 ? detail::held_at_start(backend_, baseline) : std::string();
  tensors[k(training_layout::input)] = std::move(input);
  backend_.reset_high_water();
  bytes peak = backend_.high_water() - baseline;

  auto planned = [&](int d, bytes got, const std::string& at, const std::string& what) {
    if (got > g.data(d).size)
      throw detail::execution_failure(at + ": " + what + " of " + format_bytes(got) + " for " +
                                      detail::data_label(g, d) + ", more than the " +
                                      format_bytes(g.data(d).size) +
                                      " it was planned with; profile the model again");
  };
  auto where = [&](std::size_t i) {
    return "instruction " + std::to_string(i) + " (" + to_string(s.ops[i]) + ")";
  };

  // Releases what finished copies no longer need: the device buffers of offloads, the host
  // copies of waited prefetches (`all`: every one, waiting for the copies; after the run).
  [[maybe_unused]] auto retire = [&](bool all) {
    if constexpr (can_transfer) {
      for (std::size_t d = 0; d < nd; ++d) {
        auto& x = moving[d];
        if (leaving[d] && (all || x->ready())) {
          if (all) x->wait_host();
          tensor_traits<T>::storage(*tensors[d]) = buffer_t<B>{};
          leaving[d] = 0;
        }
      }
      std::erase_if(retiring, [&](auto& r) {
        if (all) r.second.wait_host();
        return all || r.second.ready();
      });
    }
  };
  [[maybe_unused]] auto run_transfer = [&](const instruction& ins, std::size_t i) {
    if constexpr (can_transfer) {
      const auto d = k(ins.node);
      backend_.set_activity(where(i) + ", " + detail::data_label(g, ins.node));
      auto& storage = tensor_traits<T>::storage(*tensors[d]);
      if (ins.op == op_kind::offload) {
        auto [h, x] = backend_.offload(storage);
        host_copy[d] = std::move(h);
        moving[d] = std::move(x);
        offloading[d] = 1;
        leaving[d] = 1;
      } else if (ins.op == op_kind::prefetch) {
        auto [buf, x] = backend_.prefetch(*host_copy[d]);
        storage = std::move(buf);
        moving[d] = std::move(x);
      } else {
        backend_.wait(*moving[d]);
        if (offloading[d]) {  // the offload is done for the compute lane: its buffer can go
          storage = buffer_t<B>{};
          offloading[d] = leaving[d] = 0;
        } else {  // the prefetch: its host copy goes once the copy is ready
          retiring.emplace_back(std::move(*host_copy[d]), std::move(*moving[d]));
          host_copy[d].reset();
        }
        moving[d].reset();
      }
      retire(false);
    }
  };

  detail::allocation_check allocated;
  auto run_compute = [&](const instruction& ins, std::size_t at_op) {
    const int c = ins.node;
    if (g.compute(c).kind == compute_kind::loss) return;  // dy = 1: nothing to store
    const auto i = k(op_of[k(c)]);
    const detail::op_nodes& on = nodes[i];
    mt::visit(layers, i, [&](auto& layer) {
      using layer_t = std::remove_reference_t<decltype(layer)>;
      using traits = dag_layer_traits<layer_t>;
      using C = typename traits::context;
      const std::string who = where(at_op) + ", " + detail::compute_label(g, c);
      backend_.set_activity(who);
      std::vector<const T*> x;
      x.reserve(on.in.size());
      const bool is_forward = c == on.fwd;
      for (int d : on.in) x.push_back(is_forward || reads[i].inputs ? &*tensors[k(d)] : nullptr);
      if (is_forward) {
        if constexpr (HasRandomState<layer_t>) {
          auto& target = detail::deref(layer);
          if (!rng_before[i])
            rng_before[i] = detail::boxed(target.random_state());
          else
            target.set_random_state(detail::unbox<detail::random_state_t<layer_t>>(rng_before[i]));
        }
        const bool loss = static_cast<int>(i) == loss_op;
        [[maybe_unused]] const bool first = out.forwards[i]++ == 0;
        const bytes before = backend_.in_use();
        if (ins.op == op_kind::fast_forward) {
          T y = detail::call_forward(layer, std::span<const T* const>(x), loss, targets, backend_,
                                     who);
          allocated.add(before, backend_.in_use(), tensor_traits<T>::size(y));
          planned(on.act, tensor_traits<T>::size(y), who, "returned an output");
          tensors[k(on.act)] = std::move(y);
        } else {
          auto ctx = std::make_unique<detail::box<C>>();
          T y = detail::call_forward_save(layer, std::span<const T* const>(x), loss, targets,
                                          ctx->value, backend_, who);
          allocated.add(before, backend_.in_use(),
                        tensor_traits<T>::size(y) + traits::context_bytes(ctx->value));
          planned(on.act, tensor_traits<T>::size(y), who, "returned an output");
          planned(on.phantom, traits::context_bytes(ctx->value), who, "kept a context");
          tensors[k(on.act)] = std::move(y);
          contexts[k(on.phantom)] = std::move(ctx);
        }
        if constexpr (ScalarTensor<T>)  // the loss's value, at its first forward
          if (loss && first) out.loss = tensor_traits<T>::item(*tensors[k(on.act)]);
        if constexpr (HasRandomState<layer_t>)
          if (!rng_after[i]) rng_after[i] = detail::boxed(detail::deref(layer).random_state());
        return;
      }
      const T* y = reads[i].output ? &*tensors[k(on.act)] : nullptr;
      const C& ctx = detail::unbox<C>(contexts[k(on.phantom)]);
      std::vector<std::optional<T>> dx(on.in.size());
      for (std::size_t j = 0; j < dx.size(); ++j) dx[j] = std::move(tensors[k(on.in_grad[j])]);
      const T* dy = static_cast<int>(i) == loss_op ? nullptr : &*tensors[k(on.grad)];
      detail::call_backward(layer, std::span<const T* const>(x), y, ctx, dy, targets,
                            std::span<std::optional<T>>(dx), backend_, who);
      for (std::size_t j = 0; j < dx.size(); ++j) {
        const int d = on.in_grad[j];
        if (!dx[j])
          throw detail::execution_failure(who + " left the gradient of its input " +
                                          std::to_string(j) + ", " + detail::data_label(g, d) +
                                          ", empty; a backward creates or adds "
                                          "to the gradient of every input");
        planned(d, tensor_traits<T>::size(*dx[j]), who, "made a gradient");
        tensors[k(d)] = std::move(dx[j]);
      }
    });
  };

  auto free_data = [&](int d) {
    tensors[k(d)].reset();
    contexts[k(d)].reset();
    if constexpr (can_transfer) host_copy[k(d)].reset();
  };

  auto restore_rng = [&](bool success) {
    detail::restore_random_states(layers, n_ops, success ? rng_after : rng_before, 0);
  };

  // A RunAwareBackend hears of the end of the run however it ends (before the tensors left in
  // `tensors` are freed: they are the run's results or leftovers of a failure, not its buffers).
  detail::run_scope<B> scope{backend_};
  // Copies in flight end before the buffers they use are freed, however the run ends.
  struct drain_scope {
    decltype(retire)& f;
    ~drain_scope() {
      try {
        f(true);
      } catch (...) {  // a failing device: the backend reports it on its next call
      }
    }
  } drain{retire};
  // A TimingBackend's marks, one before the run and one after each instruction, read once the
  // run has ended (the host does not wait in between).
  using mark_t = decltype(detail::start_timer(backend_));
  std::vector<mark_t> marks;
  if constexpr (TimingBackend<B>) marks.reserve(s.ops.size() + 1);

  const auto t_start = clock::now();
  std::size_t i = 0;
  try {
    scope.begin();
    if constexpr (TimingBackend<B>) marks.push_back(backend_.mark_time());
    for (; i < s.ops.size(); ++i) {
      const instruction& ins = s.ops[i];
      backend_.reset_high_water();
      [[maybe_unused]] const auto t0 = clock::now();
      if constexpr (can_transfer) retire(false);
      if (ins.op == op_kind::free)
        free_data(ins.node);
      else if (ins.is_compute())
        run_compute(ins, i);
      else
        run_transfer(ins, i);
      if constexpr (TimingBackend<B>)
        marks.push_back(backend_.mark_time());
      else
        out.op_times.push_back(std::chrono::duration<double>(clock::now() - t0).count());
      out.op_peaks.push_back(backend_.high_water() - baseline);
      peak = std::max(peak, out.op_peaks.back());
    }
    if constexpr (TimingBackend<B>)
      for (std::size_t j = 0; j + 1 < marks.size(); ++j)
        out.op_times.push_back(backend_.seconds_between(marks[j], marks[j + 1]));
  } catch (const out_of_budget& e) {
    restore_rng(false);
    backend_.set_activity("an allocation");
    return error{status::execution_error,
                 "executor: " + std::string(e.what()) + "; the schedule predicted a peak of " +
                     format_bytes(s.predicted_peak) +
                     " (allocations outside the profile, or a budget below the plan's)" + held,
                 {}};
  } catch (const detail::execution_failure& e) {
    restore_rng(false);
    backend_.set_activity("an allocation");
    return error{status::execution_error, std::string("executor: ") + e.what(), {}};
  } catch (const std::exception& e) {
    restore_rng(false);
    const std::string what = backend_.activity();
    backend_.set_activity("an allocation");
    return error{status::execution_error, "executor: " + what + " threw: " + e.what(), {}};
  }
  seconds elapsed = std::chrono::duration<double>(clock::now() - t_start).count();
  if constexpr (TimingBackend<B>) elapsed = backend_.seconds_between(marks.front(), marks.back());
  if (auto why = allocated.problem(); !why.empty()) {
    restore_rng(false);
    backend_.set_activity("an allocation");
    return error{status::execution_error, "executor: " + why, {}};
  }
  restore_rng(true);
  backend_.set_activity("an allocation");
  return run_result<T>{std::move(*tensors[k(training_layout::input_gradient)]),
                       peak,
                       elapsed,
                       std::move(out.op_peaks),
                       std::move(out.op_times),
                       std::move(out.forwards),
                       out.loss};
}

}  // namespace remat::exec
