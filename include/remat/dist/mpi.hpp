#pragma once
// Pipelined training over MPI: each rank (processor) of a pipeline_plan runs its stages' layers
// with the one executor and exchanges activations forward and gradients back with non-blocking
// MPI calls, in the order of dist::make_pipeline_run (the plan's pattern unrolled over the step's
// micro-batches). Each stage's parameter gradients accumulate over micro-batches 0, 1, ..., n-1
// in that order and the optimizer step comes after the flush, so they are bitwise those of one
// process accumulating the same micro-batches in the same order. A stage that recomputes
// (pipeline_stage::recompute) runs as planned: its F keeps only its input, its B runs the
// stage's program from it with the layers' random states as at the F.
//
//   remat::dist::mpi_session mpi(argc, argv);     // MPI_Init_thread (funneled) .. MPI_Finalize
//   remat::dist::mpi_pipeline pipe(MPI_COMM_WORLD, model, problem, plan, micro_batches, backend);
//   auto r = pipe.step(input, targets, update);   // input(m, b) on stage 1's rank, targets(m)
//                                                 // on the last stage's, update(layer) after
//
// The shapes travel through MPI, the data through the pipeline's transport (the last template
// parameter): mpi_transport (here, the default) for tensors in host memory; for device tensors,
// dist/cuda.hpp's cuda_staged_transport (through host copies) or dist/nccl.hpp's nccl_transport.
// A transport's channel (a sender, a receiver) is a FIFO: the receiver posts the receives in the
// order the sender posts the sends, as NCCL needs.
//
// Errors: a rank count other than the plan's processors fails step() on every rank, naming both;
// a rank whose step fails (a layer throws, a peer is silent past options::timeout) prints its
// error and calls MPI_Abort, so that the others stop instead of hanging (options::abort_on_error).
// Only this header includes <mpi.h>: link remat::mpi (REMAT_HAS_MPI). docs/distributed.md.

// The C API only: no MPI-2 C++ bindings (deprecated, and they warn).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/dist/detail/stage_fiber.hpp>
#include <remat/dist/pipeline_run.hpp>
#include <remat/dist/wire.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/executor.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

namespace remat::dist {

/// MPI for the life of the object: MPI_Init_thread asking for MPI_THREAD_FUNNELED (the stages'
/// runs have threads of their own, which never call MPI), MPI_Finalize at the end. Throws
/// std::runtime_error when MPI gives less.
class mpi_session {
 public:
  mpi_session(int& argc, char**& argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    if (provided < MPI_THREAD_FUNNELED)
      throw std::runtime_error(
          "remat::dist: MPI gives no MPI_THREAD_FUNNELED support, which the pipeline needs");
  }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
  ~mpi_session() { MPI_Finalize(); }
};

/// A channel of the step: the ranks `from` and `to` (distinct) exchange data from `from` to `to`.
struct transport_channel {
  int from = 0;
  int to = 0;
  friend bool operator==(const transport_channel&, const transport_channel&) = default;
};

namespace detail {
/// A communicator of one's own (MPI_Comm_dup of another), freed with the object unless MPI has
/// finalized by then. Move-only.
class mpi_comm {
 public:
  mpi_comm() = default;
  mpi_comm(mpi_comm&& o) noexcept : c_(std::exchange(o.c_, MPI_COMM_NULL)) {}
  mpi_comm& operator=(mpi_comm&&) = delete;
  mpi_comm(const mpi_comm&) = delete;
  mpi_comm& operator=(const mpi_comm&) = delete;
  ~mpi_comm() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (c_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&c_);
  }
  /// Duplicates `from` (collective over its ranks), once.
  void dup(MPI_Comm from) {
    if (c_ == MPI_COMM_NULL) MPI_Comm_dup(from, &c_);
  }
  [[nodiscard]] MPI_Comm get() const noexcept { return c_; }

 private:
  MPI_Comm c_ = MPI_COMM_NULL;
};

/// n as an MPI count of bytes; throws past MPI's int.
inline int mpi_byte_count(bytes n) {
  if (n > std::numeric_limits<int>::max())
    throw std::runtime_error("remat::dist: a message of " + format_bytes(n) +
                             " is past MPI's count of " +
                             std::to_string(std::numeric_limits<int>::max()) +
                             " bytes; use more micro-batches (smaller ones) per step");
  return static_cast<int>(n);
}
}  // namespace detail

