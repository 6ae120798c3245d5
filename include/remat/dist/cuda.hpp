#pragma once
// Device tensors between MPI ranks (dist/mpi.hpp's mpi_pipeline with the CUDA backend): the
// messages' data is device memory. cuda_staged_transport moves it through host copies (pinned
// staging buffers and MPI), which works with any MPI and with several ranks on one GPU;
// nccl_transport (dist/nccl.hpp) moves it device to device. Both read and write the data in
// the order of the backend's compute stream: a send's copy starts after the work queued there
// when it is posted (the kernels that made the data), and the compute stream waits for a
// receive before the work that reads it. A hand-over between two stages of a rank is a copy on
// the compute stream. Needs remat::cuda and remat::mpi. docs/distributed.md, "Device tensors".

#if !__has_include(<cuda_runtime_api.h>)
#error "remat/dist/cuda.hpp needs the CUDA toolkit; link remat::cuda"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/dist/mpi.hpp>
#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/cuda/error.hpp>

namespace remat::dist {

namespace detail {

/// What the CUDA transports share: the backend (its device and compute stream), events on it,
/// and the hand-over copy.
class cuda_transport_base {
 public:
  static constexpr bool device_memory = true;
  explicit cuda_transport_base(exec::cuda::backend& b) : b_(&b) {}

  /// A hand-over between two stages of the rank: a device-to-device copy on the compute stream.
  void copy(void* dst, const void* src, bytes n) {
    if (n > 0)
      REMAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n),
                                       cudaMemcpyDeviceToDevice, b_->stream()));
  }

 protected:
  /// An event after the work queued on the compute stream so far.
  [[nodiscard]] exec::cuda::event compute_mark() const {
    exec::cuda::event e(false);
    REMAT_CUDA_CHECK(cudaEventRecord(e.get(), b_->stream()));
    return e;
  }
  /// Whether the work before e is done (the host does not block).
  [[nodiscard]] static bool reached(const exec::cuda::event& e) {
    const cudaError_t r = cudaEventQuery(e.get());
    if (r == cudaErrorNotReady) return false;
    REMAT_CUDA_CHECK(r);
    return true;
  }
  /// The compute stream's later work waits for e.
  void compute_waits(const exec::cuda::event& e) const {
    REMAT_CUDA_CHECK(cudaStreamWaitEvent(b_->stream(), e.get(), 0));
  }
  exec::cuda::backend* b_;
};

/// Pinned host buffers for staging, kept for reuse (a step sends the same sizes again).
class pinned_staging {
 public:
  pinned_staging() = default;
  pinned_staging(pinned_staging&& o) noexcept
      : free_(std::move(o.free_)), lost_(std::move(o.lost_)) {}
  pinned_staging& operator=(pinned_staging&&) = delete;
  pinned_staging(const pinned_staging&) = delete;
  pinned_staging& operator=(const pinned_staging&) = delete;
  ~pinned_staging() {
    for (auto& [n, p] : free_) (void)cudaFreeHost(p);
    for (void* p : lost_) (void)cudaFreeHost(p);
  }
  /// At least n bytes (the smallest kept buffer that holds them, else a new one); give() it back.
  std::pair<void*, bytes> take(bytes n) {
    auto it = free_.lower_bound(n);
    if (it != free_.end()) {
      auto out = std::pair<void*, bytes>{it->second, it->first};
      free_.erase(it);
      return out;
    }
    void* p = nullptr;
    REMAT_CUDA_CHECK(cudaMallocHost(&p, static_cast<std::size_t>(std::max<bytes>(n, 1))));
    return {p, std::max<bytes>(n, 1)};
  }
  void give(void* p, bytes n) { free_.emplace(n, p); }
  /// A buffer a cancelled request may still touch: freed with the staging, never reused.
  void lose(void* p) { lost_.push_back(p); }

 private:
  std::multimap<bytes, void*> free_;
  std::vector<void*> lost_;
};

}  // namespace detail

