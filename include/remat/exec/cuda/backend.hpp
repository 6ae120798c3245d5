#pragma once
// remat::cuda::backend: the CUDA backend. Device memory comes from a pool carved from one
// cudaMalloc of the budget (a hard limit; a static placement can be replayed); the layers launch
// on the compute stream (stream()), copies run on two copy streams ordered by events, offloaded
// tensors live in a pinned host pool (a TransferBackend), CUDA events time the work
// (TimingBackend), and the parameters of an OFFMATE program move the same way, with Adam's
// kernel on the compute stream (a ParameterBackend; cuda/adam.cuh). Every layer must launch on
// stream() or synchronise with it; a buffer a copy reads is released through release_after().
// Part of the opt-in remat::cuda target: no umbrella header includes it. docs/executor.md, "The
// CUDA backend"; docs/guide/cuda.md.

#if !__has_include(<cuda_runtime_api.h>)
#error "remat/exec/cuda needs the CUDA toolkit; link remat::cuda"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include <remat/core/units.hpp>
#include <remat/exec/adam.hpp>
#include <remat/exec/cuda/device.hpp>
#include <remat/exec/cuda/error.hpp>
#include <remat/exec/detail/arena.hpp>
#include <remat/exec/host_backend.hpp>
#include <remat/exec/placement.hpp>