/// What the pipeline asks of a transport T (mpi_transport; dist/cuda.hpp, dist/nccl.hpp):
///   result<void> t.open(MPI_Comm comm, int rank, const std::vector<transport_channel>& all,
///                       seconds timeout)
///       once, before the first step, on every rank of comm alike (collective);
///   T::request t.send(int peer, const void* data, bytes n)  after the work that made the data
///   T::request t.recv(int peer, void* data, bytes n)        into a tensor made by wire_traits
///   bool t.test(T::request&)   done: the send's buffer may go, the receive's data is there and
///                              the backend's work queued from now on sees it
///   void t.cancel(T::request&) noexcept   after a failure
///   void t.copy(void* dst, const void* src, bytes n)     a hand-over between two stages of a rank
///   void t.abort() noexcept    after a failure: nothing of the transport waits any more
///   static constexpr bool device_memory   whether the data pointers are device memory
/// On each channel the sends are posted in the sender's order and the receives in the same
/// order, so a transport may match them first come, first served.
template <class X>
concept Transport = requires(X& t, typename X::request& q, MPI_Comm comm,
                             const std::vector<transport_channel>& all, const void* c, void* d) {
  { t.open(comm, 0, all, seconds{}) } -> std::same_as<result<void>>;
  { t.send(0, c, bytes{}) } -> std::same_as<typename X::request>;
  { t.recv(0, d, bytes{}) } -> std::same_as<typename X::request>;
  { t.test(q) } -> std::same_as<bool>;
  t.cancel(q);
  t.copy(d, c, bytes{});
  t.abort();
  { X::device_memory } -> std::convertible_to<bool>;
};

/// The data of tensors in host memory as MPI messages (MPI_Isend, MPI_Irecv of bytes) on a
/// communicator of its own.
class mpi_transport {
 public:
  static constexpr bool device_memory = false;
  struct request {
    MPI_Request r = MPI_REQUEST_NULL;
    bool receive = false;
  };
  result<void> open(MPI_Comm comm, int, const std::vector<transport_channel>&, seconds) {
    comm_.dup(comm);
    return {};
  }
  request send(int peer, const void* data, bytes n) {
    request q;
    MPI_Isend(const_cast<void*>(data), detail::mpi_byte_count(n), MPI_BYTE, peer, 0, comm_.get(),
              &q.r);
    return q;
  }
  request recv(int peer, void* data, bytes n) {
    request q{MPI_REQUEST_NULL, true};
    MPI_Irecv(data, detail::mpi_byte_count(n), MPI_BYTE, peer, 0, comm_.get(), &q.r);
    return q;
  }
  bool test(request& q) {
    if (q.r == MPI_REQUEST_NULL) return true;
    int flag = 0;
    MPI_Test(&q.r, &flag, MPI_STATUS_IGNORE);
    return flag != 0;
  }
  void cancel(request& q) noexcept {
    if (q.r == MPI_REQUEST_NULL) return;
    if (q.receive) MPI_Cancel(&q.r);
    MPI_Request_free(&q.r);
  }
  void copy(void* dst, const void* src, bytes n) {
    if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n));
  }
  void abort() noexcept {}

 private:
  detail::mpi_comm comm_;
};

struct mpi_options {
  /// The longest a rank waits for one message (or for its sends at the flush) before it calls
  /// the step failed: a peer that died or hangs gives an error, not a hang.
  seconds timeout = 600;
  /// On a failed step: print the error on stderr and MPI_Abort the job (true), or return it
  /// (false: the caller must then end every rank itself).
  bool abort_on_error = true;
  /// MPI_Barrier before each step, so that the ranks' step times start together.
  bool barrier = true;
};

/// What one rank measured over a step, next to the plan.
struct step_report {
  int rank = 0;
  std::vector<int> stages;  ///< the stages it holds
  /// Wall-clock time of the step on this rank (after the barrier, to the optimizer step's end).
  seconds step_time = 0;
  /// The plan's time for a step (predicted_step_time): the same on every rank.
  seconds predicted_step_time = 0;
  /// The most bytes of tensors the rank's backend held at once during the step, above what it
  /// held when the step began: activations, the layers' contexts and temporaries, gradients and
  /// the messages' buffers (the parameters are the layers', outside the backend).
  bytes measured_peak = 0;
  /// The simulator's peak of this processor (sim::pipeline_report::processor_peaks): C x the
  /// weights of its layers, the buffers at its boundaries, and the activations it keeps.
  bytes planned_peak = 0;
  /// C x the weights of its layers, the part of planned_peak that is not the backend's.
  bytes planned_weights = 0;
  /// The sum of the losses of the step's micro-batches (on the last stage's rank).
  std::optional<double> loss;
  int messages_sent = 0;
  bytes bytes_sent = 0;
};

/// For step(): the loss takes no targets.
struct no_targets_fn {};

namespace detail {

/// The ranks' wire protocol: one header (the shape) then the data, tags from the boundary, the
/// micro-batch, the direction and the part.
struct mpi_key {
  int gradient = 0;  ///< 0: an activation (stage j -> j + 1), 1: a gradient (j + 1 -> j)
  int boundary = 0;  ///< j, 1..S-1
  int micro_batch = 0;
  friend auto operator<=>(const mpi_key&, const mpi_key&) = default;
};

using mpi_header = std::array<std::int64_t, max_wire_dims + 1>;  // [dims, d0, d1, ...]

inline std::string mpi_what(const mpi_key& k) {
  return std::string(k.gradient ? "the gradient" : "the activation") + " of micro-batch " +
         std::to_string(k.micro_batch) + " between stages " + std::to_string(k.boundary) + " and " +
         std::to_string(k.boundary + 1);
}

}  // namespace detail

