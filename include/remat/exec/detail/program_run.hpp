#pragma once
// detail::program_run: one run of a schedule over a model's layers, the executor's core. It
// refuses up front what cannot run (check), then runs the instructions one by one (compute, free,
// offload, prefetch, wait), measuring each one's peak and time, and ends every run the same way
// however it ends: the layers' random states put back, copies in flight drained, a
// RunAwareBackend told. In the dynamic mode (run_dynamic) there is no schedule: DTR's engine
// (policy/dtr/run.hpp) takes each decision as the run goes, told the real size of every tensor
// made, and each decision runs at once like an instruction. docs/executor.md, "Running a
// schedule" and "The dynamic mode".

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/exec/concepts/backend.hpp>
#include <remat/exec/concepts/dag_layer.hpp>
#include <remat/exec/concepts/model.hpp>
#include <remat/exec/concepts/tensor.hpp>
#include <remat/exec/detail/allocation_check.hpp>
#include <remat/exec/detail/layer_calls.hpp>
#include <remat/exec/detail/model_graph.hpp>
#include <remat/exec/detail/parameter_hooks.hpp>
#include <remat/exec/detail/random_states.hpp>
#include <remat/exec/detail/sum_order.hpp>
#include <remat/exec/detail/type_erasure.hpp>
#include <remat/exec/host_backend.hpp>
#include <remat/exec/run_result.hpp>
#include <remat/policy/dtr/run.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::exec::detail {

/// What the executor runs: the graph (the one given, or the chain's), where each op's nodes are,
/// and what each op's backward reads.
struct run_plan {
  const graph* g = nullptr;
  std::vector<op_nodes> nodes;
  std::vector<backward_needs> reads;
  /// The backend's in_use when the executor's last run ended (its results included), if any.
  std::optional<bytes> last_run_end = std::nullopt;
};

/// A backend that counts its host store (host_backend): the run measures its peak.
template <class B>
concept CountsHostStore = requires(B& b, const B& cb) {
  { cb.host_in_use() } -> std::convertible_to<bytes>;
  { cb.host_high_water() } -> std::convertible_to<bytes>;
  b.reset_host_high_water();
};

