#pragma once
// One stage of a pipeline on one micro-batch, run by the one executor (exec/executor.hpp) with
// its forward and its backward apart in time: in a pipeline a rank runs other micro-batches'
// forwards and backwards between the two. The executor runs a whole program in one call, so the
// run goes on a thread of its own that hands control back and forth with the rank's thread (a
// fiber: exactly one of the two runs at any time, so the backend and the layers are never used
// at once). The run is over the stage's layers (stage_layer, which calls the user's layer) and,
// for every stage but the last, a boundary layer in the place of the loss: its forward notes the
// stage's output (the executor keeps it alive until the boundary's backward, so it can be sent
// from where it is), and its backward returns the gradient of that output, received from the
// next stage. The first backward of the run (the boundary's, or the real loss's on the last
// stage) hands control back to the rank and waits until the rank resumes it for B. A stage that
// recomputes runs its program on such a fiber within its B (started, then resumed at once), its
// layers showing the executor their random states (stage_layer's Random). No MPI here.
// docs/distributed.md.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/dist/wire.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/executor.hpp>
#include <remat/exec/run_result.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::dist::detail {

/// Thrown into a run that the rank gives up (a failed step): the executor reports it as the
/// run's error and the thread ends.
struct fiber_cancelled : std::runtime_error {
  fiber_cancelled() : std::runtime_error("the pipeline step was abandoned") {}
};

/// The hand-over between the rank's thread and a run's thread.
template <class T>
class fiber {
 public:
  fiber() = default;
  fiber(const fiber&) = delete;
  fiber& operator=(const fiber&) = delete;
  ~fiber() { cancel(); }

  // --- the rank's side ------------------------------------------------------------------------
  /// Starts body() on its own thread and waits until it reaches its first backward or ends.
  template <class Body>
  void start(Body body) {
    std::unique_lock lk(mu_);
    fiber_turn_ = true;
    thread_ = std::thread([this, body = std::move(body)]() mutable {
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return fiber_turn_; });
      }
      std::optional<result<exec::run_result<T>>> r;
      try {
        r.emplace(body());
      } catch (const std::exception& e) {
        r.emplace(error{status::execution_error, e.what(), {}});
      } catch (...) {
        r.emplace(error{status::execution_error, "the stage's run threw", {}});
      }
      std::unique_lock l(mu_);
      outcome_ = std::move(r);
      finished_ = true;
      fiber_turn_ = false;
      cv_.notify_all();
    });
    cv_.notify_all();
    cv_.wait(lk, [&] { return !fiber_turn_; });
  }
  /// Hands the gradient of the stage's output (none for the last stage) and runs the backward
  /// to the end of the run; returns the run's result.
  result<exec::run_result<T>> resume(std::optional<T> gradient) {
    {
      std::unique_lock lk(mu_);
      if (!finished_) {
        gradient_ = std::move(gradient);
        fiber_turn_ = true;
        cv_.notify_all();
        cv_.wait(lk, [&] { return !fiber_turn_; });
      }
    }
    if (thread_.joinable()) thread_.join();
    return std::move(*outcome_);
  }
  /// The run ended before its backward (a forward failed): its error.
  [[nodiscard]] bool finished() const { return finished_; }
  [[nodiscard]] result<exec::run_result<T>> take_outcome() {
    if (thread_.joinable()) thread_.join();
    return std::move(*outcome_);
  }
  /// Ends a run that is waiting for its backward: it throws fiber_cancelled there.
  void cancel() {
    if (!thread_.joinable()) return;
    {
      std::unique_lock lk(mu_);
      if (!finished_) {
        cancelled_ = true;
        fiber_turn_ = true;
        cv_.notify_all();
        cv_.wait(lk, [&] { return !fiber_turn_; });
      }
    }
    thread_.join();
  }

  // --- the run's side ------------------------------------------------------------------------
  /// At the run's first backward: back to the rank until it resumes the run for B.
  void await_backward() {
    if (in_backward_) return;
    in_backward_ = true;
    std::unique_lock lk(mu_);
    fiber_turn_ = false;
    cv_.notify_all();
    cv_.wait(lk, [&] { return fiber_turn_; });
    if (cancelled_) throw fiber_cancelled{};
  }
  /// The gradient handed by resume (the boundary's backward returns it).
  T take_gradient() {
    if (!gradient_) throw std::logic_error("remat::dist: no gradient was handed to the boundary");
    T g = std::move(*gradient_);
    gradient_.reset();
    return g;
  }

  /// The stage's output, noted by the boundary's forward: where its bytes are and its shape.
  const void* output_data = nullptr;
  bytes output_size = 0;
  std::vector<std::int64_t> output_shape;
  /// What the backend held when the run began, its input aside: the executor's baseline, to
  /// which its per-instruction peaks are relative.
  bytes run_baseline = 0;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool fiber_turn_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  bool in_backward_ = false;  // the run's thread only
  std::optional<T> gradient_;
  std::optional<result<exec::run_result<T>>> outcome_;
  std::thread thread_;
};