/// Runs a pipeline plan's training steps on this rank (see the header comment). The model is a
/// random-access range of chain layers (std::vector<std::unique_ptr<Layer>>, say), the whole
/// model on every rank: rank p runs the layers of processor p's stages. `problem.layers` is the
/// model's chain (profile_chain's: the executor checks every tensor against its sizes), and the
/// same on every rank, as the plan. The transport moves the messages' data (mpi_transport for
/// host tensors; see Transport).
template <class B, class Model, class T, Transport X = mpi_transport>
class mpi_pipeline {
  using element = std::remove_reference_t<decltype(std::declval<Model&>()[0])>;
  using layer = detail::stage_layer<element, T, B>;
  using stage_model = std::vector<layer>;
  using recompute_layer = detail::stage_layer<element, T, B, true>;
  using recompute_model = std::vector<recompute_layer>;
  static_assert(WireTensor<T, B>,
                "remat::dist: the tensor type needs a wire_traits<T> specialisation "
                "(remat/dist/wire.hpp): shape, make, data and size");
  static_assert(wire_on_device<T> == X::device_memory,
                "remat::dist: the tensor's data and the transport's memory differ: device "
                "tensors (wire_traits<T>::on_device) need cuda_staged_transport "
                "(remat/dist/cuda.hpp) or nccl_transport (remat/dist/nccl.hpp), host tensors "
                "mpi_transport");

 public:
  mpi_pipeline(MPI_Comm comm, Model& model, pipeline_problem problem, pipeline_plan plan,
               int micro_batches, B& backend, mpi_options options = {}, X transport = X{})
      : model_(model),
        problem_(std::move(problem)),
        plan_(std::move(plan)),
        n_(micro_batches),
        backend_(backend),
        opt_(options),
        transport_(std::move(transport)) {
    comm_.dup(comm);
    MPI_Comm_rank(comm_.get(), &rank_);
    MPI_Comm_size(comm_.get(), &size_);
  }
  mpi_pipeline(const mpi_pipeline&) = delete;
  mpi_pipeline& operator=(const mpi_pipeline&) = delete;

  [[nodiscard]] int rank() const noexcept { return rank_; }

  /// Checks what every rank can check alike (the rank count, the plan, the model against the
  /// chain) and prepares the stages' runs. step() calls it first; a failure is the same on every
  /// rank, so it is returned, never aborted on.
  result<void> prepare();

  /// One training step: the parameter gradients of this rank's layers zeroed, the plan's
  /// micro-batches 0..n-1 through the pipeline, then update(layer) on each of its layers (the
  /// user's layer, dereferenced). The first step opens the transport after the barrier (a
  /// collective over the ranks; its failure, such as NCCL's ranks sharing a GPU, is returned).
  /// input(m, backend) -> T gives micro-batch m's input (called on
  /// stage 1's rank), targets(m) its targets for the loss (on the last stage's rank; pass
  /// no_targets_fn{} for a loss without).
  template <class Input, class Targets, class Update>
  result<step_report> step(Input&& input, Targets&& targets, Update&& update);

 private:
  struct stage_data {
    int s = 0;
    chain c;
    schedule program;  // store-all's, or the plan's recomputation program
    bool recomputes = false;
  };
  struct in_flight {  // one micro-batch's run of a stage
    std::unique_ptr<detail::fiber<T>> f;
    stage_model layers;
    std::unique_ptr<exec::executor<B, stage_model>> ex;
    // A recomputing stage: its input, its output until sent, the layers' random states at its F,
    // and at its B the run of its program.
    std::optional<T> input;
    std::optional<T> output;
    std::vector<exec::detail::saved_random_state<element>> states;
    recompute_model rlayers;
    std::unique_ptr<exec::executor<B, recompute_model>> rex;
  };
  struct recv_slot {
    detail::mpi_key key;
    int source = 0;
    detail::mpi_header header{};
    MPI_Request header_req = MPI_REQUEST_NULL;
    typename X::request data_req{};
    std::optional<T> data;
    bool header_done = false;
    bool posted_data = false;
    bool done = false;
  };
  struct send_slot {
    detail::mpi_key key;
    int dest = 0;
    detail::mpi_header header{};
    MPI_Request header_req = MPI_REQUEST_NULL;
    typename X::request data_req{};
    std::optional<T> owned;  // a gradient, kept until sent
    bool header_sent = false;
    bool done = false;
  };
  // A channel's receives on this rank, in the order its sender posts the sends.
  struct in_channel {
    std::vector<recv_slot*> slots;
    std::size_t posted = 0;
  };