namespace remat::exec::cuda {

class backend;

/// Adam's step t over n floats of device memory (w, g, states: m then v) on `stream`: the GPU's
/// optimizer steps of a program that manages the parameters (backend::device_adam). Defined by
/// <remat/exec/cuda/adam.cuh>, which one .cu file of such a program includes.
void adam_step_async(const adam& opt, long t, float* w, const float* g, float* states,
                     std::size_t n, cudaStream_t stream);

/// An owned CUDA event (move-only); empty when default-constructed.
class event {
 public:
  event() = default;
  /// A new event; `timing` events can be read by cudaEventElapsedTime, the others are cheaper.
  explicit event(bool timing) {
    REMAT_CUDA_CHECK(
        cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  event(event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  event& operator=(event&& o) noexcept {
    if (this != &o) {
      destroy();
      e_ = std::exchange(o.e_, nullptr);
    }
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() { destroy(); }
  [[nodiscard]] cudaEvent_t get() const noexcept { return e_; }
  [[nodiscard]] bool valid() const noexcept { return e_ != nullptr; }

 private:
  void destroy() noexcept {
    if (e_ != nullptr) (void)cudaEventDestroy(e_);
    e_ = nullptr;
  }
  cudaEvent_t e_ = nullptr;
};

/// Where a pool_buffer lives: the budgeted device pool or the pinned host pool.
enum class memory_kind { device, pinned_host };

/// Memory from one of the backend's pools: move-only, returned to its pool when destroyed. The
/// backend must outlive its buffers (~backend checks).
template <memory_kind K>
class pool_buffer {
 public:
  pool_buffer() = default;
  pool_buffer(pool_buffer&& o) noexcept
      : owner_(std::exchange(o.owner_, nullptr)),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        offset_(std::exchange(o.offset_, 0)) {}
  pool_buffer& operator=(pool_buffer&& o) noexcept {
    if (this != &o) {
      release();
      owner_ = std::exchange(o.owner_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      offset_ = std::exchange(o.offset_, 0);
    }
    return *this;
  }
  pool_buffer(const pool_buffer&) = delete;
  pool_buffer& operator=(const pool_buffer&) = delete;
  ~pool_buffer() { release(); }

  /// The pointer (device memory, or pinned host memory); nullptr for an empty buffer.
  [[nodiscard]] void* data() const noexcept { return data_; }
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(data_);
  }
  /// The requested size in bytes.
  [[nodiscard]] bytes size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Where the buffer lies in its pool.
  [[nodiscard]] bytes offset() const noexcept { return offset_; }
  /// Returns the memory to the pool now (the buffer becomes empty).
  inline void release() noexcept;
  /// The backend it came from (nullptr for an empty buffer).
  [[nodiscard]] backend* owner() const noexcept { return owner_; }

 private:
  friend class backend;
  pool_buffer(backend* owner, void* data, bytes size, bytes offset)
      : owner_(owner), data_(data), size_(size), offset_(offset) {}
  backend* owner_ = nullptr;
  void* data_ = nullptr;
  bytes size_ = 0;
  bytes offset_ = 0;
};

/// Device memory from the budgeted pool (what backend::allocate returns).
using device_buffer = pool_buffer<memory_kind::device>;
/// Pinned host memory from the host pool, where offloaded tensors go.
using host_buffer = pool_buffer<memory_kind::pinned_host>;

/// An asynchronous copy in flight: its completion event on the copy stream. The compute stream
/// waits for it with backend::wait, the host with wait_host (or polls ready).
class transfer {
 public:
  transfer() = default;
  /// True once the copy has finished (never blocks).
  [[nodiscard]] bool ready() const {
    if (!done_.valid()) return true;
    const cudaError_t e = cudaEventQuery(done_.get());
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    REMAT_CUDA_CHECK(e);
    return true;
  }
  /// Blocks the host until the copy has finished.
  void wait_host() const {
    if (done_.valid()) REMAT_CUDA_CHECK(cudaEventSynchronize(done_.get()));
  }
  [[nodiscard]] cudaEvent_t event_handle() const noexcept { return done_.get(); }
  [[nodiscard]] bytes size() const noexcept { return size_; }

 private:
  friend class backend;
  transfer(event done, bytes size) : done_(std::move(done)), size_(size) {}
  event done_;
  bytes size_ = 0;
};

/// A point on the compute stream, for timing (TimingBackend).
class time_mark {
 public:
  time_mark() = default;
  [[nodiscard]] cudaEvent_t event_handle() const noexcept { return e_.get(); }

 private:
  friend class backend;
  explicit time_mark(event e) : e_(std::move(e)) {}
  event e_;
};

class backend {
 public:
  struct options {
    int device = 0;
    /// Bytes of pinned host memory for offloaded tensors (0: none; host_allocate then throws).
    bytes host_pool = 0;
    /// Alignment of every device allocation (cudaMalloc's own is 256).
    bytes alignment = 256;
  };

  /// A device pool of `budget` bytes on `device`, and the three streams. Throws cuda_error when
  /// there is no usable device or the budget cannot be allocated.
  explicit backend(bytes budget, int device = 0) : backend(budget, options{.device = device}) {}
  backend(bytes budget, options opt)
      : budget_(budget),
        opt_(opt),
        pool_(budget, opt.alignment),
        host_pool_(opt.host_pool, opt.alignment) {
    if (device_count() == 0)
      throw cuda_error("cudaGetDeviceCount", 0, "no usable CUDA device (no GPU, or no driver)");
    REMAT_CUDA_CHECK(cudaSetDevice(opt.device));
    try {
      if (budget > 0) REMAT_CUDA_CHECK(cudaMalloc(&base_, static_cast<std::size_t>(budget)));
      if (opt.host_pool > 0)
        REMAT_CUDA_CHECK(cudaMallocHost(&host_base_, static_cast<std::size_t>(opt.host_pool)));
      REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
      REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&d2h_, cudaStreamNonBlocking));
      REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&h2d_, cudaStreamNonBlocking));
    } catch (...) {
      destroy();
      throw;
    }
  }
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;
  ~backend() {
    if (in_use() > 0 || host_in_use() > 0)
      remat::exec::detail::backend_outlived("cuda::backend", in_use(), host_in_use(), "");
    destroy();
  }

  // --- the Backend concept ---------------------------------------------------------------------

