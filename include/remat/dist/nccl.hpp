#pragma once
// nccl_transport: device tensors between MPI ranks with NCCL's point-to-point calls (ncclSend,
// ncclRecv), device to device, for dist/mpi.hpp's mpi_pipeline with the CUDA backend. Each
// channel of the step (a sender, a receiver) is a communicator of its two ranks with a stream at
// each end, made once by open(): rank 0 makes every channel's unique id and broadcasts them over
// MPI, and the two ranks of each channel create it, non-blocking, under the pipeline's timeout.
// A channel's sends and receives are matched in the order they are posted, which mpi_pipeline
// keeps; channels never wait on each other, so the step's waits are those check_deadlock_free
// plays. Each op waits on its stream for the compute stream's work queued before it; the compute
// stream waits for a receive before reading it. On a failure (a layer throws, a peer is silent
// past the timeout) abort() aborts every communicator (ncclCommAbort), so that nothing waits on
// the device either. NCCL wants one GPU per rank: open() fails, naming the ranks, when two ranks
// of a channel share a device (cuda_staged_transport, dist/cuda.hpp, serves them). Link
// remat::nccl (REMAT_HAS_NCCL). docs/distributed.md, "Device tensors".

#if !__has_include(<nccl.h>)
#error \
    "remat/dist/nccl.hpp needs NCCL (nccl.h, the CUDA toolkit's or libnccl-dev); link remat::nccl"
#endif

#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/dist/cuda.hpp>
#include <remat/dist/mpi.hpp>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "remat/dist/nccl.hpp needs NCCL 2.14 or later (non-blocking communicators)"
#endif

namespace remat::dist {

namespace detail {

inline std::string nccl_text(ncclResult_t r) { return ncclGetErrorString(r); }

/// One point-to-point op of a channel, from its post to its end on the device.
struct nccl_op {
  bool receive = false;
  void* data = nullptr;
  bytes n = 0;
  exec::cuda::event before;  ///< the compute stream's work queued before the op
  exec::cuda::event done;    ///< recorded on the channel's stream after the op
  enum class state : unsigned char { queued, enqueuing, enqueued, finished } at = state::queued;
};

}  // namespace detail

class nccl_transport : public detail::cuda_transport_base {
 public:
  struct request {
    std::shared_ptr<detail::nccl_op> op;
    int channel = -1;
  };

  explicit nccl_transport(exec::cuda::backend& b) : cuda_transport_base(b) {}
  nccl_transport(nccl_transport&& o) noexcept
      : cuda_transport_base(*o.b_), channels_(std::move(o.channels_)), opened_(o.opened_) {
    o.channels_.clear();
  }
  nccl_transport& operator=(nccl_transport&&) = delete;
  nccl_transport(const nccl_transport&) = delete;
  nccl_transport& operator=(const nccl_transport&) = delete;
  ~nccl_transport() { close(); }

  result<void> open(MPI_Comm comm, int rank, const std::vector<transport_channel>& all,
                    seconds timeout) {
    if (opened_) return {};
    auto bad = [](std::string m) { return error{status::execution_error, std::move(m), {}}; };
    int size = 0;
    MPI_Comm_size(comm, &size);
    // NCCL wants one device per rank of a communicator: the same answer on every rank.
    std::array<char, 32> mine{};
    REMAT_CUDA_CHECK(
        cudaDeviceGetPCIBusId(mine.data(), static_cast<int>(mine.size()), b_->device()));
    std::vector<char> buses(mine.size() * static_cast<std::size_t>(size));
    MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, buses.data(),
                  static_cast<int>(mine.size()), MPI_CHAR, comm);
    auto bus = [&](int r) {
      return std::string(buses.data() + mine.size() * static_cast<std::size_t>(r));
    };
    for (const transport_channel& c : all)
      if (bus(c.from) == bus(c.to))
        return bad("nccl_transport: ranks " + std::to_string(c.from) + " and " +
                   std::to_string(c.to) + " exchange tensors on the same GPU (" + bus(c.from) +
                   "), and NCCL needs one GPU per rank; give each rank its own device (the "
                   "backend's options::device), or use cuda_staged_transport");
    // Every channel's id from rank 0, broadcast.
    std::vector<ncclUniqueId> ids(all.size());
    if (rank == 0)
      for (auto& id : ids)
        if (auto r = ncclGetUniqueId(&id); r != ncclSuccess)
          return bad("nccl_transport: ncclGetUniqueId failed: " + detail::nccl_text(r));
    MPI_Bcast(ids.data(), static_cast<int>(ids.size() * sizeof(ncclUniqueId)), MPI_BYTE, 0, comm);
    REMAT_CUDA_CHECK(cudaSetDevice(b_->device()));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that a peer that never comes is a timeout, not a hang
    if (auto r = ncclGroupStart(); r != ncclSuccess)
      return bad("nccl_transport: ncclGroupStart failed: " + detail::nccl_text(r));
    for (std::size_t i = 0; i < all.size(); ++i) {
      const transport_channel& c = all[i];
      if (c.from != rank && c.to != rank) continue;
      channel ch;
      ch.sends = c.from == rank;
      ch.peer = ch.sends ? c.to : c.from;
      const ncclResult_t r = ncclCommInitRankConfig(&ch.comm, 2, ids[i], ch.sends ? 0 : 1, &config);
      if (r != ncclSuccess && r != ncclInProgress) {
        (void)ncclGroupEnd();
        close();
        return bad("nccl_transport: ncclCommInitRankConfig for ranks " + std::to_string(c.from) +
                   " -> " + std::to_string(c.to) + " failed: " + detail::nccl_text(r));
      }
      channels_.push_back(std::move(ch));
    }
    if (auto r = ncclGroupEnd(); r != ncclSuccess && r != ncclInProgress) {
      close();
      return bad("nccl_transport: creating the communicators failed: " + detail::nccl_text(r));
    }
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (auto& ch : channels_) {
      for (;;) {
        ncclResult_t state = ncclSuccess;
        (void)ncclCommGetAsyncError(ch.comm, &state);
        if (state == ncclSuccess) break;
        if (state != ncclInProgress) {
          abort();
          return bad("nccl_transport: the communicator of ranks " + std::to_string(rank) + " and " +
                     std::to_string(ch.peer) + " failed: " + detail::nccl_text(state));
        }
        if (std::chrono::duration<double>(clock::now() - start).count() > timeout) {
          abort();
          return bad("nccl_transport: waited " + remat::detail::time_text(timeout) +
                     " s for rank " + std::to_string(ch.peer) +
                     " to create the NCCL communicator of their channel (is it running the "
                     "step? mpi_options::timeout sets the wait)");
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&ch.stream, cudaStreamNonBlocking));
    }
    opened_ = true;
    return {};
  }