  [[nodiscard]] int stage_count() const { return static_cast<int>(plan_.stages.size()); }
  [[nodiscard]] int tag(const detail::mpi_key& k) const {
    const long long t =
        (static_cast<long long>(k.micro_batch) * (stage_count() - 1) + (k.boundary - 1)) * 2 +
        k.gradient;
    return static_cast<int>(t);
  }
  void progress();
  void post_send(const detail::mpi_key& k, int dest, const void* data, bytes size,
                 const std::vector<std::int64_t>& shape, std::optional<T> owned);
  /// Waits (polling) until done() holds; false past the timeout.
  template <class Done>
  bool wait(Done done);
  void abandon();
  error failed(std::string message);

  Model& model_;
  pipeline_problem problem_;
  pipeline_plan plan_;
  int n_;
  B& backend_;
  mpi_options opt_;
  X transport_;
  detail::mpi_comm comm_;
  int rank_ = 0;
  int size_ = 0;
  bool prepared_ = false;
  std::vector<transport_channel> channels_;
  std::map<int, std::vector<detail::mpi_key>> in_order_;  // by sender: what it sends here, in order
  bool opened_ = false;                                   // the transport
  pipeline_run run_;
  sim::pipeline_report report_;
  seconds predicted_ = 0;
  bytes weights_ = 0;
  std::vector<stage_data> stages_;  // this rank's
  std::map<int, std::size_t> stage_index_;
  // The step's state.
  std::vector<std::unique_ptr<recv_slot>> recvs_;
  std::vector<std::unique_ptr<send_slot>> sends_;
  std::map<int, in_channel> in_channels_;          // by sender
  std::map<detail::mpi_key, T> local_;             // hand-overs between two stages of this rank
  std::map<std::pair<int, int>, in_flight> runs_;  // (stage, micro-batch)
  bytes peak_ =
      0;  // the backend's most in use during the step (the executor resets its high water)
};

template <class B, class Model, class T, Transport X>
result<void> mpi_pipeline<B, Model, T, X>::prepare() {
  if (prepared_) return {};
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (size_ != problem_.processors)
    return bad("the plan has " + std::to_string(problem_.processors) +
               " processors but mpirun started " + std::to_string(size_) +
               " ranks; run mpirun -np " + std::to_string(problem_.processors));
  report_ = sim::simulate_pipeline(problem_, plan_);
  if (!report_.valid)
    return bad("the plan does not replay in the simulator: " +
               (report_.first_violation ? report_.first_violation->message : std::string()));
  auto run = make_pipeline_run(plan_, problem_.processors, n_);
  if (!run) return run.err();
  if (auto d = check_deadlock_free(*run); !d) return d.err();
  run_ = std::move(*run);
  auto t = predicted_step_time(problem_, plan_, n_);
  if (!t) return t.err();
  predicted_ = *t;
  const auto layers = static_cast<int>(std::size(model_));
  if (layers != problem_.layers.length())
    return bad("the model has " + std::to_string(layers) + " layers but the plan's chain '" +
               problem_.layers.name + "' has " + std::to_string(problem_.layers.length()) +
               "; plan with the chain of this model");
  int tag_ub = 32767;
  {
    void* v = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(comm_.get(), MPI_TAG_UB, &v, &flag);
    if (flag != 0 && v != nullptr) tag_ub = *static_cast<int*>(v);
  }
  const long long most = 2LL * n_ * std::max(1, stage_count() - 1);
  if (most > tag_ub)
    return bad("a step of " + std::to_string(n_) + " micro-batches over " +
               std::to_string(stage_count()) + " stages needs MPI tags up to " +
               std::to_string(most) + ", past this MPI's MPI_TAG_UB " + std::to_string(tag_ub) +
               "; use fewer micro-batches per step");
  const int S = stage_count();
  const bytes scalar = wire_traits<T>::size(wire_traits<T>::make({}, backend_));
  for (int s : run_.stages_of(rank_)) {
    const pipeline_stage& st = plan_.stages[static_cast<std::size_t>(s - 1)];
    for (int l = st.first; l <= st.last; ++l) weights_ += problem_.layers.w(l);
    stage_data d;
    d.s = s;
    d.c = detail::stage_chain(problem_.layers, st.first, st.last, s < S, scalar);
    if (st.recompute) {
      // Planned on segment_chain(first, last), whose added stage is the boundary (no bytes
      // there; the boundary's scalar here), so the program's ops are d.c's.
      if (st.recompute->ops.empty())
        return bad("stage " + std::to_string(s) + " recomputes but its program is empty");
      d.program = *st.recompute;
      d.recomputes = true;
    } else {
      auto program = store_all{}.solve(d.c, unlimited_bytes);
      if (!program) return program.err();
      d.program = std::move(*program);
    }
    stage_index_[s] = stages_.size();
    stages_.push_back(std::move(d));
  }
  weights_ *= problem_.copies;
  // Every channel of the step, the same list on every rank (the transport's open is collective).
  // The messages this rank receives, per sender in the order it posts the sends: its list's sends
  // to this rank (a gradient is posted by its B, just before the send action).
  for (int r = 0; r < size_; ++r)
    for (const action& a : run_.ranks[static_cast<std::size_t>(r)]) {
      if ((a.kind != action_kind::send_activation && a.kind != action_kind::send_gradient) ||
          a.peer == r)
        continue;
      if (std::find(channels_.begin(), channels_.end(), transport_channel{r, a.peer}) ==
          channels_.end())
        channels_.push_back({r, a.peer});
      if (a.peer == rank_)
        in_order_[r].push_back(a.kind == action_kind::send_activation
                                   ? detail::mpi_key{0, a.stage, a.micro_batch}
                                   : detail::mpi_key{1, a.stage - 1, a.micro_batch});
    }
  prepared_ = true;
  return {};
}