  /// n bytes of device memory from the pool; throws out_of_budget when they do not fit.
  [[nodiscard]] device_buffer allocate(bytes n) {
    if (n < 0)
      throw std::invalid_argument(activity_ + ": negative allocation of " + std::to_string(n) +
                                  " bytes");
    if (n == 0) return {};
    if (n > budget_ - in_use()) throw out_of_budget(activity_, n, in_use(), budget_);
    const auto off = pool_.allocate(n, activity_);
    if (!off) {
      const auto s = pool_.arena().now();
      throw out_of_budget(activity_ + " (the pool is fragmented: " + format_bytes(s.free_total) +
                              " free, the largest block " + format_bytes(s.largest_free) + ")",
                          n, in_use(), budget_);
    }
    return device_buffer(this, static_cast<char*>(base_) + *off, n, *off);
  }
  [[nodiscard]] bytes budget() const noexcept { return budget_; }
  [[nodiscard]] bytes in_use() const noexcept { return pool_.arena().in_use(); }
  [[nodiscard]] bytes high_water() const noexcept { return pool_.arena().high_water(); }
  void reset_high_water() noexcept { pool_.arena().reset_high_water(); }
  void set_activity(std::string what) { activity_ = std::move(what); }
  [[nodiscard]] const std::string& activity() const noexcept { return activity_; }

  // --- the pool ---------------------------------------------------------------------------------

  /// Bytes of live blocks with their alignment padding.
  [[nodiscard]] bytes reserved() const noexcept { return pool_.arena().reserved(); }
  /// The highest end offset of a live block since the last reset_high_water(): the part of the
  /// budget the run really touched (high_water() plus what fragmentation and padding cost).
  [[nodiscard]] bytes extent_high_water() const noexcept { return pool_.arena().end_high_water(); }
  /// The worst fragmentation since the last reset_high_water().
  [[nodiscard]] detail::fragmentation_snapshot worst_fragmentation() const noexcept {
    return pool_.arena().worst_fragmentation();
  }
  [[nodiscard]] const detail::arena& pool() const noexcept { return pool_.arena(); }
  [[nodiscard]] void* pool_base() const noexcept { return base_; }

  // --- static placement (exec/placement.hpp) ----------------------------------------------------

  /// The next executor run is recorded (its allocations, sizes and lifetimes).
  void record_next_run() { pool_.record_next_run(); }
  /// Places the recorded run's buffers; every later run allocates at the planned offsets, so its
  /// extent_high_water() is the report's placed_peak. Fails when the placement exceeds the budget.
  result<placement_report> plan_placement() { return pool_.plan_placement(); }
  /// Back to best fit.
  void drop_placement() noexcept { pool_.drop_placement(); }
  [[nodiscard]] bool placing() const noexcept { return pool_.placing(); }
  /// The highest end offset in the pool during the last executor run: the memory it touched
  /// (its high-water mark plus padding and fragmentation); the placed_peak under a placement.
  [[nodiscard]] bytes run_extent() const noexcept { return pool_.run_extent(); }
  /// The last run's worst fragmentation (free bytes outside the largest free block).
  [[nodiscard]] detail::fragmentation_snapshot run_worst_fragmentation() const noexcept {
    return pool_.run_worst_fragmentation();
  }
  /// RunAwareBackend: the executor calls these around a run.
  void begin_run() { pool_.begin_run(); }
  void end_run() noexcept { pool_.end_run(); }

  // --- streams, copies, events ------------------------------------------------------------------

  [[nodiscard]] int device() const noexcept { return opt_.device; }
  /// The compute stream: the layers' kernels and cuBLAS calls go here.
  [[nodiscard]] cudaStream_t stream() const noexcept { return compute_; }
  [[nodiscard]] cudaStream_t d2h_stream() const noexcept { return d2h_; }
  [[nodiscard]] cudaStream_t h2d_stream() const noexcept { return h2d_; }

