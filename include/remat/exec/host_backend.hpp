#pragma once
// host_backend: the reference backend. Every tensor, context and temporary of the layers is
// allocated through it, so the memory it reports is the memory the schedule uses; it enforces a
// byte budget (out_of_budget names what was running), records the high-water mark and who holds
// the memory (live_summary), and keeps offloaded tensors in an unbudgeted host store with
// synchronous copies (a TransferBackend), and the parameter management of OFFMATE programs
// (a ParameterBackend: copies into kept host buffers, zeroing, Adam on the device side).
// docs/executor.md, "The host backend".

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/exec/adam.hpp>

namespace remat::exec {

/// Thrown by a backend when an allocation would exceed its budget.
class out_of_budget : public std::runtime_error {
 public:
  out_of_budget(std::string activity, bytes requested, bytes in_use, bytes budget)
      : std::runtime_error(activity + ": allocating " + format_bytes(requested) + " with " +
                           format_bytes(in_use) + " in use would exceed the budget of " +
                           format_bytes(budget)),
        activity_(std::move(activity)),
        requested_(requested),
        in_use_(in_use),
        budget_(budget) {}
  [[nodiscard]] const std::string& activity() const noexcept { return activity_; }
  [[nodiscard]] bytes requested() const noexcept { return requested_; }
  [[nodiscard]] bytes in_use() const noexcept { return in_use_; }
  [[nodiscard]] bytes budget() const noexcept { return budget_; }

 private:
  std::string activity_;
  bytes requested_, in_use_, budget_;
};

namespace detail {
/// What a backend's destructor does when some of its buffers are still alive (they would free
/// into a backend that no longer exists): says so on stderr and aborts.
[[noreturn]] inline void backend_outlived(const char* backend, bytes in_use, bytes host_in_use,
                                          const std::string& held) noexcept {
  std::fprintf(stderr,
               "remat: %s destroyed while %s of its buffers are alive (%s on the host)%s: "
               "destroy the tensors and run results it allocated before it\n",
               backend, format_bytes(in_use).c_str(), format_bytes(host_in_use).c_str(),
               held.c_str());
  std::abort();
}
}  // namespace detail

/// Bytes of the budgeted store held by the buffers one activity allocated
/// (host_backend::live_summary).
struct live_bytes {
  std::string activity;
  bytes size = 0;
};

class host_backend {
 public:
  /// Memory owned by the backend: move-only, returned to the backend when destroyed. The
  /// backend must outlive its buffers (~host_backend checks).
  class buffer {
   public:
    buffer() = default;
    buffer(buffer&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)),
          data_(std::exchange(o.data_, nullptr)),
          size_(std::exchange(o.size_, 0)),
          host_(o.host_),
          tag_(o.tag_) {}
    buffer& operator=(buffer&& o) noexcept {
      if (this != &o) {
        release();
        owner_ = std::exchange(o.owner_, nullptr);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        host_ = o.host_;
        tag_ = o.tag_;
      }
      return *this;
    }
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
    ~buffer() { release(); }

    [[nodiscard]] void* data() const noexcept { return data_; }
    template <class T>
    [[nodiscard]] T* as() const noexcept {
      return static_cast<T*>(data_);
    }
    [[nodiscard]] bytes size() const noexcept { return size_; }
    [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
    /// True for memory of the host store (host_allocate, offload), false for the budgeted one.
    [[nodiscard]] bool on_host() const noexcept { return host_; }
    /// The backend it came from (nullptr for an empty buffer): managed_training gives a
    /// parameter back to the backend its buffer came from.
    [[nodiscard]] host_backend* owner() const noexcept { return owner_; }
    /// Frees the memory now (the buffer becomes empty).
    void release() noexcept {
      if (owner_ != nullptr) owner_->deallocate(data_, size_, host_, tag_);
      owner_ = nullptr;
      data_ = nullptr;
      size_ = 0;
    }

   private:
    friend class host_backend;
    buffer(host_backend* owner, void* data, bytes size, bool host, std::size_t tag)
        : owner_(owner), data_(data), size_(size), host_(host), tag_(tag) {}
    host_backend* owner_ = nullptr;
    void* data_ = nullptr;
    bytes size_ = 0;
    bool host_ = false;
    std::size_t tag_ = 0;  // the activity that allocated it (host_backend::live_)
  };

