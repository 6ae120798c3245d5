#pragma once
// executor<Backend, Model>: runs a chain schedule over the user's layers (DESIGN.md §6).
//
// It keeps, frees and recomputes exactly as the schedule says, with the semantics of the
// simulator (shilova-spec §2.1, Table 2.1), and nothing else stays alive:
//   F_l^∅   y = forward(x); the plain input a_{l-1} is freed; y is stored as a_l
//   F_l^ck  y = forward(x); the input is kept; y is stored as a_l
//   F_l^all y = forward_save(x, ctx); the input is kept; (y, ctx) is stored as abar_l
//   B_l     dx = backward(x, y, ctx, dy) (the loss stage: without dy); delta_l and abar_l are
//           freed, and a plain a_{l-1} too; dx is delta_{l-1}
// Every tensor is allocated by the layers through the backend, so the backend's high-water mark
// is the run's real peak: the memory the simulator predicts, up to what the model leaves out
// (allocations a layer makes around the backend, such as a library's internal scratch).
//
// Transfers (a TransferBackend and a TransferableTensor, exec/concepts.hpp; the semantics of
// sim/simulate.hpp):
//   O_k     the buffer of a_k goes to the host through backend.offload; its device memory is
//           released as soon as the copy is ready (at once on host_backend, whose copies are
//           synchronous), at the latest at W_k
//   P_k     backend.prefetch: a new device buffer, counted from now, refilled from the host copy
//   W_k     backend.wait: later work waits for the copy; the host copy of a prefetch is released
//           once the copy is ready (at the latest when the run ends)
// On host_backend the measured per-op memory is the simulator's with an infinite bandwidth; on
// an asynchronous backend an offload frees its memory when its copy is seen done, which can be
// later than the simulator's model of the link says (the pool's budget still holds: an
// allocation that does not fit is an execution_error).
//
// Layers with randomness replay it: the executor saves a stage's random state before its first
// forward of a run and restores it before every recomputation, so recomputed activations are
// bitwise the ones of the first pass, and the gradients bitwise those of plain training.
//
// Times are the wall clock's, or, for a TimingBackend (the CUDA backend), the backend's own marks
// (events recorded between the instructions, read once the run has ended, so the host never
// waits in between). A RunAwareBackend is told where the run begins and ends (begin_run,
// end_run), e.g. to record it and replay a static placement (exec/placement.hpp).
//
// Failures come back as status::execution_error (a layer threw, returned a tensor larger than
// the chain it was planned with, or an allocation went past the backend's budget) or
// invalid_problem (a schedule the simulator rejects, a model that does not match the chain).
// After a failure the layers' random states are as before the run; parameters are never
// touched by the executor (parameter gradients may hold a partial accumulation: zero them).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/host_backend.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::exec {

/// What one run measured.
template <class T>
struct run_result {
  T input_gradient;               ///< delta_0
  bytes measured_peak = 0;        ///< the run's peak in the backend, the input included
  seconds elapsed = 0;            ///< wall-clock time of the run
  std::vector<bytes> op_peaks;    ///< per instruction: peak while it ran (same basis)
  std::vector<seconds> op_times;  ///< per instruction: wall-clock time
  std::vector<int> forwards;      ///< forward calls per stage, index 1..N (0 unused)
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
template <class V>
std::unique_ptr<box_base> boxed(V v) {
  auto b = std::make_unique<box<V>>();
  b->value = std::move(v);
  return b;
}
template <class L>
using random_state_t = std::remove_cvref_t<decltype(deref(std::declval<L&>()).random_state())>;

/// Puts back, for each layer i of `model` with a saved state saved[first + i], that random
/// state (the chain executor keeps stage l's at index l: first = 1; the graph executor op i's
/// at i: first = 0).
template <class Model>
void restore_random_states(Model& model, std::size_t layers,
                           const std::vector<std::unique_ptr<box_base>>& saved,
                           std::size_t first) {
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

inline std::string stage_name(const chain& c, int l) {
  std::string s = "stage " + std::to_string(l);
  if (!c.at(l).name.empty()) s += " ('" + c.at(l).name + "')";
  return s;
}

}  // namespace detail

template <class B, class Model>
class executor {
  static_assert(Backend<B>, "remat: executor<Backend, Model>: Backend must satisfy remat::exec::Backend");

