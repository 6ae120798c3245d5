#pragma once
// What the executor and the profiler need from a backend, the allocator every tensor, context
// and temporary of the layers comes from: Backend (allocate, the bytes in use, a high-water
// mark, a budget, the activity that allocations are charged to), and the optional abilities:
// TransferBackend (offload, prefetch, wait) with a TransferableTensor, ParameterBackend (the
// parameter management of OFFMATE programs), TimingBackend (its own clock), RunAwareBackend
// (told where a run begins and ends) and SynchronizingBackend (waits for its queued work).
// docs/executor.md, "Backends".

#include <chrono>
#include <concepts>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include <remat/core/units.hpp>
#include <remat/exec/adam.hpp>
#include <remat/exec/concepts/tensor.hpp>

namespace remat::exec {

/// A backend: allocate(n) returns a buffer of n bytes counted in in_use() until it is destroyed
/// (past budget() it throws out_of_budget, exec/host_backend.hpp); high_water() is the most in
/// use since reset_high_water(); allocations are charged to the activity set by set_activity().
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

namespace detail {
/// The host copy and transfer types of a TransferBackend (std::monostate for the others).
template <class B, bool = TransferBackend<B>>
struct transfer_types {
  using host = std::monostate;
  using handle = std::monostate;
};
template <class B>
struct transfer_types<B, true> {
  using host = std::remove_cvref_t<decltype(std::declval<offload_result_t<B>&>().first)>;
  using handle = std::remove_cvref_t<decltype(std::declval<offload_result_t<B>&>().second)>;
};
}  // namespace detail

/// Optional: a TransferBackend that runs programs that manage the model's parameters (OFFMATE
/// plans, exec/managed_training.hpp):
///   host_allocate(n) -> H                 a host buffer of the kind offload returns, kept across
///                                         steps; h.data() is host memory the CPU's Adam updates
///   offload_into(const buffer&, H&) -> X  a copy into an existing host buffer of the same size
///   zero(buffer&)                         a gradient before its first contribution
///   device_adam(adam, t, w, g, states)    Adam's step t on device buffers (states: m then v)
template <class B>
concept ParameterBackend = TransferBackend<B> &&
    requires(B& b, buffer_t<B>& d, const buffer_t<B>& cd,
             typename detail::transfer_types<B>::host& h, const adam& opt) {
  { b.host_allocate(bytes{}) } -> std::same_as<typename detail::transfer_types<B>::host>;
  { b.offload_into(cd, h) } -> std::convertible_to<typename detail::transfer_types<B>::handle>;
  b.zero(d);
  b.device_adam(opt, long{}, d, cd, d);
  { h.data() } -> std::convertible_to<void*>;
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
}  // namespace remat::exec
