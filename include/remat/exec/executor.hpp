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
#include <remat/exec/concepts.hpp>
#include <remat/exec/host_backend.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

namespace remat::exec {

/// What one run measured.
template <class T>
struct run_result {
  T input_gradient;               ///< the gradient of the graph (chain) input
  bytes measured_peak = 0;        ///< the run's peak in the backend, the input included
  seconds elapsed = 0;            ///< time of the run (wall clock, or a TimingBackend's)
  std::vector<bytes> op_peaks;    ///< per instruction: peak while it ran (same basis)
  std::vector<seconds> op_times;  ///< per instruction: its time (same clock)
  /// Forward calls (fast-forward and forward_save) per op: forwards[i] counts op i, the model's
  /// element i (a dag_model's ops[i]; a chain model's layer i, which is stage i + 1).
  std::vector<int> forwards;
  /// The loss: tensor_traits<T>::item of the loss op's output at its first forward of the run
  /// (the last op's; empty when the tensor type has no item(), exec/concepts.hpp).
  std::optional<double> loss;
};

namespace detail {

struct box_base {
  virtual ~box_base() = default;
};
template <class V>
struct box final : box_base {
  V value{};
};
template <class V>
V& unbox(const std::unique_ptr<box_base>& p) {
  return static_cast<box<V>*>(p.get())->value;
}
template <class V>
std::unique_ptr<box_base> boxed(V v) {
  auto b = std::make_unique<box<V>>();
  b->value = std::move(v);
  return b;
}
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

/// An error the run reports (not a bug): becomes status::execution_error.
struct execution_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Whether the tensors are the backend's memory (the one check of the profiler and the
/// executor): the bytes the forwards' outputs claim (tensor_traits<T>::size, plus the context's
/// bytes for a forward_save) against the growth of the backend's in_use around those forwards,
/// summed over a whole profile or run. A tensor that holds memory the backend never handed out
/// (a std::vector, say) makes every measured peak, and the budget, meaningless. The rule is on
/// the sums, not per op, so that a layer whose output shares its input's memory (a view) does not
/// trip it; it trips when the backend saw less than half of what the outputs claim (a model made
/// mostly of views would trip it too). A model whose outputs are all empty passes.
struct allocation_check {
  bytes claimed = 0;  ///< sum of the outputs' sizes
  bytes seen = 0;     ///< sum of the backend's growth around the forwards that made them
  void add(bytes in_use_before, bytes in_use_after, bytes output) {
    claimed += output;
    seen += std::max<bytes>(0, in_use_after - in_use_before);
  }
  /// Empty when the backend saw at least half of what the outputs claim; else what is wrong and
  /// what to do.
  [[nodiscard]] std::string problem() const {
    if (seen >= claimed - claimed / 2) return {};
    return "the forwards' outputs claim " + format_bytes(claimed) +
           " in all by tensor_traits<T>::size, but the backend saw " + format_bytes(seen) +
           " allocated by those forwards: the tensors do not hold memory from the backend, so the "
           "measured memory and the budget mean nothing. Allocate every tensor's memory through "
           "the "
           "Backend& each layer receives (b.allocate(n)) and hold the returned buffer in the "
           "tensor "
           "(README, \"Train with your own layers\")";
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

using ::remat::detail::compute_label;
using ::remat::detail::compute_list;
using ::remat::detail::data_label;
using ::remat::detail::graph_input_name;
using ::remat::detail::own_output_name;

/// True for a chain layer seen as a graph layer (as_graph_layer, below), which takes one input.
template <class L>
inline constexpr bool is_chain_stage = false;

/// The backward reads of every op of a DAG model, from its layers.
template <class Model>
std::vector<backward_needs> reads_of(Model& m) {
  using mt = model_traits<std::remove_cvref_t<decltype(m.layers)>>;
  std::vector<backward_needs> r;
  for (std::size_t i = 0; i < mt::size(m.layers); ++i)
    mt::visit(m.layers, i, [&](auto& layer) {
      r.push_back(dag_layer_traits<std::remove_reference_t<decltype(layer)>>::reads(layer));
    });
  return r;
}

/// The forward DAG of a model without costs, checked: the errors name the op.
template <class Model>
result<forward_dag> skeleton(Model& m, std::string name) {
  using mt = model_traits<std::remove_cvref_t<decltype(m.layers)>>;
  const std::string where = "DAG model '" + name + "': ";
  auto bad = [&](std::string msg) { return error{status::invalid_problem, where + msg, {}}; };
  if (mt::size(m.layers) != m.ops.size())
    return bad("it has " + std::to_string(mt::size(m.layers)) + " layers but " +
               std::to_string(m.ops.size()) + " ops; op i runs layer i");
  const std::vector<backward_needs> reads = reads_of(m);
  forward_dag f{std::move(name), 0, {}};
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const dag_op& op = m.ops[i];
    std::unordered_set<std::string> seen;
    for (const auto& in : op.inputs)
      if (!seen.insert(in).second)
        return bad(
            "op '" + op.name + "' (ops[" + std::to_string(i) + "]) reads '" + in +
            "' twice; list each tensor once (a layer that uses a tensor twice reads it once)");
    bool one_input = false;
    mt::visit(m.layers, i, [&](auto& layer) {
      one_input = is_chain_stage<std::remove_reference_t<decltype(layer)>>;
    });
    if (one_input && op.inputs.size() != 1)
      return bad("op '" + op.name + "' (ops[" + std::to_string(i) +
                 "]) runs a chain layer (as_graph_layer), "
                 "which takes one input, but it lists " +
                 std::to_string(op.inputs.size()) +
                 "; give it one input, or write a graph layer (exec/concepts.hpp)");
    forward_op fo;
    fo.name = op.name;
    fo.inputs = op.inputs;
    if (reads[i].inputs) fo.backward_reads = op.inputs;
    if (reads[i].output) fo.backward_reads.emplace_back(own_output_name);
    f.ops.push_back(std::move(fo));
  }
  if (auto v = validate(f); !v) return v.err();
  return f;
}

/// Empty when g has the nodes and edges of ref (names, kinds, protection, pairs; not the costs),
/// else the first difference.
inline std::string structure_difference(const graph& g, const graph& ref) {
  if (g.compute_count() != ref.compute_count() || g.data_count() != ref.data_count())
    return "the graph has " + std::to_string(g.compute_count()) + " compute and " +
           std::to_string(g.data_count()) + " data nodes, the model's " +
           std::to_string(ref.compute_count()) + " and " + std::to_string(ref.data_count());
  auto same = [](std::span<const int> a, std::span<const int> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  };
  for (int d = 0; d < g.data_count(); ++d) {
    const auto &a = g.data(d), &b = ref.data(d);
    if (a.name != b.name || a.kind != b.kind || a.is_protected != b.is_protected ||
        g.gradient_of(d) != ref.gradient_of(d))
      return "data node " + data_label(g, d) + " is " + data_label(ref, d) + " (a " +
             std::string(to_string(b.kind)) + ") in the model's graph";
  }
  for (int c = 0; c < g.compute_count(); ++c) {
    const auto &a = g.compute(c), &b = ref.compute(c);
    if (a.name != b.name || a.kind != b.kind || g.backward_of(c) != ref.backward_of(c))
      return "compute node " + compute_label(g, c) + " is " + compute_label(ref, c) +
             " in the model's graph";
    if (!same(g.inputs(c), ref.inputs(c)) || !same(g.outputs(c), ref.outputs(c)))
      return "compute node " + compute_label(g, c) +
             " reads or writes other data nodes than in the model's graph (its inputs, or which "
             "of them its backward reads, differ)";
  }
  return {};
}

/// Where an op's nodes are in the graph.
struct op_nodes {
  int fwd = -1, bwd = -1, act = -1, grad = -1, phantom = -1;
  std::vector<int> in;       ///< data nodes of its inputs, in the op's order
  std::vector<int> in_grad;  ///< their gradients
};

/// The training graph of a model's structure (no costs) and where each op's nodes are in it.
struct model_nodes {
  graph g;
  std::vector<op_nodes> ops;  ///< in the model's order
};

template <class Model>
result<model_nodes> model_graph(Model& m, std::string name) {
  auto sk = skeleton(m, std::move(name));
  if (!sk) return sk.err();
  auto built = build_graph(*sk);
  if (!built) return built.err();
  model_nodes out{std::move(*built), std::vector<op_nodes>(m.ops.size())};
  const graph& g = out.g;
  const training_layout lay{g.loss()};
  std::unordered_map<std::string, int> position;  // op name -> its forward's index
  for (const auto& op : m.ops) position.emplace(op.name, g.find_compute("fwd " + op.name));
  for (std::size_t i = 0; i < out.ops.size(); ++i) {
    auto& n = out.ops[i];
    const int p = position.at(m.ops[i].name);
    n = {lay.forward(p),
         lay.backward(p),
         lay.activation(p),
         lay.gradient(p),
         lay.phantom(p),
         {},
         {}};
    for (const auto& in : m.ops[i].inputs) {
      const bool graph_input = in == graph_input_name;
      n.in.push_back(graph_input ? lay.input : lay.activation(position.at(in)));
      n.in_grad.push_back(graph_input ? lay.input_gradient : lay.gradient(position.at(in)));
    }
  }
  return out;
}

/// The schedule rules of the header comment beyond the simulator's: each backward at most once,
/// contributions to a gradient with 3+ producers in store-all's order. Empty if it passes.
inline std::string sum_order_violation(const graph& g, const schedule& s) {
  std::vector<int> backward_runs(static_cast<std::size_t>(g.compute_count()), 0);
  std::vector<std::vector<int>> summed(static_cast<std::size_t>(g.data_count()));
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const instruction& ins = s.ops[i];
    const std::string at = "instruction " + std::to_string(i) + " (" + to_string(ins) + ")";
    if (ins.op == op_kind::free) {
      summed[static_cast<std::size_t>(ins.node)].clear();
      continue;
    }
    if (!ins.is_compute()) continue;
    const int c = ins.node;
    if (g.compute(c).kind != compute_kind::backward) continue;
    if (backward_runs[static_cast<std::size_t>(c)]++ > 0)
      return at + ": " + compute_label(g, c) +
             " runs a second time; the executor runs each backward once (layers accumulate "
             "parameter gradients, a second run would add them twice)";
    for (int d : g.outputs(c)) {
      std::vector<int> order(g.producers(d).begin(), g.producers(d).end());
      std::sort(order.begin(), order.end());  // store-all's order: compute index
      auto& done = summed[static_cast<std::size_t>(d)];
      done.push_back(c);
      const std::size_t k = done.size();
      const bool ok = order.size() < 3 || (k == 1 && (c == order[0] || c == order[1])) ||
                      (k == 2 && std::is_permutation(done.begin(), done.end(), order.begin())) ||
                      (k > 2 && c == order[k - 1]);
      if (!ok)
        return at + ": " + compute_label(g, c) + " would add its contribution to " +
               data_label(g, d) + " out of store-all's order (" + compute_list(g, order) +
               ", the first two in either order); with 3 or more contributions the sum's last "
               "bits depend on the order, so run these backwards in the graph's order";
    }
  }
  return {};
}

}  // namespace detail

/// A chain layer (or a pointer-like to one) as a graph layer: an op of a dag_model that reads one
/// tensor, as `dag_model<std::tuple<as_graph_layer<my_linear>, my_graph_op, ...>>`. The chain
/// layer's forward takes that input, its backward returns the input's gradient, which the
/// adapter makes the gradient or adds element by element to it (the contract of a graph layer,
/// exec/concepts.hpp; one rounding per contribution, so gradients stay bitwise those of plain
/// training). Its backward reads its input and its output, as the chain model says (abar_l
/// includes a_l, B_l needs a_{l-1}). The layer's random state, name() and zero_grad() pass
/// through. An op that lists more or fewer than one input for it is refused by profile_dag and
/// the executor, naming the op.
///
/// `Hold` is how the layer is held: by value (L, the default) or, for the executor's view of a
/// chain model's layers (stage l is op l - 1), through a pointer (L*).
template <class L, class Hold = L>
struct as_graph_layer {
  Hold layer;

