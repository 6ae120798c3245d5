#pragma once
// What the executor needs from the user's types (DESIGN.md §6). User types are adapted either
// by providing the members the default traits look for, or by specialising tensor_traits /
// layer_traits (as fmt's formatter<T>). Host-only: no CUDA header here.
//
// Tensor T: movable; tensor_traits<T>::size(t) is its size in bytes (default: t.bytes()).
//   A tensor owns memory allocated through the backend, so destroying it frees that memory.
//
// Layer L (or a pointer-like to one: std::unique_ptr<Base>, Base*; the traits dereference it),
// with a context type `context` (default-constructible, movable; what forward_save keeps for
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
// Offload, prefetch and wait (schedule.hpp) need a TransferBackend and a TransferableTensor:
// the tensor names the backend buffer that holds its data (tensor_traits<T>::storage(t),
// default: a `storage()` member returning it by reference); the executor moves that buffer to
// the host and back through the backend, and empties it (assigns a default buffer) in between,
// so the tensor object itself (its shape) stays where it is.

#include <chrono>
#include <concepts>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <remat/core/units.hpp>

namespace remat::exec {

// --- tensors -----------------------------------------------------------------------------------

template <class T>
struct tensor_traits {
  static bytes size(const T& t)
    requires requires { { t.bytes() } -> std::convertible_to<bytes>; }
  {
    return static_cast<bytes>(t.bytes());
  }
  /// The backend buffer holding the data (for transfers).
  static decltype(auto) storage(T& t)
    requires requires { t.storage(); }
  {
    return t.storage();
  }
};

template <class T>
concept Tensor = std::movable<T> && requires(const T& t) {
  { tensor_traits<T>::size(t) } -> std::convertible_to<bytes>;
};

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
concept TransferBackend = Backend<B> && requires { typename detail::offload_result_t<B>; } &&
    requires(B& b, detail::offload_result_t<B>& o) {
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

namespace detail {
/// Starts timing work on b: a TimingBackend's mark, or the wall clock.
template <class B>
auto start_timer(B& b) {
  if constexpr (TimingBackend<B>)
    return b.mark_time();
  else
    return std::chrono::steady_clock::now();
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
struct layer_traits {
  using target = detail::target_t<L>;
  using context = typename target::context;

  template <class T, class B>
  static T forward(L& l, const T& x, B& b)
    requires requires(target& t) { { t.forward(x, b) } -> std::convertible_to<T>; }
  {
    return detail::deref(l).forward(x, b);
  }
  template <class T, class B>
  static T forward_save(L& l, const T& x, context& ctx, B& b)
    requires requires(target& t) { { t.forward_save(x, ctx, b) } -> std::convertible_to<T>; }
  {
    return detail::deref(l).forward_save(x, ctx, b);
  }
  template <class T, class B>
  static T backward(L& l, const T& x, const T& y, const context& ctx, const T& dy, B& b)
    requires requires(target& t) { { t.backward(x, y, ctx, dy, b) } -> std::convertible_to<T>; }
  {
    return detail::deref(l).backward(x, y, ctx, dy, b);
  }
  template <class T, class B>
  static T loss_backward(L& l, const T& x, const T& y, const context& ctx, B& b)
    requires requires(target& t) { { t.backward(x, y, ctx, b) } -> std::convertible_to<T>; }
  {
    return detail::deref(l).backward(x, y, ctx, b);
  }
  static bytes context_bytes(const context& ctx)
    requires requires { { ctx.bytes() } -> std::convertible_to<bytes>; }
  {
    return static_cast<bytes>(ctx.bytes());
  }
};

/// The parts of a layer the executor needs for a tensor T and a backend B. Each requirement
/// has its own concept so that a misfit says which one is missing (see check_layer).
template <class L>
concept HasContext = requires { typename layer_traits<L>::context; } &&
                     std::default_initializable<typename layer_traits<L>::context> &&
                     std::movable<typename layer_traits<L>::context>;
template <class L, class T, class B>
concept HasForward = requires(L& l, const T& x, B& b) {
  { layer_traits<L>::forward(l, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasForwardSave = HasContext<L> && requires(L& l, const T& x, typename layer_traits<L>::context& c, B& b) {
  { layer_traits<L>::forward_save(l, x, c, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasBackward = HasContext<L> &&
    requires(L& l, const T& x, const typename layer_traits<L>::context& c, B& b) {
  { layer_traits<L>::backward(l, x, x, c, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasLossBackward = HasContext<L> &&
    requires(L& l, const T& x, const typename layer_traits<L>::context& c, B& b) {
  { layer_traits<L>::loss_backward(l, x, x, c, b) } -> std::same_as<T>;
};
template <class L>
concept HasContextBytes = HasContext<L> && requires(const typename layer_traits<L>::context& c) {
  { layer_traits<L>::context_bytes(c) } -> std::convertible_to<bytes>;
};

/// A chain stage: everything but the loss backward (a stage may provide both backwards).
template <class L, class T, class B>
concept Layer = Tensor<T> && Backend<B> && HasContext<L> && HasForward<L, T, B> &&
                HasForwardSave<L, T, B> && HasContextBytes<L> &&
                (HasBackward<L, T, B> || HasLossBackward<L, T, B>);

/// Stops a misfit with a message that names the missing piece.
template <class L, class T, class B>
consteval bool check_layer() {
  static_assert(Tensor<T>,
                "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` "
                "member returning its size in bytes) and must be movable");
  static_assert(Backend<B>, "remat: the backend type does not satisfy remat::exec::Backend");
  static_assert(HasContext<L>,
                "remat: the layer type needs a default-constructible, movable `context` type "
                "(what forward_save keeps for the backward), or a layer_traits<L> specialisation");
  static_assert(HasForward<L, T, B>,
                "remat: the layer type needs `T forward(const T& x, Backend& b)`, or a "
                "layer_traits<L>::forward");
  static_assert(HasForwardSave<L, T, B>,
                "remat: the layer type needs `T forward_save(const T& x, context& ctx, Backend& b)`, "
                "or a layer_traits<L>::forward_save");
  static_assert(HasContextBytes<L>,
                "remat: the layer's context needs `bytes() const` (its size in bytes), or a "
                "layer_traits<L>::context_bytes");
  static_assert(HasBackward<L, T, B> || HasLossBackward<L, T, B>,
                "remat: the layer type needs `T backward(const T& x, const T& y, const context& "
                "ctx, const T& dy, Backend& b)` (or, for the loss, the same without dy)");
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
  static decltype(auto) visit_impl(std::tuple<Ls...>& m, std::size_t i, F& f, std::index_sequence<I...>) {
    using R = decltype(f(std::get<0>(m)));
    using fn = R (*)(std::tuple<Ls...>&, F&);
    static constexpr fn table[] = {[](std::tuple<Ls...>& t, F& g) -> R { return g(std::get<I>(t)); }...};
    return table[i](m, f);
  }
};

}  // namespace remat::exec