/// Device data through host copies: a send copies the tensor to a pinned host buffer (on the
/// backend's device-to-host stream, after the compute stream's work so far) and sends it with
/// MPI once copied; a receive takes the bytes with MPI into a pinned buffer, then copies them to
/// the device (on the host-to-device stream) and orders the compute stream after the copy. The
/// sends of a channel leave in the order they were posted.
class cuda_staged_transport : public detail::cuda_transport_base {
 public:
  struct request {
    bool receive = false;
    int peer = 0;
    long long seq = 0;  ///< a send's place in its channel
    void* device = nullptr;
    bytes n = 0;
    void* host = nullptr;
    bytes host_size = 0;
    exec::cuda::event copied;  ///< the copy's end (to the host for a send, to the device for a
                               ///< receive)
    MPI_Request r = MPI_REQUEST_NULL;
    enum class phase : unsigned char { copying, messaging, to_device, done } at = phase::copying;
  };

  explicit cuda_staged_transport(exec::cuda::backend& b) : cuda_transport_base(b) {}
  result<void> open(MPI_Comm comm, int, const std::vector<transport_channel>&, seconds) {
    comm_.dup(comm);
    return {};
  }

  request send(int peer, const void* data, bytes n) {
    request q;
    q.peer = peer;
    q.seq = issued_[peer]++;
    q.n = n;
    std::tie(q.host, q.host_size) = staging_.take(n);
    // After the compute stream's work so far, which made the data.
    const exec::cuda::event made = compute_mark();
    REMAT_CUDA_CHECK(cudaStreamWaitEvent(b_->d2h_stream(), made.get(), 0));
    if (n > 0)
      REMAT_CUDA_CHECK(cudaMemcpyAsync(q.host, data, static_cast<std::size_t>(n),
                                       cudaMemcpyDeviceToHost, b_->d2h_stream()));
    q.copied = exec::cuda::event(false);
    REMAT_CUDA_CHECK(cudaEventRecord(q.copied.get(), b_->d2h_stream()));
    return q;
  }

  request recv(int peer, void* data, bytes n) {
    request q;
    q.receive = true;
    q.peer = peer;
    q.device = data;
    q.n = n;
    std::tie(q.host, q.host_size) = staging_.take(n);
    MPI_Irecv(q.host, detail::mpi_byte_count(n), MPI_BYTE, peer, 0, comm_.get(), &q.r);
    q.at = request::phase::messaging;
    return q;
  }

  bool test(request& q) {
    using phase = request::phase;
    if (q.at == phase::copying) {  // a send: its bytes reach the host, then leave in order
      if (!reached(q.copied) || posted_[q.peer] != q.seq) return false;
      MPI_Isend(q.host, detail::mpi_byte_count(q.n), MPI_BYTE, q.peer, 0, comm_.get(), &q.r);
      ++posted_[q.peer];
      q.at = phase::messaging;
    }
    if (q.at == phase::messaging) {
      int flag = 0;
      MPI_Test(&q.r, &flag, MPI_STATUS_IGNORE);
      if (flag == 0) return false;
      if (!q.receive) return finish(q);
      // After the compute stream's work so far, which may have used the tensor's memory.
      const exec::cuda::event before = compute_mark();
      REMAT_CUDA_CHECK(cudaStreamWaitEvent(b_->h2d_stream(), before.get(), 0));
      if (q.n > 0)
        REMAT_CUDA_CHECK(cudaMemcpyAsync(q.device, q.host, static_cast<std::size_t>(q.n),
                                         cudaMemcpyHostToDevice, b_->h2d_stream()));
      q.copied = exec::cuda::event(false);
      REMAT_CUDA_CHECK(cudaEventRecord(q.copied.get(), b_->h2d_stream()));
      q.at = phase::to_device;
    }
    if (q.at == phase::to_device) {
      if (!reached(q.copied)) return false;
      compute_waits(q.copied);
      return finish(q);
    }
    return true;
  }

  void cancel(request& q) noexcept {
    if (q.at == request::phase::done) return;
    if (q.r != MPI_REQUEST_NULL) {
      if (q.receive) MPI_Cancel(&q.r);
      MPI_Request_free(&q.r);
    }
    if (q.host != nullptr) staging_.lose(q.host);
    q.host = nullptr;
    q.at = request::phase::done;
  }

  void abort() noexcept {}

 private:
  bool finish(request& q) {
    staging_.give(q.host, q.host_size);
    q.host = nullptr;
    q.at = request::phase::done;
    return true;
  }

  detail::mpi_comm comm_;
  detail::pinned_staging staging_;
  std::map<int, long long> posted_;  // by peer: the sends handed to MPI
  std::map<int, long long> issued_;  // by peer: the sends posted to the transport
};

}  // namespace remat::dist
