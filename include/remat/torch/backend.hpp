#pragma once
// remat::libtorch::backend: the budgeted backend for LibTorch models on the host. LibTorch's CPU
// kernels allocate through c10's CPU allocator, so while a backend lives a counting c10::Allocator
// wraps it: every allocation is counted (in_use, high_water) and checked against the budget
// (exec::out_of_budget), and uncounted when freed. One backend at a time; `uncounted` guards the
// adapter's own snapshots. docs/executor.md, "The LibTorch backend".

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <remat/core/units.hpp>
#include <remat/exec/host_backend.hpp>  // out_of_budget

namespace remat::libtorch {

namespace detail {

/// How many `uncounted` guards are alive on this thread.
inline int& uncounted_depth() noexcept {
  thread_local int depth = 0;
  return depth;
}

/// The process-wide counting allocator. It is made once and never destroyed (tensors may be
/// freed during static destruction), installed while a backend lives, and counts for the backend
/// whose generation is current.
class counting_allocator final : public c10::Allocator {
 public:
  static counting_allocator& instance() {
    static auto* a = new counting_allocator;  // never deleted: see above
    return *a;
  }

  c10::DataPtr allocate(std::size_t n) const override {
    auto* self = const_cast<counting_allocator*>(this);  // c10::Allocator::allocate is const
    c10::Allocator* inner = self->inner_;
    if (n == 0 || uncounted_depth() > 0) return inner->allocate(n);
    std::uint64_t generation = 0;
    {
      const std::lock_guard lock(self->mutex_);
      if (!self->counting_) return inner->allocate(n);
      const auto size = static_cast<bytes>(n);
      if (size > self->budget_ - self->in_use_)
        throw exec::out_of_budget(self->activity_, size, self->in_use_, self->budget_);
      self->in_use_ += size;
      if (self->in_use_ > self->high_water_) self->high_water_ = self->in_use_;
      ++self->allocations_;
      generation = self->generation_;
    }
    c10::DataPtr d;
    try {
      d = inner->allocate(n);
    } catch (...) {
      self->uncount(static_cast<bytes>(n), generation);
      throw;
    }
    // The context is the data pointer itself (LibTorch's raw_allocate asks for that): the records
    // are found by address.
    void* data = d.get();
    const c10::Device device = d.device();
    {
      const std::lock_guard lock(self->mutex_);
      self->records_.insert_or_assign(
          data, record{std::move(d), static_cast<bytes>(n), generation, true});
    }
    return {data, data, &counting_allocator::free_counted, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counting_allocator::free_counted; }

  /// The storage of `d` leaves the count now (a parameter's gradient, kept as model state); its
  /// memory is then freed without touching the counts. False if `d` is not a counted allocation.
  bool exempt(const c10::DataPtr& d) {
    if (d.get_deleter() != &counting_allocator::free_counted) return false;
    const std::lock_guard lock(mutex_);
    const auto it = records_.find(d.get_context());
    if (it == records_.end() || !it->second.counted) return false;
    if (it->second.generation == generation_) in_use_ -= it->second.size;
    it->second.counted = false;
    return true;
  }

  // The backend's view (under the mutex).
  void begin(bytes budget) {
    const std::lock_guard lock(mutex_);
    if (counting_)
      throw std::logic_error(
          "remat::libtorch::backend: another backend is already counting LibTorch's CPU "
          "allocations (the CPU "
          "allocator is process-wide); destroy it before making a new one, or set_budget() on it");
    inner_ = c10::GetCPUAllocator();
    if (inner_ == this)
      throw std::logic_error(
          "remat::libtorch::backend: the counting allocator is already installed");
    // The highest priority, so that the previous allocator can be put back with it (c10 keeps
    // the priority of the last allocator set and refuses lower ones).
    c10::SetCPUAllocator(this, 255);
    counting_ = true;
    ++generation_;
    budget_ = budget;
    in_use_ = high_water_ = 0;
    allocations_ = 0;
    activity_ = "an allocation";
  }
  void end() {
    const std::lock_guard lock(mutex_);
    counting_ = false;
    c10::SetCPUAllocator(inner_, 255);
  }
  template <class F>
  decltype(auto) locked(F&& f) {
    const std::lock_guard lock(mutex_);
    return std::forward<F>(f)(*this);
  }

  bytes budget_ = unlimited_bytes;
  bytes in_use_ = 0;
  bytes high_water_ = 0;
  long allocations_ = 0;
  std::string activity_ = "an allocation";

 private:
  struct record {
    c10::DataPtr inner;  // the wrapped allocator's memory, freed with the record
    bytes size = 0;
    std::uint64_t generation = 0;  // the backend that counted it
    bool counted = true;           // false once exempted
  };
  counting_allocator() = default;

  void uncount(bytes size, std::uint64_t generation) {
    const std::lock_guard lock(mutex_);
    if (generation == generation_) in_use_ -= size;
  }
  static void free_counted(void* data) {
    auto& self = instance();
    c10::DataPtr inner;  // freed after the lock is released
    c10::DeleterFnPtr uncounted_deleter = nullptr;
    {
      const std::lock_guard lock(self.mutex_);
      const auto it = self.records_.find(data);
      if (it == self.records_.end()) {
        // Not counted: memory the wrapped allocator gave directly (an uncounted guard, or no
        // backend counting), released through raw_allocate and freed here by raw_deallocate.
        uncounted_deleter = self.inner_ != nullptr ? self.inner_->raw_deleter() : nullptr;
      } else {
        if (it->second.counted && it->second.generation == self.generation_)
          self.in_use_ -= it->second.size;
        inner = std::move(it->second.inner);
        self.records_.erase(it);
      }
    }
    if (uncounted_deleter != nullptr) uncounted_deleter(data);
  }

  std::unordered_map<void*, record> records_;
  std::mutex mutex_;
  c10::Allocator* inner_ = nullptr;
  bool counting_ = false;
  std::uint64_t generation_ = 0;
};

}  // namespace detail

/// While alive, allocations on this thread are not counted by the backend (state kept beside
/// the run: random states, buffer snapshots).
class uncounted {
 public:
  uncounted() noexcept { ++detail::uncounted_depth(); }
  ~uncounted() { --detail::uncounted_depth(); }
  uncounted(const uncounted&) = delete;
  uncounted& operator=(const uncounted&) = delete;
};

/// The budgeted backend over LibTorch's CPU allocator (a remat::exec::Backend): see the top of
/// this file. Buffers are byte tensors (allocate); the layers' own tensors are counted the same.
class backend {
  template <class F>
  static auto get(F f) {
    return detail::counting_allocator::instance().locked(f);
  }