  /// n bytes of pinned host memory from the host pool; throws std::runtime_error when it is full.
  [[nodiscard]] host_buffer host_allocate(bytes n) {
    if (n < 0)
      throw std::invalid_argument(activity_ + ": negative host allocation of " + std::to_string(n) +
                                  " bytes");
    if (n == 0) return {};
    const auto off = host_pool_.allocate(n);
    if (!off)
      throw std::runtime_error(activity_ + ": the pinned host pool (" +
                               format_bytes(opt_.host_pool) + ") cannot hold " + format_bytes(n) +
                               " more with " + format_bytes(host_pool_.in_use()) +
                               " in use; construct the backend with a larger options::host_pool");
    return host_buffer(this, static_cast<char*>(host_base_) + *off, n, *off);
  }
  [[nodiscard]] bytes host_in_use() const noexcept { return host_pool_.in_use(); }
  [[nodiscard]] bytes host_high_water() const noexcept { return host_pool_.high_water(); }

  /// Copies src into dst (dst.size() >= src.size()) on the device-to-host stream, after the
  /// work queued so far on the compute stream. src must stay alive until the copy is done:
  /// release it with release_after().
  [[nodiscard]] transfer copy_to_host(const device_buffer& src, host_buffer& dst) {
    check_copy("copy_to_host", src.size(), dst.size());
    return copy(d2h_, dst.data(), src.data(), src.size(), cudaMemcpyDeviceToHost);
  }
  /// Copies src into dst (dst.size() >= src.size()) on the host-to-device stream, after the
  /// work queued so far on the compute stream (which may have used dst's memory before). The
  /// compute stream must wait() for it before reading dst.
  [[nodiscard]] transfer copy_to_device(const host_buffer& src, device_buffer& dst) {
    check_copy("copy_to_device", src.size(), dst.size());
    return copy(h2d_, dst.data(), src.data(), src.size(), cudaMemcpyHostToDevice);
  }
  /// Offload: a host buffer of src's size and the copy into it.
  [[nodiscard]] std::pair<host_buffer, transfer> offload(const device_buffer& src) {
    host_buffer h = host_allocate(src.size());
    transfer t = copy_to_host(src, h);
    return {std::move(h), std::move(t)};
  }
  /// Prefetch: a device buffer of src's size (counted against the budget from now, when the
  /// transfer starts) and the copy into it.
  [[nodiscard]] std::pair<device_buffer, transfer> prefetch(const host_buffer& src) {
    device_buffer d = allocate(src.size());
    transfer t = copy_to_device(src, d);
    return {std::move(d), std::move(t)};
  }
  /// Makes the compute stream wait for the transfer (the host does not block).
  void wait(const transfer& t) {
    if (t.event_handle() != nullptr)
      REMAT_CUDA_CHECK(cudaStreamWaitEvent(compute_, t.event_handle(), 0));
  }
  /// Releases a device buffer that the transfer reads or writes, once the compute stream is
  /// ordered after the transfer (so no later kernel reuses the memory before the copy ends).
  void release_after(device_buffer&& b, const transfer& t) {
    wait(t);
    b.release();
  }
  /// Releases a host buffer that the transfer reads or writes, once the copy has finished (the
  /// host blocks if it has not: the host pool's memory is reused at once).
  void release_after(host_buffer&& b, const transfer& t) {
    t.wait_host();
    b.release();
  }
  // --- parameters (ParameterBackend: programs that manage them, exec/managed_training.hpp) ------