/// A layer of a stage's run: the user's layer (a model element E, dereferenced as the executor
/// does), or, with no layer, the boundary in the place of the loss. A stored stage's run
/// (Random = false) shows the executor no random state: it runs each forward once (store-all),
/// and the layers' random engines advance in the order of the rank's forwards, micro-batch 0
/// first, as in plain training. A recomputing stage's run (Random = true) shows the layers'
/// random states, so that the executor replays them on every recomputation (the rank sets them
/// to what they were at the micro-batch's F before the run, and back after); the boundary shows
/// the state of `state_of`, a layer of the stage, and ignores any it is given.
template <class E, class T, class B, bool Random = false>
class stage_layer {
  using inner = exec::chain_layer_traits<E>;

 public:
  using context = typename inner::context;

  stage_layer(E* layer, fiber<T>* f, E* state_of = nullptr)
      : layer_(layer), fiber_(f), state_of_(state_of != nullptr ? state_of : layer) {}

  auto random_state() const requires(Random&& exec::HasRandomState<E>) {
    return exec::detail::deref(*state_of_).random_state();
  }
  template <class S>
  void set_random_state(const S& state) requires(Random&& exec::HasRandomState<E>) {
    if (layer_ != nullptr) exec::detail::deref(*layer_).set_random_state(state);
  }

  [[nodiscard]] std::string name() const {
    if (layer_ == nullptr) return "boundary";
    if constexpr (requires(E & e) { std::string(exec::detail::deref(e).name()); })
      return std::string(exec::detail::deref(*layer_).name());
    else
      return "layer";
  }

  T forward(const T& x, B& b) {
    if (layer_ == nullptr) return boundary_forward(x, b);
    if constexpr (requires { inner::forward(*layer_, x, b); })
      return inner::forward(*layer_, x, b);
    else
      throw std::logic_error(name() + ": its forward takes targets");
  }
  T forward_save(const T& x, context& ctx, B& b) {
    if (layer_ == nullptr) return boundary_forward(x, b);
    if constexpr (requires { inner::forward_save(*layer_, x, ctx, b); })
      return inner::forward_save(*layer_, x, ctx, b);
    else
      throw std::logic_error(name() + ": its forward_save takes targets");
  }
  T backward(const T& x, const T& y, const context& ctx, const T& dy, B& b) {
    fiber_->await_backward();
    if constexpr (requires { inner::backward(*layer_, x, y, ctx, dy, b); })
      return inner::backward(*layer_, x, y, ctx, dy, b);
    else
      throw std::logic_error(name() + " has no backward with an output gradient");
  }
  /// The loss's backward: the boundary's (the received gradient) or the user's loss.
  T backward(const T& x, const T& y, const context& ctx, B& b) {
    fiber_->await_backward();
    if (layer_ == nullptr) return fiber_->take_gradient();
    if constexpr (requires { inner::loss_backward(*layer_, x, y, ctx, b); })
      return inner::loss_backward(*layer_, x, y, ctx, b);
    else
      throw std::logic_error(name() + " is the loss but has no backward without targets");
  }
  // The loss with the batch's targets (the last stage only).
  template <class Tg>
  requires(!std::is_same_v<Tg, T>) T forward(const T& x, const Tg& tg, B& b) {
    if constexpr (requires { inner::forward(*layer_, x, tg, b); })
      return inner::forward(*layer_, x, tg, b);
    else
      throw std::logic_error(name() + ": its forward takes no targets");
  }
  template <class Tg>
  requires(!std::is_same_v<Tg, T>) T forward_save(const T& x, const Tg& tg, context& ctx, B& b) {
    if constexpr (requires { inner::forward_save(*layer_, x, tg, ctx, b); })
      return inner::forward_save(*layer_, x, tg, ctx, b);
    else
      throw std::logic_error(name() + ": its forward_save takes no targets");
  }
  template <class Tg>
  requires(!std::is_same_v<Tg, T>) T
      backward(const T& x, const T& y, const context& ctx, const Tg& tg, B& b) {
    fiber_->await_backward();
    if constexpr (requires { inner::loss_backward(*layer_, x, y, ctx, tg, b); })
      return inner::loss_backward(*layer_, x, y, ctx, tg, b);
    else
      throw std::logic_error(name() + ": its backward takes no targets");
  }

 private:
  T boundary_forward(const T& x, B& b) {
    fiber_->output_data = wire_traits<T>::data(x);
    fiber_->output_size = wire_traits<T>::size(x);
    fiber_->output_shape = wire_traits<T>::shape(x);
    return wire_traits<T>::make({}, b);
  }

  E* layer_;
  fiber<T>* fiber_;
  E* state_of_;
};

/// Layers first..last (1-based) of chain c as a stage's chain: input a_{first-1}, and for every
/// stage but the last, the boundary in the place of the loss (no time; its output, a scalar of
/// `scalar` bytes, is all it keeps).
inline chain stage_chain(const chain& c, int first, int last, bool boundary, bytes scalar) {
  chain out;
  out.name = c.name + "[" + std::to_string(first) + ".." + std::to_string(last) + "]";
  out.input_bytes = c.a(first - 1);
  for (int l = first; l <= last; ++l) out.stages.push_back(c.at(l));
  if (boundary) {
    stage b;
    b.name = "boundary";
    b.output_bytes = scalar;
    b.saved_bytes = scalar;
    out.stages.push_back(b);
  }
  return out;
}

}  // namespace remat::dist::detail
