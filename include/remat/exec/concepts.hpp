#pragma once
// What the executor and the profiler need from the user's types (DESIGN.md §6): tensors,
// backends, and the layers of the two kinds of models, chain models (a range or tuple of chain
// layers) and DAG models (dag_model, below). Names follow one scheme: chain_layer_traits /
// ChainLayer / check_chain_layer for chain layers, dag_layer_traits / DagLayer / check_dag_layer
// for DAG layers. User types are adapted either by providing the members the default traits look
// for, or by specialising tensor_traits / chain_layer_traits / dag_layer_traits (as fmt's
// formatter<T>). Host-only: no CUDA header here.
//
// Tensor T: movable; tensor_traits<T>::size(t) is its size in bytes (default: t.bytes()).
//   A tensor owns memory allocated through the backend, so destroying it frees that memory.
//   Optional: tensor_traits<T>::item(t), the value of a one-element tensor as a double (default:
//   an `item()` member convertible to double, as PyTorch's .item()): the executor reads the
//   loss op's output with it, into run_result::loss. tensor_traits<T>::add(acc, c) (default:
//   `acc += c`), element by element in place: a chain layer in a DAG model (as_graph_layer)
//   whose input other ops also read adds its input gradient with it.
//
// Chain layer L (or a pointer-like to one: std::unique_ptr<Base>, Base*; the traits dereference
// it), with a context type `context` (default-constructible, movable; what forward_save keeps for
// the backward, its size in bytes from ctx.bytes()):
//   T forward(const T& x, Backend& b)                        F^∅ / F^ck: computes y, keeps nothing
//   T forward_save(const T& x, context& ctx, Backend& b)     F^all: computes y, fills ctx
//   T backward(const T& x, const T& y, const context& ctx, const T& dy, Backend& b)
//                    returns dx, accumulates parameter gradients (every stage but the loss)
//   T backward(const T& x, const T& y, const context& ctx, Backend& b)
//                    the loss stage's backward: the output gradient is the constant 1
// x is the stage input and y its output: the executor keeps both alive for the backward (the
// chain model counts them as a_{l-1} and as part of abar_l), so the context need not copy them.
// Every tensor and temporary a layer creates is allocated through b, so that it is counted.
// Optional: S random_state() const and void set_random_state(const S&): the executor restores
// the state before every recomputation, so that random layers (dropout) recompute exactly.
//
// The batch's targets (labels) reach the loss, the last stage, when the run is given them
// (executor::run(schedule, input, targets), profile_chain(model, sample, sample_targets, ...)).
// The loss then takes them, of any type Tg, in all three calls:
//   T forward(const T& x, const Tg& targets, Backend& b)
//   T forward_save(const T& x, const Tg& targets, context& ctx, Backend& b)
//   T backward(const T& x, const T& y, const context& ctx, const Tg& targets, Backend& b)
// A run without targets calls the loss without them (the members above). A loss may have both
// forms. When Tg is T, the loss backward with targets has the signature of a non-loss backward
// (targets in the place of dy): the executor tells them apart by position, the last stage being
// the loss.
//
// Offload, prefetch and wait (schedule.hpp) need a TransferBackend and a TransferableTensor:
// the tensor names the backend buffer that holds its data (tensor_traits<T>::storage(t),
// default: a `storage()` member returning it by reference); the executor moves that buffer to
// the host and back through the backend, and empties it (assigns a default buffer) in between,
// so the tensor object itself (its shape) stays where it is.

#include <chrono>
#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <remat/core/units.hpp>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace remat::exec {

// --- tensors -----------------------------------------------------------------------------------

template <class T>
struct tensor_traits {
  static bytes size(const T& t) requires requires {
    { t.bytes() } -> std::convertible_to<bytes>;
  }
  { return static_cast<bytes>(t.bytes()); }
  /// The backend buffer holding the data (for transfers).
  static decltype(auto) storage(T& t) requires requires { t.storage(); }
  { return t.storage(); }
  /// The value of a one-element tensor (the loss), for run_result::loss.
  static double item(const T& t) requires requires {
    { t.item() } -> std::convertible_to<double>;
  }
  { return static_cast<double>(t.item()); }
  /// acc = acc + c element by element, in place (a chain layer's input gradient added to the
  /// one other ops made, as_graph_layer).
  static void add(T& acc, const T& c) requires requires { acc += c; }
  { acc += c; }
};