 public:
  using buffer = at::Tensor;

  explicit backend(bytes budget = unlimited_bytes) {
    detail::counting_allocator::instance().begin(budget);
  }
  ~backend() { detail::counting_allocator::instance().end(); }
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;

  /// n bytes (a byte tensor), counted against the budget; throws exec::out_of_budget past it.
  [[nodiscard]] at::Tensor allocate(bytes n) {
    if (n < 0)
      throw std::invalid_argument(activity() + ": negative allocation of " + std::to_string(n) +
                                  " bytes");
    return at::empty({static_cast<std::int64_t>(n)}, at::TensorOptions().dtype(at::kByte));
  }

  [[nodiscard]] bytes budget() const {
    return get([](auto& a) { return a.budget_; });
  }
  void set_budget(bytes b) {
    detail::counting_allocator::instance().locked([b](auto& a) { a.budget_ = b; });
  }
  [[nodiscard]] bytes in_use() const {
    return get([](auto& a) { return a.in_use_; });
  }
  [[nodiscard]] bytes high_water() const {
    return get([](auto& a) { return a.high_water_; });
  }
  void reset_high_water() {
    detail::counting_allocator::instance().locked([](auto& a) { a.high_water_ = a.in_use_; });
  }
  /// Allocations counted so far.
  [[nodiscard]] long allocations() const {
    return get([](auto& a) { return a.allocations_; });
  }
  void set_activity(std::string what) {
    detail::counting_allocator::instance().locked([&](auto& a) { a.activity_ = std::move(what); });
  }
  [[nodiscard]] std::string activity() const {
    return get([](auto& a) { return a.activity_; });
  }
};

/// Takes the storage of `t` out of the backend's count (a parameter's gradient, model state from
/// now on). False if it was not counted.
inline bool exempt_from_count(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return false;
  return detail::counting_allocator::instance().exempt(t.storage().data_ptr());
}

}  // namespace remat::libtorch