  /// The chain layer (L, which the chain_layer_traits dereference when it is a pointer-like).
  L& chain_layer() {
    if constexpr (std::is_same_v<Hold, L*>)
      return *layer;
    else
      return layer;
  }
  auto random_state() const requires HasRandomState<L> {
    return detail::deref(held()).random_state();
  }
  template <class S>
  void set_random_state(const S& s) requires HasRandomState<L> {
    detail::deref(chain_layer()).set_random_state(s);
  }
  decltype(auto) name() const requires requires(L& l) { detail::deref(l).name(); }
  { return detail::deref(held()).name(); }
  void zero_grad() requires requires(L& l) { detail::deref(l).zero_grad(); }
  { detail::deref(chain_layer()).zero_grad(); }

 private:
  const L& held() const {
    if constexpr (std::is_same_v<Hold, L*>)
      return *layer;
    else
      return layer;
  }
};

namespace detail {
/// The executor's view of a chain model's layer.
template <class L>
using chain_stage = as_graph_layer<L, L*>;
template <class L, class Hold>
inline constexpr bool is_chain_stage<as_graph_layer<L, Hold>> = true;

/// A chain model seen as the layers of a DAG model: visiting op i visits layer i through a
/// chain_stage.
template <class Model>
struct chain_layers {
  Model* model;
};

/// What the executor runs: the layers (a DAG model's, or a chain model's through chain_stage),
/// the graph (the one given, or the chain's), and where each op's nodes are.
struct run_plan {
  const graph* g = nullptr;
  std::vector<op_nodes> nodes;
  std::vector<backward_needs> reads;
};

/// The nodes of an N-stage chain's ops in build_graph(chain) (training_layout).
inline std::vector<op_nodes> chain_op_nodes(int n) {
  const training_layout lay{n};
  std::vector<op_nodes> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] = {lay.forward(i),
                                        lay.backward(i),
                                        lay.activation(i),
                                        lay.gradient(i),
                                        lay.phantom(i),
                                        {i == 0 ? lay.input : lay.activation(i - 1)},
                                        {i == 0 ? lay.input_gradient : lay.gradient(i - 1)}};
  return out;
}

}  // namespace detail