template <class T>
concept Tensor = std::movable<T> && requires(const T& t) {
  { tensor_traits<T>::size(t) } -> std::convertible_to<bytes>;
};

/// Optional: a tensor whose value the executor can read as a number (the loss's).
template <class T>
concept ScalarTensor = requires(const T& t) {
  { tensor_traits<T>::item(t) } -> std::convertible_to<double>;
};

/// Optional: a tensor that can be added to in place (as_graph_layer's accumulated gradients).
template <class T>
concept AddableTensor = requires(T& acc, const T& c) {
  tensor_traits<T>::add(acc, c);
};

/// What a run without targets hands the loss: nothing (it calls the loss without targets).
struct no_targets {};

// --- backends ----------------------------------------------------------------------------------

template <class B>
concept Backend = requires(B& b, const B& cb, bytes n) {
  b.allocate(n);
  { cb.in_use() } -> std::convertible_to<bytes>;
  { cb.high_water() } -> std::convertible_to<bytes>;
  { cb.budget() } -> std::convertible_to<bytes>;
  b.reset_high_water();
  b.set_activity(std::string());
  { cb.activity() } -> std::convertible_to<std::string>;
};

/// The buffer type of a backend (what allocate returns).
template <class B>
using buffer_t = std::remove_cvref_t<decltype(std::declval<B&>().allocate(bytes{}))>;

namespace detail {
/// What offload returns: the host copy and the transfer in flight.
template <class B>
using offload_result_t = decltype(std::declval<B&>().offload(std::declval<const buffer_t<B>&>()));
}  // namespace detail

/// Optional: a backend that moves buffers to the host and back, asynchronously or not.
///   offload(const buffer&) -> pair<host copy H, transfer X>   the copy starts after the work
///                                                              queued so far
///   prefetch(const H&) -> pair<buffer, X>                      counted against the budget now
///   wait(const X&)                                             later work waits for the copy
///   X: ready() (never blocks), wait_host() (blocks the host until the copy is done)
/// A buffer being copied must stay alive until its transfer is ready (or waited).
template <class B>
concept TransferBackend = Backend<B> && requires {
  typename detail::offload_result_t<B>;
} && requires(B& b, detail::offload_result_t<B>& o) {
  { o.second.ready() } -> std::convertible_to<bool>;
  o.second.wait_host();
  b.wait(o.second);
  { b.prefetch(o.first).first } -> std::convertible_to<buffer_t<B>>;
  { b.prefetch(o.first).second } -> std::convertible_to<std::remove_cvref_t<decltype(o.second)>>;
};

/// A tensor whose data the executor can move: tensor_traits<T>::storage(t) is the buffer of
/// backend B holding it, which can be emptied (assigned a default one) and refilled.
template <class T, class B>
concept TransferableTensor = Tensor<T> && std::default_initializable<buffer_t<B>> &&
    std::is_move_assignable_v<buffer_t<B>> && requires(T& t) {
  { tensor_traits<T>::storage(t) } -> std::same_as<buffer_t<B>&>;
};

/// Optional: a backend whose work runs asynchronously (the CUDA backend's streams) times it
/// itself. mark_time() records a point in its work, seconds_between(from, to) the time between
/// two (waiting for `to`). The executor and the profiler use it instead of the wall clock.
template <class B>
concept TimingBackend = requires(B& b, const B& cb) {
  b.mark_time();
  { cb.seconds_between(b.mark_time(), b.mark_time()) } -> std::convertible_to<seconds>;
};

/// Optional: a backend told where a run begins and ends (the executor calls begin_run() before
/// the first instruction and end_run() after the last, or after a failure), for instance to
/// record the run's allocations and replay a static placement of them (exec/placement.hpp).
template <class B>
concept RunAwareBackend = requires(B& b) {
  b.begin_run();
  b.end_run();
};

/// Optional: a backend whose work runs asynchronously (the CUDA backend's streams) and can wait
/// for all of it. Before calling the model's host-side hooks (zero_grad() after profiling, and
/// zero_grad() and update in train_step) the profiler and train_step call synchronize(), so that
/// a hook that touches the gradients from the host or from another stream (cudaMemset on the
/// default stream, say) never races with kernels the run queued.
template <class B>
concept SynchronizingBackend = requires(B& b) {
  b.synchronize();
};