  /// A copy between the stores. host_backend copies synchronously: it is complete at once.
  class transfer {
   public:
    [[nodiscard]] bool ready() const noexcept { return true; }
    void wait_host() const noexcept {}
    [[nodiscard]] bytes size() const noexcept { return size_; }

   private:
    friend class host_backend;
    explicit transfer(bytes size) : size_(size) {}
    bytes size_ = 0;
  };

  /// Alignment of every allocation (enough for Eigen's vectorised kernels).
  static constexpr std::size_t alignment = 64;

  explicit host_backend(bytes budget = unlimited_bytes) : budget_(budget) {}
  host_backend(const host_backend&) = delete;
  host_backend& operator=(const host_backend&) = delete;
  /// Every buffer must be gone first (tensors, contexts, a run_result's input gradient): one
  /// that outlived its backend would free into memory that no longer exists. A backend
  /// destroyed with buffers alive says so on stderr, naming who allocated them, and aborts.
  ~host_backend() {
    if (in_use_ == 0 && host_in_use_ == 0) return;
    std::string held;
    for (const auto& l : live_summary()) held += "; " + format_bytes(l.size) + " by " + l.activity;
    detail::backend_outlived("host_backend", in_use_, host_in_use_, held);
  }

  /// n bytes, counted against the budget; throws out_of_budget past it.
  [[nodiscard]] buffer allocate(bytes n) {
    if (n < 0)
      throw std::invalid_argument(activity_ + ": negative allocation of " + std::to_string(n) +
                                  " bytes");
    if (n > budget_ - in_use_) throw out_of_budget(activity_, n, in_use_, budget_);
    if (n > 0) ++allocations_;
    return take(n, false, in_use_, high_water_);
  }

  // --- transfers (TransferBackend) --------------------------------------------------------------

  /// n bytes of the unbudgeted host store.
  [[nodiscard]] buffer host_allocate(bytes n) {
    if (n < 0)
      throw std::invalid_argument(activity_ + ": negative host allocation of " + std::to_string(n) +
                                  " bytes");
    return take(n, true, host_in_use_, host_high_water_);
  }
  /// A host copy of a buffer of the budgeted store, made now.
  [[nodiscard]] std::pair<buffer, transfer> offload(const buffer& src) {
    if (src.on_host())
      throw std::invalid_argument(activity_ + ": offload of a buffer that is already on the host");
    buffer h = host_allocate(src.size());
    copy(h, src);
    return {std::move(h), transfer(src.size())};
  }
  /// A copy of a host buffer in the budgeted store (counted from now), made now.
  [[nodiscard]] std::pair<buffer, transfer> prefetch(const buffer& src) {
    if (!src.on_host())
      throw std::invalid_argument(activity_ + ": prefetch of a buffer that is not on the host");
    buffer d = allocate(src.size());
    copy(d, src);
    return {std::move(d), transfer(src.size())};
  }
  /// Nothing to wait for: copies are synchronous.
  void wait(const transfer&) const noexcept {}
  [[nodiscard]] bytes host_in_use() const noexcept { return host_in_use_; }
  [[nodiscard]] bytes host_high_water() const noexcept { return host_high_water_; }
  /// Starts a new measurement of the host store's high water from what it holds now.
  void reset_host_high_water() noexcept { host_high_water_ = host_in_use_; }

  // --- parameters (ParameterBackend: programs that manage them, exec/managed_training.hpp) ------