  /// Copies a device buffer into an existing pinned host buffer of the same size (a
  /// parameter's host copy, kept across steps), on the device-to-host stream.
  [[nodiscard]] transfer offload_into(const device_buffer& src, host_buffer& dst) {
    if (src.size() != dst.size())
      throw std::invalid_argument(activity_ + ": offload_into needs buffers of the same size");
    return copy_to_host(src, dst);
  }
  /// Sets a buffer's bytes to zero on the compute stream (a gradient before its first
  /// contribution).
  void zero(device_buffer& b) {
    if (b.size() > 0)
      REMAT_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, static_cast<std::size_t>(b.size()), compute_));
  }
  /// Adam's step t on the compute stream: weight w, gradient g and states (m then v), floats
  /// (exec/adam.hpp's arithmetic, bit for bit: adam_step_async, <remat/exec/cuda/adam.cuh>).
  void device_adam(const adam& opt, long t, device_buffer& w, const device_buffer& g,
                   device_buffer& states) {
    if (g.size() != w.size() || states.size() != w.size() * adam::states_per_value)
      throw std::invalid_argument(activity_ +
                                  ": device_adam needs a gradient of the weight's size "
                                  "and two states of it");
    adam_step_async(opt, t, w.as<float>(), g.as<float>(), states.as<float>(),
                    static_cast<std::size_t>(w.size()) / sizeof(float), compute_);
  }

  /// Blocks the host until the three streams are idle.
  void synchronize() {
    REMAT_CUDA_CHECK(cudaStreamSynchronize(compute_));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(d2h_));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(h2d_));
  }

  // --- timing (TimingBackend) -------------------------------------------------------------------

  /// Records a timing event on the compute stream now.
  [[nodiscard]] time_mark mark_time() {
    event e(true);
    REMAT_CUDA_CHECK(cudaEventRecord(e.get(), compute_));
    return time_mark(std::move(e));
  }
  /// Seconds of compute-stream work between two marks (blocks until `to` has been reached).
  [[nodiscard]] seconds seconds_between(const time_mark& from, const time_mark& to) const {
    REMAT_CUDA_CHECK(cudaEventSynchronize(to.event_handle()));
    float ms = 0;
    REMAT_CUDA_CHECK(cudaEventElapsedTime(&ms, from.event_handle(), to.event_handle()));
    return static_cast<seconds>(ms) / 1000.0;
  }

 private:
  template <memory_kind>
  friend class pool_buffer;

  static void check_copy(const char* what, bytes src, bytes dst) {
    if (dst < src)
      throw std::invalid_argument(std::string("remat::cuda::backend::") + what +
                                  ": the destination has " + format_bytes(dst) + ", the source " +
                                  format_bytes(src));
  }
  transfer copy(cudaStream_t s, void* dst, const void* src, bytes n, cudaMemcpyKind kind) {
    event after_compute(false);
    REMAT_CUDA_CHECK(cudaEventRecord(after_compute.get(), compute_));
    REMAT_CUDA_CHECK(cudaStreamWaitEvent(s, after_compute.get(), 0));
    if (n > 0) REMAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n), kind, s));
    event done(false);
    REMAT_CUDA_CHECK(cudaEventRecord(done.get(), s));
    return transfer(std::move(done), n);
  }
  void deallocate(memory_kind k, bytes offset) noexcept {
    if (k == memory_kind::device)
      pool_.deallocate(offset);
    else
      host_pool_.deallocate(offset);
  }
  void destroy() noexcept {
    // Queued work may still use the memory: let it finish first.
    for (cudaStream_t* s : {&compute_, &d2h_, &h2d_}) {
      if (*s != nullptr) {
        (void)cudaStreamSynchronize(*s);
        (void)cudaStreamDestroy(*s);
      }
      *s = nullptr;
    }
    if (base_ != nullptr) (void)cudaFree(base_);
    if (host_base_ != nullptr) (void)cudaFreeHost(host_base_);
    base_ = host_base_ = nullptr;
  }

  bytes budget_;
  options opt_;
  placed_arena pool_;
  detail::arena host_pool_;
  void* base_ = nullptr;
  void* host_base_ = nullptr;
  cudaStream_t compute_ = nullptr, d2h_ = nullptr, h2d_ = nullptr;
  std::string activity_ = "an allocation";
};

template <memory_kind K>
inline void pool_buffer<K>::release() noexcept {
  if (owner_ != nullptr && size_ > 0) owner_->deallocate(K, offset_);
  owner_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  offset_ = 0;
}

}  // namespace remat::exec::cuda