namespace detail {
/// Starts timing work on b: a TimingBackend's mark, or the wall clock.
template <class B>
auto start_timer(B& b) {
  if constexpr (TimingBackend<B>)
    return b.mark_time();
  else
    return std::chrono::steady_clock::now();
}
/// Waits until the work queued on b has finished (a SynchronizingBackend), else nothing.
template <class B>
void wait_idle(B& b) {
  if constexpr (SynchronizingBackend<B>) b.synchronize();
}
/// Seconds since `start` (from start_timer on the same backend).
template <class B, class M>
seconds stop_timer(B& b, const M& start) {
  if constexpr (TimingBackend<B>)
    return b.seconds_between(start, b.mark_time());
  else
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace detail

// --- layers ------------------------------------------------------------------------------------

namespace detail {
template <class L>
concept pointer_like = requires(L& l) {
  *l;
  l == nullptr;
};
/// The layer object behind L (L itself, or what a pointer-like L points to).
template <class L>
constexpr decltype(auto) deref(L& l) {
  if constexpr (pointer_like<L>)
    return *l;
  else
    return (l);
}
template <class L>
using target_t = std::remove_cvref_t<decltype(deref(std::declval<L&>()))>;
}  // namespace detail

template <class L>
struct chain_layer_traits {
  using target = detail::target_t<L>;
  using context = typename target::context;

  template <class T, class B>
  static T forward(L& l, const T& x, B& b) requires requires(target& t) {
    { t.forward(x, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward(x, b); }
  template <class T, class B>
  static T forward_save(L& l, const T& x, context& ctx, B& b) requires requires(target& t) {
    { t.forward_save(x, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward_save(x, ctx, b); }
  template <class T, class B>
  static T backward(L& l, const T& x, const T& y, const context& ctx, const T& dy, B& b) requires
      requires(target& t) {
    { t.backward(x, y, ctx, dy, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).backward(x, y, ctx, dy, b); }
  template <class T, class B>
  static T loss_backward(L& l, const T& x, const T& y, const context& ctx, B& b) requires
      requires(target& t) {
    { t.backward(x, y, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).backward(x, y, ctx, b); }
  // The loss with the batch's targets.
  template <class T, class Tg, class B>
  static T forward(L& l, const T& x, const Tg& tg, B& b) requires requires(target& t) {
    { t.forward(x, tg, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward(x, tg, b); }
  template <class T, class Tg, class B>
  static T forward_save(L& l, const T& x, const Tg& tg, context& ctx, B& b) requires
      requires(target& t) {
    { t.forward_save(x, tg, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward_save(x, tg, ctx, b); }
  template <class T, class Tg, class B>
  static T loss_backward(L& l, const T& x, const T& y, const context& ctx, const Tg& tg,
                         B& b) requires requires(target& t) {
    { t.backward(x, y, ctx, tg, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).backward(x, y, ctx, tg, b); }
  static bytes context_bytes(const context& ctx) requires requires {
    { ctx.bytes() } -> std::convertible_to<bytes>;
  }
  { return static_cast<bytes>(ctx.bytes()); }
};

/// The parts of a layer the executor needs for a tensor T and a backend B. Each requirement
/// has its own concept so that a misfit says which one is missing (see check_chain_layer).
template <class L>
concept HasChainContext = requires {
  typename chain_layer_traits<L>::context;
}
&&std::default_initializable<typename chain_layer_traits<L>::context>&&
    std::movable<typename chain_layer_traits<L>::context>;
template <class L, class T, class B>
concept HasChainForward = requires(L& l, const T& x, B& b) {
  { chain_layer_traits<L>::forward(l, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasChainForwardSave = HasChainContext<L> &&
    requires(L& l, const T& x, typename chain_layer_traits<L>::context& c, B& b) {
  { chain_layer_traits<L>::forward_save(l, x, c, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasChainBackward = HasChainContext<L> &&
    requires(L& l, const T& x, const typename chain_layer_traits<L>::context& c, B& b) {
  { chain_layer_traits<L>::backward(l, x, x, c, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasChainLossBackward = HasChainContext<L> &&
    requires(L& l, const T& x, const typename chain_layer_traits<L>::context& c, B& b) {
  { chain_layer_traits<L>::loss_backward(l, x, x, c, b) } -> std::same_as<T>;
};
template <class L>
concept HasChainContextBytes = HasChainContext<L> &&
    requires(const typename chain_layer_traits<L>::context& c) {
  { chain_layer_traits<L>::context_bytes(c) } -> std::convertible_to<bytes>;
};
/// The loss with the targets Tg: its forward, forward_save and backward take them.
template <class L, class T, class Tg, class B>
concept HasChainTargetsLoss = HasChainContext<L> &&
    requires(L& l, const T& x, const Tg& tg, typename chain_layer_traits<L>::context& c, B& b) {
  { chain_layer_traits<L>::forward(l, x, tg, b) } -> std::same_as<T>;
  { chain_layer_traits<L>::forward_save(l, x, tg, c, b) } -> std::same_as<T>;
  { chain_layer_traits<L>::loss_backward(l, x, x, std::as_const(c), tg, b) } -> std::same_as<T>;
};

/// A chain stage: everything but the loss backward (a stage may provide both backwards).
template <class L, class T, class B>
concept ChainLayer = Tensor<T> && Backend<B> && HasChainContext<L> && HasChainForward<L, T, B> &&
    HasChainForwardSave<L, T, B> && HasChainContextBytes<L> &&
    (HasChainBackward<L, T, B> || HasChainLossBackward<L, T, B>);

namespace detail {
/// What every chain layer needs, whatever its place in the model.
template <class L, class T, class B>
consteval bool check_chain_basics() {
  static_assert(
      Tensor<T>,
      "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` "
      "member returning its size in bytes) and must be movable");
  static_assert(Backend<B>, "remat: the backend type does not satisfy remat::exec::Backend");
  static_assert(
      HasChainContext<L>,
      "remat: the layer type needs a default-constructible, movable `context` type "
      "(what forward_save keeps for the backward), or a chain_layer_traits<L> specialisation");
  static_assert(HasChainContextBytes<L>,
                "remat: the layer's context needs `bytes() const` (its size in bytes), or a "
                "chain_layer_traits<L>::context_bytes");
  return true;
}
}  // namespace detail

/// Stops a misfit with a message that names the missing piece.
template <class L, class T, class B>
consteval bool check_chain_layer() {
  (void)detail::check_chain_basics<L, T, B>();
  static_assert(HasChainForward<L, T, B>,
                "remat: the layer type needs `T forward(const T& x, Backend& b)`, or a "
                "chain_layer_traits<L>::forward");
  static_assert(
      HasChainForwardSave<L, T, B>,
      "remat: the layer type needs `T forward_save(const T& x, context& ctx, Backend& b)`, "
      "or a chain_layer_traits<L>::forward_save");
  static_assert(HasChainBackward<L, T, B> || HasChainLossBackward<L, T, B>,
                "remat: the layer type needs `T backward(const T& x, const T& y, const context& "
                "ctx, const T& dy, Backend& b)` (or, for the loss, the same without dy)");
  return true;
}

/// A layer's place in a model, for the checks of a whole model: before the last, the last (the
/// loss), or any (a range: one type for every place).
enum class layer_role { inner, loss, any };

/// check_chain_layer, and what the layer's role asks for a run with targets Tg (no_targets: a run
/// without): a layer before the last needs the backward with dy; the loss the calls of a loss
/// (with Tg's targets when the run has them); a range's one type what every layer needs and the
/// loss's calls (which backward the object in each place runs, as with a base class implementing
/// either, is checked when the run reaches it). `layer_index` is the layer's place in a tuple
/// model: the compiler's notes name it when an assertion fails.
template <class L, class T, class Tg, class B, layer_role role, std::size_t layer_index = 0>
consteval bool check_chain_layer_as() {
  constexpr bool targets = !std::is_same_v<Tg, no_targets>;
  if constexpr (role == layer_role::loss)
    (void)detail::check_chain_basics<L, T, B>();
  else
    (void)check_chain_layer<L, T, B>();
  if constexpr (role == layer_role::inner)
    static_assert(!HasChainLossBackward<L, T, B> || HasChainBackward<L, T, B>,
                  "remat: a layer before the last (layer_index, 0-based) has only a loss backward "
                  "(without dy); only the last layer of a model is the loss, the others need `T "
                  "backward(const T& x, const T& y, const context& ctx, const T& dy, Backend& b)`");
  // A range's one type is checked as the loss where it is a layer otherwise (so that a misfit
  // says first what every layer lacks).
  constexpr bool fits =
      HasChainContext<L> &&
      (role == layer_role::loss || (HasChainForward<L, T, B> && HasChainForwardSave<L, T, B>));
  if constexpr (role != layer_role::inner && targets)
    static_assert(
        !fits || HasChainTargetsLoss<L, T, Tg, B>,
        "remat: the run passes targets, so the last layer (the loss) needs `T forward(const "
        "T& x, const Tg& targets, Backend& b)`, `T forward_save(const T& x, const Tg& "
        "targets, context& ctx, Backend& b)` and `T backward(const T& x, const T& y, const "
        "context& ctx, const Tg& targets, Backend& b)`; or run without targets");
  if constexpr (role != layer_role::inner && !targets)
    static_assert(
        !fits || (role == layer_role::any && !HasChainBackward<L, T, B>) ||
            (HasChainForward<L, T, B> && HasChainForwardSave<L, T, B> &&
             HasChainLossBackward<L, T, B>),
        "remat: the last layer is the loss and the run passes no targets: it needs `T "
        "forward(const T& x, Backend& b)`, `T forward_save(const T& x, context& ctx, "
        "Backend& b)` and `T backward(const T& x, const T& y, const context& ctx, Backend& "
        "b)` (no dy); a loss that takes the batch's targets gets them from "
        "run(schedule, input, targets) and profile_chain(model, sample, sample_targets, "
        "backend)");
  return true;
}

/// Optional random state, saved and replayed by the executor.
template <class L>
concept HasRandomState = requires(L& l) {
  detail::deref(l).random_state();
  detail::deref(l).set_random_state(detail::deref(l).random_state());
};

namespace detail {
/// The layer's random state (0 for a layer without one).
template <class L>
auto random_state_of(L& layer) {
  if constexpr (HasRandomState<L>)
    return deref(layer).random_state();
  else
    return 0;
}

/// A layer's random state as it is now, to put back before each replay (the profilers run a
/// layer several times: each run draws the same numbers, and the layer ends as it began). For a
/// layer without random state it does nothing.
template <class L>
class saved_random_state {
 public:
  explicit saved_random_state(L& layer) : layer_(layer), state_(random_state_of(layer)) {}
  void restore() const {
    if constexpr (HasRandomState<L>) deref(layer_).set_random_state(state_);
  }

 private:
  L& layer_;
  decltype(random_state_of(std::declval<L&>())) state_;
};
}  // namespace detail

// --- models: a sequence of layers ----------------------------------------------------------------

/// A model is a random-access range of layers (std::vector<L>, std::array, ...) or a std::tuple
/// of layers; stage l of the chain is element l-1.
template <class M>
struct model_traits {
  static std::size_t size(const M& m) { return std::size(m); }
  template <class F>
  static decltype(auto) visit(M& m, std::size_t i, F&& f) {
    return std::forward<F>(f)(m[i]);
  }
};

template <class... Ls>
struct model_traits<std::tuple<Ls...>> {
  static constexpr std::size_t size(const std::tuple<Ls...>&) { return sizeof...(Ls); }
  template <class F>
  static decltype(auto) visit(std::tuple<Ls...>& m, std::size_t i, F&& f) {
    return visit_impl(m, i, f, std::index_sequence_for<Ls...>{});
  }

 private:
  template <class F, std::size_t... I>
  static decltype(auto) visit_impl(std::tuple<Ls...>& m, std::size_t i, F& f,
                                   std::index_sequence<I...>) {
    using R = decltype(f(std::get<0>(m)));
    using fn = R (*)(std::tuple<Ls...>&, F&);
    static constexpr fn table[] = {
        [](std::tuple<Ls...>& t, F& g) -> R { return g(std::get<I>(t)); }...};
    return table[i](m, f);
  }
};

// --- DAG layers and models ---------------------------------------------------------------------
//
// DAG layers: the ops of a forward DAG (rockmate-spec §1.2), each reading one or more tensors.
// As for chains, user types are adapted by providing the members the default dag_layer_traits
// look for, or by specialising dag_layer_traits; tensors and backends are the same.
//
// A graph layer L (or a pointer-like to one), with a `context` type as a chain layer's
// (default-constructible, movable, ctx.bytes()):
//   T forward(std::span<const T* const> x, Backend& b)                  fast-forward: keeps nothing
//   T forward_save(std::span<const T* const> x, context& ctx, Backend& b)
//                    computes the same y, fills ctx (the graph's phantom)
//   void backward(std::span<const T* const> x, const T* y, const context& ctx, const T& dy,
//                 std::span<std::optional<T>> dx, Backend& b)
//   void backward(std::span<const T* const> x, const T* y, const context& ctx,
//                 std::span<std::optional<T>> dx, Backend& b)      the loss: dy is the constant 1
// x holds the op's inputs in the order its dag_op lists them. In the backward, x[j] and y are
// null unless backward_reads() says the backward reads them (the graph keeps alive exactly what
// it reads, so a backward that reads nothing lets the planner free the tensors early).
//
// dx[j] is the gradient of input j, shared by every op that reads that tensor (a tensor read by k
// ops has k contributions, rockmate-spec §1.2). When dx[j] is empty, the backward creates it
// (through b) with its contribution; when it holds the sum of earlier contributions, the backward
// adds its own in place, element by element: dx[j][e] = dx[j][e] + c[e], with c computed by the
// same operations as when it creates dx[j]. This is what makes the executor's gradients bitwise
// those of plain training: one rounding per contribution and element, so two contributions give
// the same bits in either order (floating-point addition is commutative); for three or more the
// executor keeps store-all's order (executor.hpp). Adding in place, without a temporary,
// is also what the graph model counts (an alive gradient costs nothing more to accumulate into);
// a layer that needs a temporary to accumulate is still safe: the profiler measures the backward
// both ways and plans for the larger overhead.
//
// The loss with the batch's targets Tg (as for chains, when the run passes them):
//   T forward(std::span<const T* const> x, const Tg& targets, Backend& b)
//   T forward_save(std::span<const T* const> x, const Tg& targets, context& ctx, Backend& b)
//   void backward(std::span<const T* const> x, const T* y, const context& ctx, const Tg& targets,
//                 std::span<std::optional<T>> dx, Backend& b)
//
// Optional: backward_needs backward_reads() const (default: every input and the output), and the
// chain layers' S random_state() const / void set_random_state(const S&) and zero_grad(). A chain
// layer is a graph layer through as_graph_layer (exec/executor.hpp).
//
// A model is a dag_model: the layers (a random-access range or a std::tuple, as for chains) and,
// per layer, its op: a name and the tensors it reads ("input" for the graph input, or other
// ops' names). The last op is the loss.
/// What a layer's backward reads besides its context and the output gradient.
struct backward_needs {
  bool inputs = true;  ///< every input x[j] (false: none)
  bool output = true;  ///< its output y

  friend constexpr bool operator==(const backward_needs&, const backward_needs&) = default;
};

template <class L>
struct dag_layer_traits {
  using target = detail::target_t<L>;
  using context = typename target::context;

  template <class T, class B>
  static T forward(L& l, std::span<const T* const> x, B& b) requires requires(target& t) {
    { t.forward(x, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward(x, b); }
  template <class T, class B>
  static T forward_save(L& l, std::span<const T* const> x, context& ctx, B& b) requires
      requires(target& t) {
    { t.forward_save(x, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward_save(x, ctx, b); }
  template <class T, class B>
  static void backward(L& l, std::span<const T* const> x, const T* y, const context& ctx,
                       const T& dy, std::span<std::optional<T>> dx, B& b) requires
      requires(target& t) {
    t.backward(x, y, ctx, dy, dx, b);
  }
  { detail::deref(l).backward(x, y, ctx, dy, dx, b); }
  template <class T, class B>
  static void loss_backward(L& l, std::span<const T* const> x, const T* y, const context& ctx,
                            std::span<std::optional<T>> dx, B& b) requires requires(target& t) {
    t.backward(x, y, ctx, dx, b);
  }
  { detail::deref(l).backward(x, y, ctx, dx, b); }
  // The loss with the batch's targets.
  template <class T, class Tg, class B>
  static T forward(L& l, std::span<const T* const> x, const Tg& tg, B& b) requires
      requires(target& t) {
    { t.forward(x, tg, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward(x, tg, b); }
  template <class T, class Tg, class B>
  static T forward_save(L& l, std::span<const T* const> x, const Tg& tg, context& ctx,
                        B& b) requires requires(target& t) {
    { t.forward_save(x, tg, ctx, b) } -> std::convertible_to<T>;
  }
  { return detail::deref(l).forward_save(x, tg, ctx, b); }
  template <class T, class Tg, class B>
  static void loss_backward(L& l, std::span<const T* const> x, const T* y, const context& ctx,
                            const Tg& tg, std::span<std::optional<T>> dx, B& b) requires
      requires(target& t) {
    t.backward(x, y, ctx, tg, dx, b);
  }
  { detail::deref(l).backward(x, y, ctx, tg, dx, b); }
  static bytes context_bytes(const context& ctx) requires requires {
    { ctx.bytes() } -> std::convertible_to<bytes>;
  }
  { return static_cast<bytes>(ctx.bytes()); }
  static backward_needs reads(L& l) {
    if constexpr (requires(target & t) {
                    { t.backward_reads() } -> std::convertible_to<backward_needs>;
                  })
      return detail::deref(l).backward_reads();
    else
      return {};
  }
};

/// The parts of a graph layer, one concept each so that a misfit says which is missing.
template <class L>
concept HasDagContext = requires {
  typename dag_layer_traits<L>::context;
}
&&std::default_initializable<typename dag_layer_traits<L>::context>&&
    std::movable<typename dag_layer_traits<L>::context>;
template <class L, class T, class B>
concept HasDagForward = requires(L& l, std::span<const T* const> x, B& b) {
  { dag_layer_traits<L>::forward(l, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasDagForwardSave = HasDagContext<L> &&
    requires(L& l, std::span<const T* const> x, typename dag_layer_traits<L>::context& c, B& b) {
  { dag_layer_traits<L>::forward_save(l, x, c, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasDagBackward = HasDagContext<L> &&
    requires(L& l, std::span<const T* const> x, const T* y, const T& dy,
             const typename dag_layer_traits<L>::context& c, std::span<std::optional<T>> dx, B& b) {
  dag_layer_traits<L>::backward(l, x, y, c, dy, dx, b);
};
template <class L, class T, class B>
concept HasDagLossBackward = HasDagContext<L> &&
    requires(L& l, std::span<const T* const> x, const T* y,
             const typename dag_layer_traits<L>::context& c, std::span<std::optional<T>> dx, B& b) {
  dag_layer_traits<L>::loss_backward(l, x, y, c, dx, b);
};
template <class L>
concept HasDagContextBytes = HasDagContext<L> &&
    requires(const typename dag_layer_traits<L>::context& c) {
  { dag_layer_traits<L>::context_bytes(c) } -> std::convertible_to<bytes>;
};
/// The loss with the targets Tg: its forward, forward_save and backward take them.
template <class L, class T, class Tg, class B>
concept HasDagTargetsLoss = HasDagContext<L> &&
    requires(L& l, std::span<const T* const> x, const T* y, const Tg& tg,
             typename dag_layer_traits<L>::context& c, std::span<std::optional<T>> dx, B& b) {
  { dag_layer_traits<L>::forward(l, x, tg, b) } -> std::same_as<T>;
  { dag_layer_traits<L>::forward_save(l, x, tg, c, b) } -> std::same_as<T>;
  dag_layer_traits<L>::loss_backward(l, x, y, std::as_const(c), tg, dx, b);
};

/// An op of a DAG model: everything but the loss backward (an op may provide both backwards).
template <class L, class T, class B>
concept DagLayer = Tensor<T> && Backend<B> && HasDagContext<L> && HasDagForward<L, T, B> &&
    HasDagForwardSave<L, T, B> && HasDagContextBytes<L> &&
    (HasDagBackward<L, T, B> || HasDagLossBackward<L, T, B>);

namespace detail {
/// What every graph layer needs, whatever its place in the model.
template <class L, class T, class B>
consteval bool check_dag_basics() {
  static_assert(
      Tensor<T>,
      "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` "
      "member returning its size in bytes) and must be movable");
  static_assert(Backend<B>, "remat: the backend type does not satisfy remat::exec::Backend");
  static_assert(HasDagContext<L>,
                "remat: the graph layer type needs a default-constructible, movable `context` type "
                "(what forward_save keeps for the backward), or a dag_layer_traits<L> "
                "specialisation");
  static_assert(HasDagContextBytes<L>,
                "remat: the graph layer's context needs `bytes() const` (its size in bytes), or a "
                "dag_layer_traits<L>::context_bytes");
  return true;
}
}  // namespace detail

/// Stops a misfit with a message that names the missing piece.
template <class L, class T, class B>
consteval bool check_dag_layer() {
  (void)detail::check_dag_basics<L, T, B>();
  static_assert(
      HasDagForward<L, T, B>,
      "remat: the graph layer type needs `T forward(std::span<const T* const> x, Backend& "
      "b)`, or a dag_layer_traits<L>::forward");
  static_assert(HasDagForwardSave<L, T, B>,
                "remat: the graph layer type needs `T forward_save(std::span<const T* const> x, "
                "context& ctx, Backend& b)`, or a dag_layer_traits<L>::forward_save");
  static_assert(HasDagBackward<L, T, B> || HasDagLossBackward<L, T, B>,
                "remat: the graph layer type needs `void backward(std::span<const T* const> x, "
                "const T* y, const context& ctx, const T& dy, std::span<std::optional<T>> dx, "
                "Backend& b)` (or, for the loss, the same without dy)");
  return true;
}

/// check_dag_layer and what the layer's role asks, as check_chain_layer_as for chain layers.
template <class L, class T, class Tg, class B, layer_role role, std::size_t layer_index = 0>
consteval bool check_dag_layer_as() {
  constexpr bool targets = !std::is_same_v<Tg, no_targets>;
  if constexpr (role == layer_role::loss)
    (void)detail::check_dag_basics<L, T, B>();
  else
    (void)check_dag_layer<L, T, B>();
  if constexpr (role == layer_role::inner)
    static_assert(
        !HasDagLossBackward<L, T, B> || HasDagBackward<L, T, B>,
        "remat: a graph layer before the last (layer_index, 0-based) has only a loss "
        "backward (without dy); only the last op of a model is the loss, the others need "
        "`void backward(std::span<const T* const> x, const T* y, const context& ctx, const "
        "T& dy, std::span<std::optional<T>> dx, Backend& b)`");
  // A range's one type is checked as the loss where it is a layer otherwise (so that a misfit
  // says first what every layer lacks).
  constexpr bool fits =
      HasDagContext<L> &&
      (role == layer_role::loss || (HasDagForward<L, T, B> && HasDagForwardSave<L, T, B>));
  if constexpr (role != layer_role::inner && targets)
    static_assert(
        !fits || HasDagTargetsLoss<L, T, Tg, B>,
        "remat: the run passes targets, so the last graph layer (the loss) needs `T "
        "forward(std::span<const T* const> x, const Tg& targets, Backend& b)`, `T "
        "forward_save(std::span<const T* const> x, const Tg& targets, context& ctx, "
        "Backend& b)` and `void backward(std::span<const T* const> x, const T* y, const "
        "context& ctx, const Tg& targets, std::span<std::optional<T>> dx, Backend& b)`; or "
        "run without targets");
  if constexpr (role != layer_role::inner && !targets)
    static_assert(
        !fits || (role == layer_role::any && !HasDagBackward<L, T, B>) ||
            (HasDagForward<L, T, B> && HasDagForwardSave<L, T, B> && HasDagLossBackward<L, T, B>),
        "remat: the last graph layer is the loss and the run passes no targets: it needs "
        "`T forward(std::span<const T* const> x, Backend& b)`, `T "
        "forward_save(std::span<const T* const> x, context& ctx, Backend& b)` and `void "
        "backward(std::span<const T* const> x, const T* y, const context& ctx, "
        "std::span<std::optional<T>> dx, Backend& b)` (no dy); a loss that takes the "
        "batch's targets gets them from run(schedule, input, targets) and "
        "profile_dag(model, sample, sample_targets, backend)");
  return true;
}

// --- models: a DAG of layers ---------------------------------------------------------------------

/// One op of a DAG model: its name (unique; not "input" nor "output") and the tensors it reads,
/// in the order its layer takes them: "input" (the graph input) or other ops' names. An op reads
/// a tensor once (a layer that uses a tensor twice reads it once and uses it twice).
struct dag_op {
  std::string name;
  std::vector<std::string> inputs;

  friend bool operator==(const dag_op&, const dag_op&) = default;
};

/// A DAG of layers: op i runs element i of `layers` (a random-access range of layers or a
/// std::tuple, as a chain model) and reads ops[i].inputs. The last op is the loss function.
template <class Layers>
struct dag_model {
  Layers layers;
  std::vector<dag_op> ops;
};

}  // namespace remat::exec