  /// Copies a buffer of the budgeted store into an existing host buffer of the same size (a
  /// parameter's host copy, allocated once and kept), now.
  transfer offload_into(const buffer& src, buffer& dst) {
    if (src.on_host() || !dst.on_host() || src.size() != dst.size())
      throw std::invalid_argument(activity_ +
                                  ": offload_into needs a device buffer and a host buffer of the "
                                  "same size");
    copy(dst, src);
    return transfer(src.size());
  }
  /// Sets a buffer's bytes to zero (a gradient before its first contribution).
  static void zero(buffer& b) noexcept {
    if (b.size() > 0) std::memset(b.data(), 0, static_cast<std::size_t>(b.size()));
  }
  /// Adam's step t on the device side: weight w, gradient g and states (m then v) of the
  /// budgeted store, all floats (exec/adam.hpp; the same code as the host side's).
  void device_adam(const adam& opt, long t, buffer& w, const buffer& g, buffer& states) const {
    const auto n = static_cast<std::size_t>(w.size()) / sizeof(float);
    if (g.size() != w.size() || states.size() != w.size() * adam::states_per_value)
      throw std::invalid_argument(activity_ +
                                  ": device_adam needs a gradient of the weight's size "
                                  "and two states of it");
    opt.step(w.as<float>(), g.as<float>(), states.as<float>(), n, t);
  }

  [[nodiscard]] bytes budget() const noexcept { return budget_; }
  void set_budget(bytes b) noexcept { budget_ = b; }
  [[nodiscard]] bytes in_use() const noexcept { return in_use_; }
  [[nodiscard]] bytes high_water() const noexcept { return high_water_; }
  /// Starts a new high-water measurement from what is in use now.
  void reset_high_water() noexcept { high_water_ = in_use_; }
  [[nodiscard]] long allocations() const noexcept { return allocations_; }

  /// What is running, for error messages ("F3_all of stage 3 ('fc2')").
  void set_activity(std::string what) {
    const auto [it, added] = tag_of_.try_emplace(what, live_.size());
    if (added) live_.push_back({what, 0});
    tag_ = it->second;
    activity_ = std::move(what);
  }
  [[nodiscard]] const std::string& activity() const noexcept { return activity_; }
  /// The `top` activities whose buffers hold the most bytes of the budgeted store now, largest
  /// first (ties: the activity seen first), and only those holding some.
  [[nodiscard]] std::vector<live_bytes> live_summary(std::size_t top = 3) const {
    std::vector<live_bytes> out;
    for (const auto& l : live_)
      if (l.size > 0) out.push_back(l);
    std::stable_sort(out.begin(), out.end(),
                     [](const live_bytes& a, const live_bytes& b) { return a.size > b.size; });
    if (out.size() > top) out.resize(top);
    return out;
  }

 private:
  /// n bytes from the system, counted in `used` and `high`.
  buffer take(bytes n, bool host, bytes& used, bytes& high) {
    if (n == 0) return buffer(nullptr, nullptr, 0, host, tag_);  // owns nothing
    const auto rounded = (static_cast<std::size_t>(n) + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    used += n;
    if (used > high) high = used;
    if (!host) live_[tag_].size += n;
    return buffer(this, p, n, host, tag_);
  }
  static void copy(buffer& dst, const buffer& src) noexcept {
    if (src.size() > 0) std::memcpy(dst.data(), src.data(), static_cast<std::size_t>(src.size()));
  }
  void deallocate(void* p, bytes n, bool host, std::size_t tag) noexcept {
    std::free(p);
    (host ? host_in_use_ : in_use_) -= n;
    if (!host) live_[tag].size -= n;
  }
  bytes budget_;
  bytes in_use_ = 0;
  bytes high_water_ = 0;
  bytes host_in_use_ = 0;
  bytes host_high_water_ = 0;
  long allocations_ = 0;
  std::string activity_ = "an allocation";
  // Bytes held per activity (live_summary), indexed by tag; tag_ is activity_'s.
  std::vector<live_bytes> live_{{activity_, 0}};
  std::unordered_map<std::string, std::size_t> tag_of_{{activity_, 0}};
  std::size_t tag_ = 0;
};

}  // namespace remat::exec
