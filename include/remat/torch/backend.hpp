#pragma once
// remat::libtorch::backend: the budgeted backend for LibTorch models on the host. LibTorch's CPU
// kernels allocate through c10's CPU allocator, so while a backend lives a counting c10::Allocator
// wraps it: every allocation is counted (in_use, high_water) and checked against the budget
// (exec::out_of_budget), and uncounted when freed. One backend at a time; `uncounted` guards the
// adapter's own snapshots; a `state_window` makes parameter gradients model state as if never
// counted. docs/executor.md, "The LibTorch backend".

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

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
    std::size_t logged_at = SIZE_MAX;
    {
      const std::lock_guard lock(self->mutex_);
      if (!self->counting_) return inner->allocate(n);
      const auto size = static_cast<bytes>(n);
      // In a state window the bytes that will become model state are not the budget's.
      const bytes room = self->budget_ - self->in_use_ +
                         std::min(self->window_credit_, unlimited_bytes - self->budget_);
      if (size > room)
        throw exec::out_of_budget(self->activity_, size, self->in_use_, self->budget_);
      self->in_use_ += size;
      if (self->in_use_ > self->high_water_) self->high_water_ = self->in_use_;
      ++self->allocations_;
      generation = self->generation_;
      if (self->window_open_) {  // logged in the order of the counts; its address comes below
        logged_at = self->window_log_.size();
        self->window_log_.push_back({nullptr, size});
      }
    }
    c10::DataPtr d;
    try {
      d = inner->allocate(n);
    } catch (...) {
      self->uncount(static_cast<bytes>(n), generation, logged_at);
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
      if (self->window_open_ && logged_at < self->window_log_.size())
        self->window_log_[logged_at].data = data;
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

  /// Opens a state window: until close_window, the counted allocations and frees are logged, so
  /// that some of them can become model state as if they had never been counted (a parameter's
  /// gradient, made by a backward), and the budget has `credit` more bytes of room (the most
  /// state the window can make). One window at a time.
  void open_window(bytes credit) {
    const std::lock_guard lock(mutex_);
    if (window_open_)
      throw std::logic_error(
          "remat::libtorch: a state window is already open (windows do not nest)");
    window_open_ = true;
    window_credit_ = std::max<bytes>(0, credit);
    window_in_use_ = in_use_;
    window_high_water_ = high_water_;
    window_log_.clear();
  }
  /// Closes the window; the allocations of `state` made in it and still counted leave the count
  /// as if they had never been in it: in_use drops by their bytes and the high water is replayed
  /// over the window's log without them. Those made before the window leave the count from now
  /// on (the high water keeps them). Returns the bytes that left the count.
  bytes close_window(const std::vector<const c10::DataPtr*>& state) {
    const std::lock_guard lock(mutex_);
    window_open_ = false;
    window_credit_ = 0;
    // The state's allocations: the last time each address was allocated in the window.
    std::unordered_map<void*, std::size_t> made;  // address -> index in the log
    bytes left = 0;
    for (const c10::DataPtr* d : state) {
      if (d == nullptr || d->get_deleter() != &counting_allocator::free_counted) continue;
      const auto it = records_.find(d->get_context());
      if (it == records_.end() || !it->second.counted || it->second.generation != generation_)
        continue;
      it->second.counted = false;
      in_use_ -= it->second.size;
      left += it->second.size;
      for (std::size_t e = window_log_.size(); e-- > 0;)
        if (window_log_[e].data == d->get_context() && window_log_[e].delta > 0) {
          made.emplace(d->get_context(), e);
          break;
        }
    }
    if (made.empty()) return left;
    bytes cur = window_in_use_, high = window_high_water_;
    for (std::size_t e = 0; e < window_log_.size(); ++e) {
      const auto it = made.find(window_log_[e].data);
      if (it != made.end() && e >= it->second) continue;  // state from its allocation on
      cur += window_log_[e].delta;
      high = std::max(high, cur);
    }
    high_water_ = std::max(high, in_use_);
    window_log_.clear();
    return left;
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
    window_open_ = false;
    window_credit_ = 0;
    window_log_.clear();
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
  struct logged {  // a counted allocation (delta > 0) or free (delta < 0) in a state window
    void* data = nullptr;
    bytes delta = 0;
  };
  struct record {
    c10::DataPtr inner;  // the wrapped allocator's memory, freed with the record
    bytes size = 0;
    std::uint64_t generation = 0;  // the backend that counted it
    bool counted = true;           // false once exempted
  };
  counting_allocator() = default;

  void uncount(bytes size, std::uint64_t generation, std::size_t logged_at) {
    const std::lock_guard lock(mutex_);
    if (generation != generation_) return;
    in_use_ -= size;
    if (window_open_ && logged_at < window_log_.size()) window_log_.push_back({nullptr, -size});
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
        if (it->second.counted && it->second.generation == self.generation_) {
          self.in_use_ -= it->second.size;
          if (self.window_open_) self.window_log_.push_back({data, -it->second.size});
        }
        inner = std::move(it->second.inner);
        self.records_.erase(it);
      }
    }
    if (uncounted_deleter != nullptr) uncounted_deleter(data);
  }

  std::unordered_map<void*, record> records_;
  bool window_open_ = false;
  bytes window_credit_ = 0;
  bytes window_in_use_ = 0;      // in_use when the window opened
  bytes window_high_water_ = 0;  // the high water then
  std::vector<logged> window_log_;
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

/// While alive, the tensors a backward makes can become model state as if they had never been
/// counted: the LibTorch adapter's backward makes the parameters' gradients in one, as they live
/// from their backward to the optimizer step, beside the weights and outside the plan's budget.
/// `credit`: the most bytes of state the window can make (the budget has that much more room
/// while it is open; the high water is exact once it closes). One window at a time.
class state_window {
 public:
  explicit state_window(bytes credit) {
    detail::counting_allocator::instance().open_window(credit);
  }
  ~state_window() {
    if (open_) detail::counting_allocator::instance().close_window({});
  }
  state_window(const state_window&) = delete;
  state_window& operator=(const state_window&) = delete;

  /// Closes the window: the storages of `state` made in it leave the count and the high water
  /// as if never counted; those made before it leave the count from now on. Returns their bytes.
  bytes close(const std::vector<at::Tensor>& state) {
    std::vector<const c10::DataPtr*> ptrs;
    for (const at::Tensor& t : state)
      if (t.defined() && t.has_storage()) ptrs.push_back(&t.storage().data_ptr());
    open_ = false;
    return detail::counting_allocator::instance().close_window(ptrs);
  }

 private:
  bool open_ = true;
};

/// Takes the storage of `t` out of the backend's count (a parameter's gradient, model state from
/// now on). False if it was not counted.
inline bool exempt_from_count(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return false;
  return detail::counting_allocator::instance().exempt(t.storage().data_ptr());
}

}  // namespace remat::libtorch