template <class B, class Model, class T, Transport X>
void mpi_pipeline<B, Model, T, X>::post_send(const detail::mpi_key& k, int dest, const void* data,
                                             bytes size, const std::vector<std::int64_t>& shape,
                                             std::optional<T> owned) {
  auto slot = std::make_unique<send_slot>();
  slot->key = k;
  slot->dest = dest;
  if (shape.size() > max_wire_dims)
    throw std::runtime_error("a tensor of " + std::to_string(shape.size()) +
                             " dimensions; the wire carries at most " +
                             std::to_string(max_wire_dims));
  slot->header[0] = static_cast<std::int64_t>(shape.size());
  std::copy(shape.begin(), shape.end(), slot->header.begin() + 1);
  slot->owned = std::move(owned);
  MPI_Isend(slot->header.data(), static_cast<int>(slot->header.size()), MPI_INT64_T, dest, tag(k),
            comm_.get(), &slot->header_req);
  slot->data_req = transport_.send(dest, data, size);
  sends_.push_back(std::move(slot));
}

template <class B, class Model, class T, Transport X>
void mpi_pipeline<B, Model, T, X>::progress() {
  // The data of a channel's receives is posted in its sender's order, each once its header has
  // said its shape.
  for (auto& [source, ch] : in_channels_)
    while (ch.posted < ch.slots.size()) {
      recv_slot& r = *ch.slots[ch.posted];
      if (!r.header_done) {
        int flag = 0;
        MPI_Test(&r.header_req, &flag, MPI_STATUS_IGNORE);
        if (flag == 0) break;
        r.header_done = true;
      }
      const auto dims = static_cast<std::size_t>(r.header[0]);
      std::vector<std::int64_t> shape(r.header.begin() + 1,
                                      r.header.begin() + 1 + static_cast<std::ptrdiff_t>(dims));
      r.data.emplace(wire_traits<T>::make(shape, backend_));
      peak_ = std::max(peak_, backend_.in_use());
      r.data_req =
          transport_.recv(source, wire_traits<T>::data(*r.data), wire_traits<T>::size(*r.data));
      r.posted_data = true;
      ++ch.posted;
    }
  for (auto& r : recvs_)
    if (r->posted_data && !r->done && transport_.test(r->data_req)) r->done = true;
  for (auto& s : sends_) {
    if (s->done) continue;
    if (!s->header_sent) {
      int flag = 0;
      MPI_Test(&s->header_req, &flag, MPI_STATUS_IGNORE);
      s->header_sent = flag != 0;
    }
    if (s->header_sent && transport_.test(s->data_req)) {
      s->done = true;
      s->owned.reset();
    }
  }
}