template <class Model>
struct model_traits<detail::chain_layers<Model>> {
  static std::size_t size(const detail::chain_layers<Model>& m) {
    return model_traits<Model>::size(*m.model);
  }
  template <class F>
  static decltype(auto) visit(detail::chain_layers<Model>& m, std::size_t i, F&& f) {
    return model_traits<Model>::visit(*m.model, i, [&](auto& layer) -> decltype(auto) {
      detail::chain_stage<std::remove_reference_t<decltype(layer)>> stage{&layer};
      return f(stage);
    });
  }
};

/// A chain layer as a graph layer: the traits of the adapter forward to chain_layer_traits<L>.
template <class L, class Hold>
struct dag_layer_traits<as_graph_layer<L, Hold>> {
  using base = chain_layer_traits<L>;
  using context = typename base::context;
  using stage = as_graph_layer<L, Hold>;

  template <class T, class B>
  static T forward(stage& s, std::span<const T* const> x, B& b) requires HasChainForward<L, T, B> {
    return base::forward(s.chain_layer(), *x[0], b);
  }
  template <class T, class B>
  static T forward_save(stage& s, std::span<const T* const> x, context& ctx,
                        B& b) requires HasChainForwardSave<L, T, B> {
    return base::forward_save(s.chain_layer(), *x[0], ctx, b);
  }
  template <class T, class B>
  static void backward(stage& s, std::span<const T* const> x, const T* y, const context& ctx,
                       const T& dy, std::span<std::optional<T>> dx,
                       B& b) requires HasChainBackward<L, T, B> {
    add_to(dx[0], base::backward(s.chain_layer(), *x[0], *y, ctx, dy, b));
  }
  template <class T, class B>
  static void loss_backward(stage& s, std::span<const T* const> x, const T* y, const context& ctx,
                            std::span<std::optional<T>> dx,
                            B& b) requires HasChainLossBackward<L, T, B> {
    add_to(dx[0], base::loss_backward(s.chain_layer(), *x[0], *y, ctx, b));
  }
  template <class T, class Tg, class B>
  static T forward(stage& s, std::span<const T* const> x, const Tg& tg, B& b) requires
      requires(L& l) {
    { base::forward(l, *x[0], tg, b) } -> std::same_as<T>;
  }
  { return base::forward(s.chain_layer(), *x[0], tg, b); }
  template <class T, class Tg, class B>
  static T forward_save(stage& s, std::span<const T* const> x, const Tg& tg, context& ctx,
                        B& b) requires requires(L& l) {
    { base::forward_save(l, *x[0], tg, ctx, b) } -> std::same_as<T>;
  }
  { return base::forward_save(s.chain_layer(), *x[0], tg, ctx, b); }
  template <class T, class Tg, class B>
  static void loss_backward(stage& s, std::span<const T* const> x, const T* y, const context& ctx,
                            const Tg& tg, std::span<std::optional<T>> dx, B& b) requires
      requires(L& l) {
    { base::loss_backward(l, *x[0], *y, ctx, tg, b) } -> std::same_as<T>;
  }
  { add_to(dx[0], base::loss_backward(s.chain_layer(), *x[0], *y, ctx, tg, b)); }
  static bytes context_bytes(const context& ctx) requires HasChainContextBytes<L> {
    return base::context_bytes(ctx);
  }
  static backward_needs reads(stage&) { return {}; }