/// Tells a RunAwareBackend where a run begins and ends: end_run() however the run ends.
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
/// besides the input, `appeared` of them since the last run ended (not counting that run's
/// results); with the largest holders when b names them (host_backend::live_summary).
template <class B>
std::string held_at_start(const B& b, bytes held, bytes appeared) {
  std::string s = "; " + format_bytes(held) +
                  " were already in use in the backend when the run started, besides the input";
  if (appeared > 0)
    s += " (" + format_bytes(appeared) +
         " of them since the last run ended, made or kept by the code between the steps: most "
         "likely an optimizer's state, which Adam and SGD with momentum make at their first "
         "step, or the last run's input_gradient; make optimizer state before the backend "
         "counts, or outside its count, e.g. inside a remat::libtorch::uncounted guard around "
         "optimizer.step())";
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

/// One run of schedule s on backend b over the layers l (a DAG model's, or a chain model's
/// through chain_layers), whose graph and op nodes are p's; the loss gets the targets tg
/// (no_targets: none). Op i runs layer i; data node d's tensor, context and host copy are kept
/// at d. A program that manages the parameters runs with their state `ps` (managed_training).
template <class B, class T, class Tg, class Layers>
class program_run {
 public:
  // Short parameter names: a constructor's are checked by -Wshadow where it is instantiated,
  // against the user's global names (a `using targets = ...`, say).
  program_run(B& b, Layers& l, const run_plan& p, const schedule& s, const Tg& tg,
              parameter_hooks* ps = nullptr)
      : backend_(b),
        layers_(l),
        g_(*p.g),
        nodes_(p.nodes),
        reads_(p.reads),
        last_run_end_(p.last_run_end),
        s_(s),
        targets_(tg),
        op_of_(remat::detail::ix(g_.compute_count()), -1),
        tensors_(remat::detail::ix(g_.data_count())),
        contexts_(remat::detail::ix(g_.data_count())),
        made_(remat::detail::ix(g_.data_count()), 0),
        random_(nodes_.size()),
        host_copy_(can_transfer ? remat::detail::ix(g_.data_count()) : 0),
        moving_(can_transfer ? remat::detail::ix(g_.data_count()) : 0),
        offloading_(can_transfer ? remat::detail::ix(g_.data_count()) : 0, 0),
        leaving_(can_transfer ? remat::detail::ix(g_.data_count()) : 0, 0),
        forwards_(nodes_.size(), 0),
        params_(ps) {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      op_of_[remat::detail::ix(nodes_[i].fwd)] = op_of_[remat::detail::ix(nodes_[i].bwd)] =
          static_cast<int>(i);
    op_peaks_.reserve(s_.ops.size());
    op_times_.reserve(s_.ops.size());
  }
  /// A run in the dynamic mode (run_dynamic): no schedule, its decisions are its own.
  program_run(B& b, Layers& l, const run_plan& p, const Tg& tg)
      : program_run(b, l, p, decisions_, tg) {}

  /// Runs the schedule on `input` (the graph input, which the run consumes): the input gradient
  /// and the measurements, or why the run failed (status::invalid_problem before anything ran,
  /// status::execution_error after). After a failure the layers' random states are as before.
  result<run_result<T>> run(T input);
  /// Runs DTR on `input` within `budget` with heuristic h, no schedule (the dynamic mode; made
  /// with the constructor without one): the engine's decisions run as they are taken, each
  /// measured like an instruction, the engine told the size of every tensor and context an op
  /// makes. The result's `decisions` is the program that ran. Errors: budget_too_small where an
  /// op does not fit with everything else evicted (naming it and what it needs), execution_error
  /// where an op's measured peak passes the budget (its scratch outgrew the profile) or a layer
  /// fails.
  template <class H>
  result<run_result<T>> run_dynamic(T input, bytes budget, const H& h);

 private:
  using clock = std::chrono::steady_clock;
  using host_t = typename transfer_types<B>::host;
  using handle_t = typename transfer_types<B>::handle;
  /// Whether offload, prefetch and wait can run: a TransferBackend and a TransferableTensor.
  static constexpr bool can_transfer = TransferBackend<B> && TransferableTensor<T, B>;

  /// Copies in flight end before the buffers they use are freed, however the run ends.
  struct drain_on_exit {
    program_run& owner;
    ~drain_on_exit() {
      try {
        owner.retire(true);
      } catch (...) {  // a failing device: the backend reports it on its next call
      }
    }
  };

  result<void> check(const T& input) const;
  result<void> check_input(const T& input) const;
  template <class Body>
  result<run_result<T>> drive(T input, const std::string& claim, Body&& body);
  void execute(std::size_t at);
  void compute(const instruction& ins, std::size_t at);
  template <class L>
  void forward(L& layer, std::size_t i, bool fast, const std::string& who);
  template <class L>
  void backward(L& layer, std::size_t i, const std::string& who);
  std::vector<const T*> inputs(std::size_t i, bool read) const;
  void free_data(int d);
  void transfer(const instruction& ins, std::size_t at);
  void offload(std::size_t d);
  void prefetch(std::size_t d);
  void wait(std::size_t d);
  void retire(bool all);
  void made(int d, bytes got, const std::string& who, const std::string& what);
  std::string where(std::size_t at) const;
  error failed(std::string message, status code = status::execution_error,
               std::optional<bytes> least = std::nullopt);

  B& backend_;
  Layers& layers_;
  const graph& g_;
  const std::vector<op_nodes>& nodes_;
  const std::vector<backward_needs>& reads_;
  std::optional<bytes> last_run_end_;
  schedule decisions_;  // the dynamic mode's program, taken as it runs (s_ is it)
  const schedule& s_;
  const Tg& targets_;
  std::vector<int> op_of_;  // compute node (fwd and bwd) -> its op
  // Destroyed in reverse order, after the run has drained its copies and ended: the tensors
  // last (they are the run's results or the leftovers of a failure).
  std::vector<std::optional<T>> tensors_;            // activations and gradients
  std::vector<std::unique_ptr<box_base>> contexts_;  // phantoms
  std::vector<bytes> made_;  // the bytes of each datum's tensor or context, when last made
  run_random_states random_;
  // Transfers: d's host copy, its transfer in flight (offload or prefetch, until its wait),
  // whether that is an offload, whether the offload's device buffer is still held, and
  // prefetches waited for whose host copy is released once the copy is ready.
  std::vector<std::optional<host_t>> host_copy_;
  std::vector<std::optional<handle_t>> moving_;
  std::vector<char> offloading_, leaving_;
  std::vector<std::pair<host_t, handle_t>> retiring_;
  // What the run measures (run_result).
  std::vector<bytes> op_peaks_;
  std::vector<seconds> op_times_;
  std::vector<int> forwards_;
  std::optional<double> loss_;
  allocation_check allocated_;
  parameter_hooks* params_;  // a program that manages the parameters: their state
};

/// What cannot run is refused before anything runs: a schedule the simulator rejects, one that
/// breaks the sum-order rules (sum_order_violation), transfers on a backend or tensor that cannot
/// move data (status::invalid_problem); an input larger than planned (status::execution_error).
template <class B, class T, class Tg, class Layers>
result<void> program_run<B, T, Tg, Layers>::check(const T& input) const {
  auto invalid = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (s_.parameters.managed && params_ == nullptr)
    return invalid(
        "executor: the program manages the model's parameters (an OFFMATE plan: weights, "
        "gradients and optimizer states moved, optimizer steps in the program); run it with "
        "remat::exec::managed_training (exec/managed_training.hpp), which holds them across "
        "steps, not with executor::run or train_step");
  if (const auto rep = sim::simulate(g_, s_, {.record_timeline = false}); !rep.valid)
    return invalid("executor: the schedule is not valid for graph '" + g_.name +
                   "': " + rep.first_violation->message);
  if (auto why = sum_order_violation(g_, s_); !why.empty())
    return invalid("executor: graph '" + g_.name + "', " + why);
  if constexpr (!can_transfer) {
    for (std::size_t j = 0; j < s_.ops.size(); ++j)
      if (s_.ops[j].on_data() && s_.ops[j].op != op_kind::free)
        return invalid(
            "executor: instruction " + std::to_string(j) + " (" + to_string(s_.ops[j]) +
            ") moves a tensor, but " +
            (TransferBackend<B>
                 ? std::string("the tensor type does not name its backend buffer: give it a "
                               "`storage()` member returning the buffer by reference, or "
                               "specialise tensor_traits<T>::storage")
                 : std::string("the backend has no offload/prefetch/wait (it is not a "
                               "remat::exec::TransferBackend)")));
  }
  return check_input(input);
}

/// An input larger than planned is refused (status::execution_error).
template <class B, class T, class Tg, class Layers>
result<void> program_run<B, T, Tg, Layers>::check_input(const T& input) const {
  const bytes input_bytes = g_.data(training_layout::input).size;
  if (tensor_traits<T>::size(input) > input_bytes)
    return error{status::execution_error,
                 "executor: the input has " + format_bytes(tensor_traits<T>::size(input)) +
                     ", more than the graph input's " + format_bytes(input_bytes) +
                     " it was planned with",
                 {}};
  return {};
}

/// The schedule's instructions, in order.
template <class B, class T, class Tg, class Layers>
result<run_result<T>> program_run<B, T, Tg, Layers>::run(T input) {
  if (auto ok = check(input); !ok) return ok.err();
  return drive(std::move(input),
               "the schedule predicted a peak of " + format_bytes(s_.predicted_peak) +
                   " (allocations outside the profile, or a budget below the plan's)",
               [&](auto&& step) -> result<void> {
                 for (std::size_t i = 0; i < s_.ops.size(); ++i) step(i);
                 return {};
               });
}

/// DTR's engine takes the decisions; each is appended to decisions_ (s_) and run at once. The
/// engine starts from the input's real size and learns every output's as it is made; an op whose
/// measured peak passes the budget ends the run (what the engine cannot foresee: scratch beyond
/// the profile's).
template <class B, class T, class Tg, class Layers>
template <class H>
result<run_result<T>> program_run<B, T, Tg, Layers>::run_dynamic(T input, bytes budget,
                                                                 const H& h) {
  if (auto ok = check_input(input); !ok) return ok.err();
  remat::detail::dtr_engine<H> engine(g_, budget, h, "executor (dynamic)");
  engine.resize(training_layout::input, tensor_traits<T>::size(input));
  decisions_ = {};
  auto r = drive(std::move(input),
                 "the dynamic mode kept its decisions within " + format_bytes(budget) +
                     " (a backend budget below the mode's, or allocations outside the profile)",
                 [&](auto&& step) {
                   return engine.run([&](const instruction& ins) {
                     decisions_.ops.push_back(ins);
                     const std::size_t at = decisions_.ops.size() - 1;
                     step(at);
                     if (op_peaks_.back() > budget)
                       throw execution_failure(
                           where(at) + " reached " + format_bytes(op_peaks_.back()) +
                           ", over the dynamic mode's budget of " + format_bytes(budget) +
                           ": its layer allocated more than its profile says; profile the model "
                           "again");
                     if (ins.is_compute())
                       for (int d : g_.outputs(ins.node))
                         if (tensors_[remat::detail::ix(d)] || contexts_[remat::detail::ix(d)])
                           engine.resize(d, made_[remat::detail::ix(d)]);
                   });
                 });
  if (!r) return r;
  decisions_.predicted_time = engine.time();
  r->decisions = std::move(decisions_);
  return r;
}

/// The run's memory is measured from its start, with the input counted; each instruction's peak
/// is the backend's high water while it ran, its time the wall clock's or, on a TimingBackend,
/// the time between the backend's marks around it (read once the run has ended, so that the host
/// never waits in between). body(step) runs the instructions, step(i) the i-th of s_, measured;
/// it returns an error to end the run with (its status kept). An out-of-budget allocation's
/// message adds `claim`, what the run expected.
template <class B, class T, class Tg, class Layers>
template <class Body>
result<run_result<T>> program_run<B, T, Tg, Layers>::drive(T input, const std::string& claim,
                                                           Body&& body) {
  const bytes at_start = backend_.in_use();
  // The parameters a managed program holds on the device count in its peak, as the simulator's.
  bytes managed = 0, host_managed = 0;
  if (params_ != nullptr) {
    managed = params_->device_bytes();
    host_managed = params_->host_bytes();
  }
  const bytes baseline = at_start - tensor_traits<T>::size(input) - managed;
  bytes host_baseline = 0;
  if constexpr (CountsHostStore<B>) {
    backend_.reset_host_high_water();
    host_baseline = backend_.host_in_use() - host_managed;
  }
  // Memory held before the run, besides the input: named if the run runs out of budget, with
  // what appeared since the last run ended (the input counts if it is new, not if the caller
  // kept it from the last run, as a LibTorch batch is).
  const bytes appeared =
      last_run_end_ ? std::max<bytes>(0, std::min(at_start - *last_run_end_, baseline)) : 0;
  const std::string held =
      baseline > 0 ? held_at_start(backend_, baseline, appeared) : std::string();
  tensors_[remat::detail::ix(training_layout::input)] = std::move(input);
  backend_.reset_high_water();
  bytes peak = backend_.high_water() - baseline;

  // A RunAwareBackend hears of the end of the run however it ends (before the tensors left in
  // tensors_ are freed: they are the run's results or leftovers of a failure, not its buffers),
  // after the copies in flight have drained.
  run_scope<B> scope{backend_};
  drain_on_exit drain{*this};
  // A TimingBackend's marks, one before the run and one after each instruction.
  using mark_t = decltype(start_timer(backend_));
  std::vector<mark_t> marks;
  if constexpr (TimingBackend<B>) marks.reserve(s_.ops.size() + 1);

  const auto t_start = clock::now();
  try {
    scope.begin();
    if constexpr (TimingBackend<B>) marks.push_back(backend_.mark_time());
    auto step = [&](std::size_t i) {
      backend_.reset_high_water();
      [[maybe_unused]] const auto t0 = clock::now();
      if constexpr (can_transfer) retire(false);
      execute(i);
      if constexpr (TimingBackend<B>)
        marks.push_back(backend_.mark_time());
      else
        op_times_.push_back(std::chrono::duration<double>(clock::now() - t0).count());
      op_peaks_.push_back(backend_.high_water() - baseline);
      peak = std::max(peak, op_peaks_.back());
    };
    if (auto done = body(step); !done) {
      error e = done.err();
      return failed(std::move(e.message), e.code, e.minimum_budget);
    }
    if constexpr (TimingBackend<B>)
      for (std::size_t j = 0; j + 1 < marks.size(); ++j)
        op_times_.push_back(backend_.seconds_between(marks[j], marks[j + 1]));
  } catch (const out_of_budget& e) {
    return failed("executor: " + std::string(e.what()) + "; " + claim + held);
  } catch (const execution_failure& e) {
    return failed(std::string("executor: ") + e.what());
  } catch (const std::exception& e) {
    return failed("executor: " + std::string(backend_.activity()) + " threw: " + e.what());
  }
  seconds elapsed = std::chrono::duration<double>(clock::now() - t_start).count();
  if constexpr (TimingBackend<B>) elapsed = backend_.seconds_between(marks.front(), marks.back());
  // Checked after the run, since its measured memory means nothing if it fails.
  if (auto why = allocated_.problem(); !why.empty()) return failed("executor: " + why);
  random_.restore(layers_, true);
  backend_.set_activity("an allocation");
  std::optional<bytes> host_peak;
  if constexpr (CountsHostStore<B>) host_peak = backend_.host_high_water() - host_baseline;
  return run_result<T>{std::move(*tensors_[remat::detail::ix(training_layout::input_gradient)]),
                       peak,
                       elapsed,
                       std::move(op_peaks_),
                       std::move(op_times_),
                       std::move(forwards_),
                       loss_,
                       host_peak};
}

/// Ends a failed run (status::execution_error unless said): the layers' random states as before
/// the run, the parameters untouched (their gradients may hold a partial accumulation).
template <class B, class T, class Tg, class Layers>
error program_run<B, T, Tg, Layers>::failed(std::string message, status code,
                                            std::optional<bytes> least) {
  random_.restore(layers_, false);
  backend_.set_activity("an allocation");
  return error{code, std::move(message), least};
}

/// Instruction `at` of the schedule.
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::execute(std::size_t at) {
  const instruction& ins = s_.ops[at];
  if (ins.manages_parameters()) {
    std::string who = where(at);
    if (ins.op != op_kind::sync)
      who += ", parameter '" + g_.parameters()[remat::detail::ix(ins.node)].name + "'";
    backend_.set_activity(std::move(who));
    params_->apply(ins);
  } else if (ins.op == op_kind::free) {
    free_data(ins.node);
  } else if (ins.is_compute()) {
    compute(ins, at);
  } else {
    transfer(ins, at);
  }
}

/// A compute instruction: the forward or backward of the op whose node it is, with the activity
/// naming the instruction and the node. The loss node stores nothing: its output gradient is the
/// constant 1, which the loss's backward takes as dy == nullptr.
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::compute(const instruction& ins, std::size_t at) {
  const int c = ins.node;
  if (g_.compute(c).kind == compute_kind::loss) return;  // dy = 1: nothing to store
  const auto i = remat::detail::ix(op_of_[remat::detail::ix(c)]);
  model_traits<Layers>::visit(layers_, i, [&](auto& layer) {
    std::string who = where(at) + ", " + ::remat::detail::compute_label(g_, c);
    // The layer's own name, when it has one that the node's name does not already say (a chain
    // of layers with repeated names numbers its stages).
    if constexpr (requires { std::string(deref(layer).name()); }) {
      const std::string own(deref(layer).name());  // name() may return a temporary
      if (!own.empty() && g_.compute(c).name.find(own) == std::string::npos)
        who += " of layer '" + std::string(own) + "'";
    }
    backend_.set_activity(who);
    if (c == nodes_[i].fwd)
      forward(layer, i, ins.op == op_kind::fast_forward, who);
    else
      backward(layer, i, who);
  });
}

/// Op i's inputs for its layer's x, in the op's order; all null when `read` is false (a backward
/// that does not read them).
template <class B, class T, class Tg, class Layers>
std::vector<const T*> program_run<B, T, Tg, Layers>::inputs(std::size_t i, bool read) const {
  std::vector<const T*> x;
  x.reserve(nodes_[i].in.size());
  for (int d : nodes_[i].in) x.push_back(read ? &*tensors_[remat::detail::ix(d)] : nullptr);
  return x;
}

/// compute(fwd o) runs forward_save, storing o's output and its context (the phantom);
/// fast_forward runs forward, storing the output only. The random state is saved at the op's
/// first forward and put back at every later one; the loss's value is read at its first forward.
template <class B, class T, class Tg, class Layers>
template <class L>
void program_run<B, T, Tg, Layers>::forward(L& layer, std::size_t i, bool fast,
                                            const std::string& who) {
  using traits = dag_layer_traits<L>;
  using C = typename traits::context;
  const op_nodes& on = nodes_[i];
  const std::vector<const T*> x = inputs(i, true);
  random_.before_forward(i, layer);
  const bool loss = i + 1 == nodes_.size();
  [[maybe_unused]] const bool first = forwards_[i]++ == 0;
  const bytes before = backend_.in_use();
  if (fast) {
    T y = call_forward(layer, std::span<const T* const>(x), loss, targets_, backend_, who);
    const bytes out = tensor_traits<T>::size(y);
    allocated_.add(who, before, backend_.in_use(), out,
                   may_be_view(y, std::span<const T* const>(x)) ? out : 0);
    made(on.act, tensor_traits<T>::size(y), who, "returned an output");
    tensors_[remat::detail::ix(on.act)] = std::move(y);
  } else {
    auto ctx = std::make_unique<box<C>>();
    T y = call_forward_save(layer, std::span<const T* const>(x), loss, targets_, ctx->value,
                            backend_, who);
    const bytes out = tensor_traits<T>::size(y);
    allocated_.add(who, before, backend_.in_use(), out + traits::context_bytes(ctx->value),
                   may_be_view(y, std::span<const T* const>(x)) ? out : 0);
    made(on.act, tensor_traits<T>::size(y), who, "returned an output");
    made(on.phantom, traits::context_bytes(ctx->value), who, "kept a context");
    tensors_[remat::detail::ix(on.act)] = std::move(y);
    contexts_[remat::detail::ix(on.phantom)] = std::move(ctx);
  }
  if constexpr (ScalarTensor<T>)  // the loss's value, at its first forward
    if (loss && first) loss_ = tensor_traits<T>::item(*tensors_[remat::detail::ix(on.act)]);
  random_.after_forward(i, layer);
}

/// compute(bwd o) runs backward(x..., y, ctx, dy, dx...): o's contribution to the gradient of
/// each input, created by the first contribution, accumulated in place by the next ones. x and y
/// are passed only if the layer's backward reads them. A backward must leave every input's
/// gradient filled (execution_error otherwise).
template <class B, class T, class Tg, class Layers>
template <class L>
void program_run<B, T, Tg, Layers>::backward(L& layer, std::size_t i, const std::string& who) {
  using C = typename dag_layer_traits<L>::context;
  const op_nodes& on = nodes_[i];
  const std::vector<const T*> x = inputs(i, reads_[i].inputs);
  const T* y = reads_[i].output ? &*tensors_[remat::detail::ix(on.act)] : nullptr;
  const C& ctx = unbox<C>(contexts_[remat::detail::ix(on.phantom)]);
  std::vector<std::optional<T>> dx(on.in.size());
  for (std::size_t j = 0; j < dx.size(); ++j)
    dx[j] = std::move(tensors_[remat::detail::ix(on.in_grad[j])]);
  const T* dy = i + 1 == nodes_.size() ? nullptr : &*tensors_[remat::detail::ix(on.grad)];
  if (params_ != nullptr) params_->before_backward(on.fwd);
  call_backward(layer, std::span<const T* const>(x), y, ctx, dy, targets_,
                std::span<std::optional<T>>(dx), backend_, who);
  for (std::size_t j = 0; j < dx.size(); ++j) {
    const int d = on.in_grad[j];
    if (!dx[j])
      throw execution_failure(who + " left the gradient of its input " + std::to_string(j) + ", " +
                              ::remat::detail::data_label(g_, d) +
                              ", empty; a backward creates or adds "
                              "to the gradient of every input");
    made(d, tensor_traits<T>::size(*dx[j]), who, "made a gradient");
    tensors_[remat::detail::ix(d)] = std::move(dx[j]);
  }
}

/// free(d) releases the tensor (or context) of data node d, or its host copy.
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::free_data(int d) {
  tensors_[remat::detail::ix(d)].reset();
  contexts_[remat::detail::ix(d)].reset();
  if constexpr (can_transfer) host_copy_[remat::detail::ix(d)].reset();
}

/// An offload, prefetch or wait of data node ins.node, with the activity naming the instruction
/// and the node; then what finished copies no longer need is released.
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::transfer(const instruction& ins, std::size_t at) {
  if constexpr (can_transfer) {
    const auto d = remat::detail::ix(ins.node);
    backend_.set_activity(where(at) + ", " + ::remat::detail::data_label(g_, ins.node));
    if (ins.op == op_kind::offload)
      offload(d);
    else if (ins.op == op_kind::prefetch)
      prefetch(d);
    else
      wait(d);
    retire(false);
  }
}

/// offload(d): d's buffer goes to the host through backend.offload; its device memory is released
/// as soon as the copy is ready (at once on host_backend, whose copies are synchronous), at the
/// latest at wait(d).
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::offload(std::size_t d) {
  auto [h, x] = backend_.offload(tensor_traits<T>::storage(*tensors_[d]));
  host_copy_[d] = std::move(h);
  moving_[d] = std::move(x);
  offloading_[d] = 1;
  leaving_[d] = 1;
}

/// prefetch(d): backend.prefetch makes a new device buffer, counted from now, refilled from the
/// host copy.
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::prefetch(std::size_t d) {
  auto [buf, x] = backend_.prefetch(*host_copy_[d]);
  tensor_traits<T>::storage(*tensors_[d]) = std::move(buf);
  moving_[d] = std::move(x);
}

/// wait(d): later work waits for d's copy (backend.wait). An offload's device buffer goes now; a
/// prefetch's host copy once the copy is ready (at the latest when the run ends).
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::wait(std::size_t d) {
  backend_.wait(*moving_[d]);
  if (offloading_[d]) {  // the offload is done for the compute lane: its buffer can go
    tensor_traits<T>::storage(*tensors_[d]) = buffer_t<B>{};
    offloading_[d] = leaving_[d] = 0;
  } else {  // the prefetch: its host copy goes once the copy is ready
    retiring_.emplace_back(std::move(*host_copy_[d]), std::move(*moving_[d]));
    host_copy_[d].reset();
  }
  moving_[d].reset();
}

/// Releases what finished copies no longer need: the device buffers of offloads, the host copies
/// of waited prefetches (`all`: every one, waiting for the copies; when the run ends).
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::retire(bool all) {
  if constexpr (can_transfer) {
    for (std::size_t d = 0; d < leaving_.size(); ++d) {
      auto& x = moving_[d];
      if (leaving_[d] && (all || x->ready())) {
        if (all) x->wait_host();
        tensor_traits<T>::storage(*tensors_[d]) = buffer_t<B>{};
        leaving_[d] = 0;
      }
    }
    std::erase_if(retiring_, [&](auto& r) {
      if (all) r.second.wait_host();
      return all || r.second.ready();
    });
  }
}

/// Data node d was made, `got` bytes of `what`: recorded (made_), and a layer that returned more
/// than the plan's size for it fails the run: the plan no longer holds; profile the model again.
template <class B, class T, class Tg, class Layers>
void program_run<B, T, Tg, Layers>::made(int d, bytes got, const std::string& who,
                                         const std::string& what) {
  made_[remat::detail::ix(d)] = got;
  if (got > g_.data(d).size)
    throw execution_failure(who + ": " + what + " of " + format_bytes(got) + " for " +
                            ::remat::detail::data_label(g_, d) + ", more than the " +
                            format_bytes(g_.data(d).size) +
                            " it was planned with; profile the model again");
}

/// Instruction `at`, for messages and the backend's activity.
template <class B, class T, class Tg, class Layers>
std::string program_run<B, T, Tg, Layers>::where(std::size_t at) const {
  return "instruction " + std::to_string(at) + " (" + to_string(s_.ops[at]) + ")";
}

}  // namespace remat::exec::detail