template <class B, class Model, class T, Transport X>
template <class Done>
bool mpi_pipeline<B, Model, T, X>::wait(Done done) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  int spins = 0;
  for (;;) {
    progress();
    if (done()) return true;
    if (std::chrono::duration<double>(clock::now() - start).count() > opt_.timeout) return false;
    // Poll without taking a core from the other ranks (oversubscribed runs).
    if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

template <class B, class Model, class T, Transport X>
void mpi_pipeline<B, Model, T, X>::abandon() {
  for (auto& [key, r] : runs_) r.f->cancel();
  runs_.clear();
  for (auto& r : recvs_) {
    if (r->header_req != MPI_REQUEST_NULL) {
      MPI_Cancel(&r->header_req);
      MPI_Request_free(&r->header_req);
    }
    if (r->posted_data && !r->done) transport_.cancel(r->data_req);
  }
  for (auto& s : sends_) {
    if (s->header_req != MPI_REQUEST_NULL) MPI_Request_free(&s->header_req);
    if (!s->done) transport_.cancel(s->data_req);
  }
  transport_.abort();
  recvs_.clear();
  sends_.clear();
  in_channels_.clear();
  local_.clear();
}

template <class B, class Model, class T, Transport X>
error mpi_pipeline<B, Model, T, X>::failed(std::string message) {
  message = "rank " + std::to_string(rank_) + ": " + message;
  if (opt_.abort_on_error) {
    std::fprintf(stderr, "remat::dist: %s\n", message.c_str());
    std::fflush(stderr);
    transport_.abort();  // NCCL's communicators first: no kernel may wait for a rank that is gone
    MPI_Abort(comm_.get(), 1);
  }
  abandon();
  return error{status::execution_error, std::move(message), {}};
}

template <class B, class Model, class T, Transport X>
template <class Input, class Targets, class Update>
result<step_report> mpi_pipeline<B, Model, T, X>::step(Input&& input, Targets&& targets,
                                                       Update&& update) {
  if (auto p = prepare(); !p) return p.err();
  constexpr bool has_targets = !std::is_same_v<std::remove_cvref_t<Targets>, no_targets_fn>;
  const int S = stage_count();
  step_report rep;
  rep.rank = rank_;
  rep.stages = run_.stages_of(rank_);
  rep.predicted_step_time = predicted_;
  rep.planned_peak = report_.processor_peaks[static_cast<std::size_t>(rank_)];
  rep.planned_weights = weights_;
  for (const auto& st : stages_)
    for (int l = plan_.stages[static_cast<std::size_t>(st.s - 1)].first;
         l <= plan_.stages[static_cast<std::size_t>(st.s - 1)].last; ++l)
      if constexpr (requires(element & e) { exec::detail::deref(e).zero_grad(); })
        exec::detail::deref(model_[static_cast<std::size_t>(l - 1)]).zero_grad();

  if (opt_.barrier) {  // non-blocking, so that a rank that never comes is an error, not a hang
    MPI_Request barrier = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm_.get(), &barrier);
    int arrived = 0;
    if (!wait([&] {
          MPI_Test(&barrier, &arrived, MPI_STATUS_IGNORE);
          return arrived != 0;
        }))
      return failed("waited " + remat::detail::time_text(opt_.timeout) +
                    " s at the step's start for the other ranks (is every rank running the "
                    "step? mpi_options::timeout sets the wait)");
  }
  if (!opened_) {  // collective: after the barrier, where every rank has come
    if (auto o = transport_.open(comm_.get(), rank_, channels_, opt_.timeout); !o) return o.err();
    opened_ = true;
  }
  const double t0 = MPI_Wtime();
  const bytes baseline = backend_.in_use();
  backend_.reset_high_water();
  const auto& actions = run_.ranks[static_cast<std::size_t>(rank_)];
  // Every receive of the step, its header posted now (the data once the header says its shape).
  for (const action& a : actions) {
    if (a.kind != action_kind::recv_activation && a.kind != action_kind::recv_gradient) continue;
    if (a.peer == rank_) continue;
    auto slot = std::make_unique<recv_slot>();
    slot->key = a.kind == action_kind::recv_activation
                    ? detail::mpi_key{0, a.stage - 1, a.micro_batch}
                    : detail::mpi_key{1, a.stage, a.micro_batch};
    slot->source = a.peer;
    MPI_Irecv(slot->header.data(), static_cast<int>(slot->header.size()), MPI_INT64_T, a.peer,
              tag(slot->key), comm_.get(), &slot->header_req);
    recvs_.push_back(std::move(slot));
  }
  // Each channel's receives in the order its sender posts the sends (prepare's in_order_).
  {
    std::map<detail::mpi_key, recv_slot*> by_key;
    for (const auto& r : recvs_) by_key[r->key] = r.get();
    for (const auto& [source, keys] : in_order_) {
      in_channel& ch = in_channels_[source];
      for (const detail::mpi_key& k : keys)
        if (auto it = by_key.find(k); it != by_key.end() && it->second->source == source)
          ch.slots.push_back(it->second);
    }
  }
  auto take_received = [&](const detail::mpi_key& k, int peer) -> std::optional<T> {
    if (peer == rank_) {
      auto it = local_.find(k);
      if (it == local_.end()) return std::nullopt;
      T t = std::move(it->second);
      local_.erase(it);
      return t;
    }
    recv_slot* slot = nullptr;
    for (auto& r : recvs_)
      if (r->key == k) slot = r.get();
    if (slot == nullptr) return std::nullopt;
    if (!wait([&] { return slot->done; })) return std::nullopt;
    T t = std::move(*slot->data);
    slot->data.reset();
    return t;
  };
  auto send_done = [&](const detail::mpi_key& k) {
    for (auto& s : sends_)
      if (s->key == k) return s->done;
    return true;
  };
  std::optional<double> loss;
  bytes& peak = peak_;
  peak = baseline;
  // Starts a run of stage s's program on micro-batch m's input x: it runs until its first
  // backward (the boundary's, or the loss's), where it waits for resume.
  auto launch = [&](detail::fiber<T>& fb, auto& ex, const schedule& prog, T x, int s, int m) {
    B& bk = backend_;
    if constexpr (has_targets) {
      if (s == S) {
        fb.start([&fb, &ex, &prog, &bk, xin = std::move(x), tg = targets(m)]() mutable {
          fb.run_baseline = bk.in_use() - exec::tensor_traits<T>::size(xin);
          return ex.run(prog, std::move(xin), tg);
        });
        return;
      }
    }
    fb.start([&fb, &ex, &prog, &bk, xin = std::move(x)]() mutable {
      fb.run_baseline = bk.in_use() - exec::tensor_traits<T>::size(xin);
      return ex.run(prog, std::move(xin));
    });
  };
  try {
    for (const action& a : actions) {
      switch (a.kind) {
        case action_kind::recv_activation:
        case action_kind::recv_gradient:
          break;  // taken by the F or B that needs it
        case action_kind::forward: {
          const auto& sd = stages_[stage_index_.at(a.stage)];
          const pipeline_stage& st = plan_.stages[static_cast<std::size_t>(a.stage - 1)];
          std::optional<T> x;
          if (a.stage == 1) {
            x.emplace(input(a.micro_batch, backend_));
            peak = std::max(peak, backend_.in_use());
          } else {
            const int peer = run_.stage_rank[static_cast<std::size_t>(a.stage - 2)];
            x = take_received({0, a.stage - 1, a.micro_batch}, peer);
            if (!x)
              return failed("waited " + remat::detail::time_text(opt_.timeout) + " s for " +
                            detail::mpi_what({0, a.stage - 1, a.micro_batch}) + " from rank " +
                            std::to_string(peer) +
                            " (is it still running? mpi_options::timeout sets the wait)");
          }
          in_flight& f = runs_[{a.stage, a.micro_batch}];
          f.f = std::make_unique<detail::fiber<T>>();
          if (sd.recomputes) {
            // The forwards keep nothing but the output, to send on (the loss on the last
            // stage); the input stays for the B, which recomputes from it. The layers' random
            // states as they are now, for the B to draw the same numbers.
            f.states.reserve(static_cast<std::size_t>(st.last - st.first + 1));
            for (int l = st.first; l <= st.last; ++l)
              f.states.emplace_back(model_[static_cast<std::size_t>(l - 1)]);
            std::optional<T> y;
            for (int l = st.first; l <= st.last; ++l) {
              layer one(&model_[static_cast<std::size_t>(l - 1)], f.f.get());
              const T& in = l == st.first ? *x : *y;
              std::optional<T> out;
              try {
                if constexpr (has_targets) {
                  if (a.stage == S && l == st.last)
                    out.emplace(one.forward(in, targets(a.micro_batch), backend_));
                }
                if (!out) out.emplace(one.forward(in, backend_));
              } catch (const std::exception& e) {
                return failed("F of stage " + std::to_string(a.stage) + " on micro-batch " +
                              std::to_string(a.micro_batch) + " failed: layer " +
                              std::to_string(l) + " (" + one.name() + ") threw: " + e.what());
              }
              peak = std::max(peak, backend_.in_use());
              y = std::move(out);
            }
            f.input = std::move(x);
            if (a.stage < S) f.output = std::move(y);
            peak = std::max(peak, backend_.high_water());
            break;
          }
          for (int l = st.first; l <= st.last; ++l)
            f.layers.emplace_back(&model_[static_cast<std::size_t>(l - 1)], f.f.get());
          if (a.stage < S) f.layers.emplace_back(nullptr, f.f.get());
          f.ex = std::make_unique<exec::executor<B, stage_model>>(f.layers, sd.c, backend_);
          launch(*f.f, *f.ex, sd.program, std::move(*x), a.stage, a.micro_batch);
          peak = std::max(peak, backend_.high_water());
          if (f.f->finished()) {
            auto r = f.f->take_outcome();
            return failed("F of stage " + std::to_string(a.stage) + " on micro-batch " +
                          std::to_string(a.micro_batch) + " failed: " +
                          (r ? std::string("the run ended before its backward") : r.message()));
          }
          break;
        }
        case action_kind::send_activation: {
          in_flight& f = runs_.at({a.stage, a.micro_batch});
          const detail::mpi_key k{0, a.stage, a.micro_batch};
          if (f.output) {  // a recomputing stage's: held until sent, then freed
            T y = std::move(*f.output);
            f.output.reset();
            if (a.peer == rank_) {
              local_.emplace(k, std::move(y));
            } else {
              const void* data = wire_traits<T>::data(std::as_const(y));
              const bytes size = wire_traits<T>::size(y);
              const auto shape = wire_traits<T>::shape(y);
              post_send(k, a.peer, data, size, shape, std::move(y));
              ++rep.messages_sent;
              rep.bytes_sent += size;
            }
          } else if (a.peer == rank_) {
            T copy = wire_traits<T>::make(f.f->output_shape, backend_);
            peak = std::max(peak, backend_.in_use());
            transport_.copy(wire_traits<T>::data(copy), f.f->output_data, f.f->output_size);
            local_.emplace(k, std::move(copy));
          } else {
            post_send(k, a.peer, f.f->output_data, f.f->output_size, f.f->output_shape,
                      std::nullopt);
            ++rep.messages_sent;
            rep.bytes_sent += f.f->output_size;
          }
          break;
        }
        case action_kind::backward: {
          auto it = runs_.find({a.stage, a.micro_batch});
          if (it == runs_.end())
            return failed("B of stage " + std::to_string(a.stage) + " on micro-batch " +
                          std::to_string(a.micro_batch) + " before its F");
          std::optional<T> dy;
          if (a.stage < S) {
            const int peer = run_.stage_rank[static_cast<std::size_t>(a.stage)];
            dy = take_received({1, a.stage, a.micro_batch}, peer);
            if (!dy)
              return failed("waited " + remat::detail::time_text(opt_.timeout) + " s for " +
                            detail::mpi_what({1, a.stage, a.micro_batch}) + " from rank " +
                            std::to_string(peer) +
                            " (is it still running? mpi_options::timeout sets the wait)");
            // The activation sent from the stage's output must have left before the run frees it.
            const detail::mpi_key out{0, a.stage, a.micro_batch};
            if (!wait([&] { return send_done(out); }))
              return failed("waited " + remat::detail::time_text(opt_.timeout) + " s for rank " +
                            std::to_string(peer) + " to receive " + detail::mpi_what(out));
          }
          in_flight& f = it->second;
          const auto& sd = stages_[stage_index_.at(a.stage)];
          std::optional<result<exec::run_result<T>>> ran;
          if (sd.recomputes) {
            // The program runs from the input, recomputing what it needs, the layers' random
            // states as at the F (the executor replays them on each recomputation); the
            // received gradient enters at the boundary's backward. Then the states are put back
            // as they were: later micro-batches' forwards have drawn since.
            const pipeline_stage& st = plan_.stages[static_cast<std::size_t>(a.stage - 1)];
            element* last = &model_[static_cast<std::size_t>(st.last - 1)];
            for (int l = st.first; l <= st.last; ++l)
              f.rlayers.emplace_back(&model_[static_cast<std::size_t>(l - 1)], f.f.get());
            if (a.stage < S) f.rlayers.emplace_back(nullptr, f.f.get(), last);
            f.rex = std::make_unique<exec::executor<B, recompute_model>>(f.rlayers, sd.c, backend_);
            std::vector<exec::detail::saved_random_state<element>> now;
            now.reserve(f.states.size());
            for (int l = st.first; l <= st.last; ++l)
              now.emplace_back(model_[static_cast<std::size_t>(l - 1)]);
            for (const auto& state : f.states) state.restore();
            T x = std::move(*f.input);
            f.input.reset();
            launch(*f.f, *f.rex, sd.program, std::move(x), a.stage, a.micro_batch);
            ran.emplace(f.f->resume(std::move(dy)));
            for (const auto& state : now) state.restore();
          } else {
            ran.emplace(f.f->resume(std::move(dy)));
          }
          const bytes run_baseline = f.f->run_baseline;
          auto r = std::move(*ran);
          runs_.erase(it);
          peak = std::max(peak, backend_.high_water());
          if (r)
            for (bytes p : r->op_peaks) peak = std::max(peak, run_baseline + p);
          if (!r)
            return failed("stage " + std::to_string(a.stage) + " on micro-batch " +
                          std::to_string(a.micro_batch) + " failed: " + r.message());
          if (a.stage == S && r->loss) loss = loss.value_or(0) + *r->loss;
          if (a.stage > 1) {
            const detail::mpi_key k{1, a.stage - 1, a.micro_batch};
            const int peer = run_.stage_rank[static_cast<std::size_t>(a.stage - 2)];
            if (peer == rank_) {
              local_.emplace(k, std::move(r->input_gradient));
            } else {
              T g = std::move(r->input_gradient);
              const void* data = wire_traits<T>::data(std::as_const(g));
              const bytes size = wire_traits<T>::size(g);
              const auto shape = wire_traits<T>::shape(g);
              post_send(k, peer, data, size, shape, std::move(g));
              ++rep.messages_sent;
              rep.bytes_sent += size;
            }
          }
          break;
        }
        case action_kind::send_gradient:
          break;  // sent by the B that made it
        case action_kind::flush:
          if (!wait([&] {
                return std::all_of(sends_.begin(), sends_.end(),
                                   [](const auto& s) { return s->done; });
              }))
            return failed("waited " + remat::detail::time_text(opt_.timeout) +
                          " s at the flush for the peers to receive this rank's messages");
          break;
        case action_kind::optimizer_step:
          for (const auto& sd : stages_) {
            const pipeline_stage& st = plan_.stages[static_cast<std::size_t>(sd.s - 1)];
            for (int l = st.first; l <= st.last; ++l)
              update(exec::detail::deref(model_[static_cast<std::size_t>(l - 1)]));
          }
          break;
      }
    }
  } catch (const std::exception& e) {
    return failed(e.what());
  }
  rep.step_time = MPI_Wtime() - t0;
  rep.measured_peak = std::max(peak, backend_.high_water()) - baseline;
  rep.loss = loss;
  recvs_.clear();
  sends_.clear();
  in_channels_.clear();
  local_.clear();
  return rep;
}

}  // namespace remat::dist