 private:
  /// The chain layer's dx becomes the input's gradient, or is added to the one other ops made.
  template <class T>
  static void add_to(std::optional<T>& dx, T c) {
    if (!dx) {
      dx.emplace(std::move(c));
      return;
    }
    if constexpr (AddableTensor<T>)
      tensor_traits<T>::add(*dx, c);
    else
      throw std::invalid_argument(
          "a chain layer (as_graph_layer) adds its input gradient to the one other ops made, but "
          "the tensor type cannot be added to: give it `operator+=` (element by element, in place) "
          "or specialise tensor_traits<T>::add");
  }
};

namespace detail {
// The layer calls of an op, for the executor and the profiler: the one place that chooses
// between the loss's calls (with the run's targets, or without: no_targets) and the others',
// for chain and DAG models alike (a chain's layers run through as_graph_layer). A call the layer
// does not have throws execution_failure naming `who`; check_model stops every such call at
// compile time but in a range of one type (whose loss may share a base class with the others).
template <class L, class T, class Tg, class B>
T call_forward(L& l, std::span<const T* const> x, bool loss, const Tg& tg, B& b,
               const std::string& who) {
  using tr = dag_layer_traits<L>;
  if (loss && !std::is_same_v<Tg, no_targets>) {
    if constexpr (requires {
                    { tr::forward(l, x, tg, b) } -> std::same_as<T>;
                  })
      return tr::forward(l, x, tg, b);
    else
      throw execution_failure(
          who + " is the loss (the last op), but its layer's forward takes no targets");
  }
  if constexpr (requires {
                  { tr::forward(l, x, b) } -> std::same_as<T>;
                })
    return tr::forward(l, x, b);
  else
    throw execution_failure(
        who + ": its layer's forward takes targets; only the last op, the loss, gets them");
}
template <class L, class T, class Tg, class B>
T call_forward_save(L& l, std::span<const T* const> x, bool loss, const Tg& tg,
                    typename dag_layer_traits<L>::context& ctx, B& b, const std::string& who) {
  using tr = dag_layer_traits<L>;
  if (loss && !std::is_same_v<Tg, no_targets>) {
    if constexpr (requires {
                    { tr::forward_save(l, x, tg, ctx, b) } -> std::same_as<T>;
                  })
      return tr::forward_save(l, x, tg, ctx, b);
    else
      throw execution_failure(
          who + " is the loss (the last op), but its layer's forward_save takes no targets");
  }
  if constexpr (requires {
                  { tr::forward_save(l, x, ctx, b) } -> std::same_as<T>;
                })
    return tr::forward_save(l, x, ctx, b);
  else
    throw execution_failure(
        who + ": its layer's forward_save takes targets; only the last op, the loss, gets them");
}
/// The backward: the loss's (dy == nullptr: the constant 1) or another op's.
template <class L, class T, class Tg, class B>
void call_backward(L& l, std::span<const T* const> x, const T* y,
                   const typename dag_layer_traits<L>::context& ctx, const T* dy, const Tg& tg,
                   std::span<std::optional<T>> dx, B& b, const std::string& who) {
  using tr = dag_layer_traits<L>;
  if (dy != nullptr) {
    if constexpr (requires { tr::backward(l, x, y, ctx, *dy, dx, b); })
      tr::backward(l, x, y, ctx, *dy, dx, b);
    else
      throw execution_failure(who +
                              " is not the last op, but its layer only has a loss backward "
                              "(without the output gradient dy)");
  } else if constexpr (!std::is_same_v<Tg, no_targets>) {
    if constexpr (requires { tr::loss_backward(l, x, y, ctx, tg, dx, b); })
      tr::loss_backward(l, x, y, ctx, tg, dx, b);
    else
      throw execution_failure(
          who + " is the loss (the last op), but its layer's backward takes no targets");
  } else {
    if constexpr (requires { tr::loss_backward(l, x, y, ctx, dx, b); })
      tr::loss_backward(l, x, y, ctx, dx, b);
    else
      throw execution_failure(who +
                              " is the loss (the last op), but its layer has no loss backward "
                              "(without the output gradient dy)");
  }
}

/// One layer type of a model in its role (concepts.hpp's check_*_layer_as): a chain layer, or a
/// graph layer, which may be a chain layer through as_graph_layer.
template <bool graph, class L, class T, class Tg, class B, layer_role role, std::size_t index>
consteval bool check_layer_as() {
  if constexpr (!graph)
    return check_chain_layer_as<L, T, Tg, B, role, index>();
  else if constexpr (is_chain_stage<L>)
    return check_chain_layer_as<std::remove_reference_t<decltype(std::declval<L&>().chain_layer())>,
                                T, Tg, B, role, index>();
  else
    return check_dag_layer_as<L, T, Tg, B, role, index>();
}
template <bool graph, class Layers, class T, class Tg, class B>
struct check_layers {
  /// A range: one type at every place, the loss's included.
  static consteval bool run() {
    using L = std::remove_reference_t<decltype(std::declval<Layers&>()[0])>;
    return check_layer_as<graph, L, T, Tg, B, layer_role::any, 0>();
  }
};
template <bool graph, class... Ls, class T, class Tg, class B>
struct check_layers<graph, std::tuple<Ls...>, T, Tg, B> {
  /// A tuple: each layer in its place, the last the loss.
  static consteval bool run() { return run_at(std::index_sequence_for<Ls...>{}); }
  template <std::size_t... I>
  static consteval bool run_at(std::index_sequence<I...>) {
    constexpr std::size_t last = sizeof...(Ls) - 1;
    return (check_layer_as < graph, Ls, T, Tg, B, I == last ? layer_role::loss : layer_role::inner,
            I > () && ...);
  }
};
/// Stops at compile time a model whose layers cannot run with tensor T, targets Tg (no_targets: a
/// run without), backend B: in a tuple model each layer in its place (before the last, or the
/// loss), in a range the one type in every place.
template <class Model, class T, class Tg, class B>
consteval bool check_model() {
  if constexpr (is_dag_model<Model>)
    return check_layers<true, std::remove_cvref_t<decltype(std::declval<Model&>().layers)>, T, Tg,
                        B>::run();
  else
    return check_layers<false, Model, T, Tg, B>::run();
}
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