  request send(int peer, const void* data, bytes n) {
    return post(peer, true, const_cast<void*>(data), n);
  }
  request recv(int peer, void* data, bytes n) { return post(peer, false, data, n); }

  bool test(request& q) {
    if (!q.op) return true;
    detail::nccl_op& op = *q.op;
    if (op.at == detail::nccl_op::state::finished) return true;
    pump(channels_[static_cast<std::size_t>(q.channel)]);
    if (op.at != detail::nccl_op::state::enqueued || !reached(op.done)) return false;
    if (op.receive) compute_waits(op.done);
    op.at = detail::nccl_op::state::finished;
    return true;
  }

  void cancel(request&) noexcept {}  // abort() ends them all

  /// Aborts every communicator: the ops in flight end, the transport is closed.
  void abort() noexcept {
    for (auto& ch : channels_)
      if (ch.comm != nullptr) {
        (void)ncclCommAbort(ch.comm);
        ch.comm = nullptr;
      }
    close();
  }

 private:
  struct channel {
    bool sends = false;  ///< this rank is the channel's sender (NCCL rank 0), else its receiver
    int peer = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    std::deque<std::shared_ptr<detail::nccl_op>> queue;  // posted, not yet on the stream
  };

  request post(int peer, bool sending, void* data, bytes n) {
    auto it = std::find_if(channels_.begin(), channels_.end(),
                           [&](const channel& c) { return c.peer == peer && c.sends == sending; });
    if (!opened_ || it == channels_.end())
      throw std::logic_error("nccl_transport: no open channel " +
                             std::string(sending ? "to" : "from") + " rank " +
                             std::to_string(peer));
    request q;
    q.channel = static_cast<int>(it - channels_.begin());
    q.op = std::make_shared<detail::nccl_op>();
    q.op->receive = !sending;
    q.op->data = data;
    q.op->n = n;
    q.op->before = compute_mark();
    it->queue.push_back(q.op);
    pump(*it);
    return q;
  }

  /// Puts the channel's posted ops on its stream in order, each once NCCL has taken the one
  /// before (a non-blocking communicator may still be enqueuing it).
  void pump(channel& ch) {
    using state = detail::nccl_op::state;
    while (!ch.queue.empty()) {
      detail::nccl_op& op = *ch.queue.front();
      if (op.at == state::queued) {
        REMAT_CUDA_CHECK(cudaStreamWaitEvent(ch.stream, op.before.get(), 0));
        ncclResult_t r = ncclSuccess;
        if (op.n > 0)
          r = op.receive ? ncclRecv(op.data, static_cast<std::size_t>(op.n), ncclUint8, 0, ch.comm,
                                    ch.stream)
                         : ncclSend(op.data, static_cast<std::size_t>(op.n), ncclUint8, 1, ch.comm,
                                    ch.stream);
        if (r != ncclSuccess && r != ncclInProgress) failure(ch, r);
        op.at = state::enqueuing;
      }
      ncclResult_t state_now = ncclSuccess;
      (void)ncclCommGetAsyncError(ch.comm, &state_now);
      if (state_now == ncclInProgress) return;
      if (state_now != ncclSuccess) failure(ch, state_now);
      op.done = exec::cuda::event(false);
      REMAT_CUDA_CHECK(cudaEventRecord(op.done.get(), ch.stream));
      op.at = state::enqueued;
      ch.queue.pop_front();
    }
  }

  [[noreturn]] static void failure(const channel& ch, ncclResult_t r) {
    throw std::runtime_error("nccl_transport: the channel " +
                             std::string(ch.sends ? "to" : "from") + " rank " +
                             std::to_string(ch.peer) + " failed: " + detail::nccl_text(r));
  }

  /// Finalizes and destroys the communicators (a non-blocking one finalizes asynchronously: up
  /// to 10 s, then it is aborted), and the streams.
  void close() noexcept {
    using clock = std::chrono::steady_clock;
    for (auto& ch : channels_) {
      if (ch.comm != nullptr) {
        ncclResult_t state = ncclCommFinalize(ch.comm);
        const auto start = clock::now();
        while (state == ncclInProgress &&
               std::chrono::duration<double>(clock::now() - start).count() < 10) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          if (ncclCommGetAsyncError(ch.comm, &state) != ncclSuccess) break;
        }
        if (state == ncclSuccess)
          (void)ncclCommDestroy(ch.comm);
        else
          (void)ncclCommAbort(ch.comm);
      }
      if (ch.stream != nullptr) (void)cudaStreamDestroy(ch.stream);
    }
    channels_.clear();
    opened_ = false;
  }

  std::vector<channel> channels_;
  bool opened_ = false;
};

}  // namespace remat::dist