 public:
  executor(Model& model, const chain& c, B& backend) : model_(model), chain_(c), backend_(backend) {}

  /// Runs the schedule on `input` (a_0, which the run consumes). Returns the input gradient and
  /// the measurements, or why the run failed.
  template <class T>
  result<run_result<T>> run(const schedule& s, T input);

 private:
  template <class T>
  struct state;

  Model& model_;
  const chain& chain_;
  B& backend_;
};

template <class B, class Model>
template <class T>
struct executor<B, Model>::state {
  using host_t = typename detail::transfer_types<B>::host;
  using handle_t = typename detail::transfer_types<B>::handle;
  explicit state(int n)
      : plain(static_cast<std::size_t>(n + 1)), full_y(static_cast<std::size_t>(n + 1)),
        full_ctx(static_cast<std::size_t>(n + 1)), rng_before(static_cast<std::size_t>(n + 1)),
        rng_after(static_cast<std::size_t>(n + 1)), host_copy(static_cast<std::size_t>(n + 1)),
        moving(static_cast<std::size_t>(n + 1)), offloading(static_cast<std::size_t>(n + 1), 0),
        leaving(static_cast<std::size_t>(n + 1), 0) {}
  std::vector<std::optional<T>> plain;                          // a_k
  std::vector<std::optional<T>> full_y;                         // abar_k: the output ...
  std::vector<std::unique_ptr<detail::box_base>> full_ctx;      // ... and the context
  std::optional<T> grad;                                        // the current delta
  std::vector<std::unique_ptr<detail::box_base>> rng_before, rng_after;
  // Transfers: a_k's host copy, its transfer in flight (offload or prefetch, until W_k), whether
  // that is an offload, whether the offload's device buffer is still held, and prefetches
  // waited for whose host copy is released once the copy is ready.
  std::vector<std::optional<host_t>> host_copy;
  std::vector<std::optional<handle_t>> moving;
  std::vector<char> offloading, leaving;
  std::vector<std::pair<host_t, handle_t>> retiring;
};

template <class B, class Model>
template <class T>
result<run_result<T>> executor<B, Model>::run(const schedule& s, T input) {
  static_assert(Tensor<T>, "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` member "
                "returning its size in bytes) and must be movable");
  using clock = std::chrono::steady_clock;
  using mt = model_traits<Model>;
  const int n = chain_.length();
  auto invalid = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (static_cast<int>(mt::size(model_)) != n)
    return invalid("executor: the model has " + std::to_string(mt::size(model_)) + " layers but the chain '" +
                   chain_.name + "' has " + std::to_string(n) + " stages; plan with the chain of this model");
  if (const auto rep = sim::simulate(chain_, s, {.record_timeline = false}); !rep.valid)
    return invalid("executor: the schedule is not valid for chain '" + chain_.name +
                   "': " + rep.first_violation->message);
  constexpr bool can_transfer = TransferBackend<B> && TransferableTensor<T, B>;
  if constexpr (!can_transfer) {
    for (std::size_t j = 0; j < s.ops.size(); ++j)
      if (!s.ops[j].is_compute())
        return invalid("executor: op " + std::to_string(j) + " (" + to_string(s.ops[j]) + ") moves an activation, but " +
                       (TransferBackend<B> ? std::string("the tensor type does not name its backend buffer: give it a "
                                                         "`storage()` member returning the buffer by reference, or "
                                                         "specialise tensor_traits<T>::storage")
                                           : std::string("the backend has no offload/prefetch/wait (it is not a "
                                                         "remat::exec::TransferBackend)")));
  }
  if (tensor_traits<T>::size(input) > chain_.a(0))
    return error{status::execution_error,
                 "executor: the input has " + format_bytes(tensor_traits<T>::size(input)) +
                     ", more than the chain's input_bytes (" + format_bytes(chain_.a(0)) + ")",
                 {}};

  state<T> st(n);
  struct {
    std::vector<bytes> op_peaks;
    std::vector<seconds> op_times;
    std::vector<int> forwards;
  } out;
  out.forwards.assign(static_cast<std::size_t>(n + 1), 0);
  out.op_peaks.reserve(s.ops.size());
  out.op_times.reserve(s.ops.size());
  // The run's memory is measured from here, with the input counted.
  const bytes baseline = backend_.in_use() - tensor_traits<T>::size(input);
  st.plain[0] = std::move(input);
  backend_.reset_high_water();
  bytes peak = backend_.high_water() - baseline;
  auto k = [](int i) { return static_cast<std::size_t>(i); };

  // Releases what finished copies no longer need: the device buffers of offloads, the host
  // copies of waited prefetches (`all`: every one, waiting for the copies; after the run).
  [[maybe_unused]] auto retire = [&](bool all) {
    if constexpr (can_transfer) {
      for (int j = 0; j <= n; ++j) {
        auto& x = st.moving[k(j)];
        if (st.leaving[k(j)] && (all || x->ready())) {
          if (all) x->wait_host();
          tensor_traits<T>::storage(*st.plain[k(j)]) = buffer_t<B>{};
          st.leaving[k(j)] = 0;
        }
      }
      std::erase_if(st.retiring, [&](auto& r) {
        if (all) r.second.wait_host();
        return all || r.second.ready();
      });
    }
  };
  [[maybe_unused]] auto run_transfer = [&](const instruction& ins) {
    if constexpr (can_transfer) {
      const auto j = k(ins.index);
      backend_.set_activity(to_string(ins) + " of a_" + std::to_string(ins.index));
      auto& storage = tensor_traits<T>::storage(*st.plain[j]);
      if (ins.kind == op_kind::offload) {
        auto [h, x] = backend_.offload(storage);
        st.host_copy[j] = std::move(h);
        st.moving[j] = std::move(x);
        st.offloading[j] = 1;
        st.leaving[j] = 1;
      } else if (ins.kind == op_kind::prefetch) {
        auto [d, x] = backend_.prefetch(*st.host_copy[j]);
        storage = std::move(d);
        st.moving[j] = std::move(x);
      } else {
        backend_.wait(*st.moving[j]);
        if (st.offloading[j]) {  // the offload is done for the compute lane: its buffer can go
          storage = buffer_t<B>{};
          st.offloading[j] = st.leaving[j] = 0;
        } else {  // the prefetch: its host copy goes once the copy is ready
          st.retiring.emplace_back(std::move(*st.host_copy[j]), std::move(*st.moving[j]));
          st.host_copy[j].reset();
        }
        st.moving[j].reset();
      }
      retire(false);
    }
  };

  auto run_op = [&](const instruction& ins) {
    if (!ins.is_compute()) return run_transfer(ins);
    const int l = ins.index;
    mt::visit(model_, k(l - 1), [&](auto& layer) {
      using layer_t = std::remove_reference_t<decltype(layer)>;
      using traits = layer_traits<layer_t>;
      static_assert(check_layer<layer_t, T, B>());
      using C = typename traits::context;
      const std::string who = detail::stage_name(chain_, l);
      backend_.set_activity(to_string(ins) + " of " + who);
      const T& x = st.plain[k(l - 1)] ? *st.plain[k(l - 1)] : *st.full_y[k(l - 1)];
      if (ins.kind == op_kind::forward) {
        if constexpr (HasRandomState<layer_t>) {
          auto& target = detail::deref(layer);
          if (!st.rng_before[k(l)])
            st.rng_before[k(l)] = detail::boxed(target.random_state());
          else
            target.set_random_state(detail::unbox<detail::random_state_t<layer_t>>(st.rng_before[k(l)]));
        }
        ++out.forwards[k(l)];
        if (ins.mode == forward_mode::save_all) {
          auto ctx = std::make_unique<detail::box<C>>();
          T y = traits::forward_save(layer, x, ctx->value, backend_);
          const bytes got = tensor_traits<T>::size(y) + traits::context_bytes(ctx->value);
          if (got > chain_.abar(l))
            throw detail::execution_failure(
                to_string(ins) + ": " + who + " kept " + format_bytes(got) + " (output and context), more than the " +
                format_bytes(chain_.abar(l)) + " of saved_bytes it was planned with; profile the model again");
          st.full_y[k(l)] = std::move(y);
          st.full_ctx[k(l)] = std::move(ctx);
        } else {
          T y = traits::forward(layer, x, backend_);
          if (tensor_traits<T>::size(y) > chain_.a(l))
            throw detail::execution_failure(
                to_string(ins) + ": " + who + " returned an output of " + format_bytes(tensor_traits<T>::size(y)) +
                ", more than the " + format_bytes(chain_.a(l)) + " of output_bytes it was planned with; profile the model again");
          if (ins.mode == forward_mode::no_save) st.plain[k(l - 1)].reset();
          st.plain[k(l)] = std::move(y);
        }
        if constexpr (HasRandomState<layer_t>)
          if (!st.rng_after[k(l)]) st.rng_after[k(l)] = detail::boxed(detail::deref(layer).random_state());
        return;
      }
      // Backward.
      const T& y = *st.full_y[k(l)];
      const C& ctx = detail::unbox<C>(st.full_ctx[k(l)]);
      std::optional<T> dx;
      if (l == n) {
        if constexpr (HasLossBackward<layer_t, T, B>)
          dx.emplace(traits::loss_backward(layer, x, y, ctx, backend_));
        else
          throw detail::execution_failure(who + " is the loss (the last stage), but its layer has no loss "
                                          "backward `T backward(const T& x, const T& y, const context&, Backend&)`");
      } else {
        if constexpr (HasBackward<layer_t, T, B>)
          dx.emplace(traits::backward(layer, x, y, ctx, *st.grad, backend_));
        else
          throw detail::execution_failure(who + " is not the last stage, but its layer only has a loss backward "
                                          "(without the output gradient)");
      }
      if (tensor_traits<T>::size(*dx) > chain_.a(l - 1))
        throw detail::execution_failure(to_string(ins) + ": " + who + " returned an input gradient of " +
                                        format_bytes(tensor_traits<T>::size(*dx)) + ", more than its input's " +
                                        format_bytes(chain_.a(l - 1)) + "; profile the model again");
      st.grad.reset();
      st.full_y[k(l)].reset();
      st.full_ctx[k(l)].reset();
      if (st.plain[k(l - 1)]) st.plain[k(l - 1)].reset();
      st.grad = std::move(dx);
    });
  };

  auto restore_rng = [&](bool success) {
    detail::restore_random_states(model_, k(n), success ? st.rng_after : st.rng_before, 1);
  };

  // A RunAwareBackend hears of the end of the run however it ends.
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
  // A TimingBackend's marks, one before the run and one after each instruction.
  using mark_t = decltype(detail::start_timer(backend_));
  std::vector<mark_t> marks;
  if constexpr (TimingBackend<B>) marks.reserve(s.ops.size() + 1);

  const auto t_start = clock::now();
  std::size_t i = 0;
  try {
    scope.begin();
    if constexpr (TimingBackend<B>) marks.push_back(backend_.mark_time());
    for (; i < s.ops.size(); ++i) {
      backend_.reset_high_water();
      [[maybe_unused]] const auto t0 = clock::now();
      retire(false);
      run_op(s.ops[i]);
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
    return error{status::execution_error,
                 "executor: op " + std::to_string(i) + ", " + e.what() +
                     "; the schedule predicted a peak of " + format_bytes(s.predicted_peak) +
                     " (allocations outside the profile, or a budget below the plan's)",
                 {}};
  } catch (const detail::execution_failure& e) {
    restore_rng(false);
    return error{status::execution_error, std::string("executor: op ") + std::to_string(i) + ", " + e.what(), {}};
  } catch (const std::exception& e) {
    restore_rng(false);
    return error{status::execution_error,
                 "executor: op " + std::to_string(i) + " (" + backend_.activity() + ") threw: " + e.what(), {}};
  }
  seconds elapsed = std::chrono::duration<double>(clock::now() - t_start).count();
  if constexpr (TimingBackend<B>) elapsed = backend_.seconds_between(marks.front(), marks.back());
  restore_rng(true);
  backend_.set_activity("an allocation");
  return run_result<T>{std::move(*st.grad), peak, elapsed, std::move(out.op_peaks), std::move(out.op_times),
                       std::move(out.forwards)};
}

}  // namespace remat::exec
