#pragma once
// Archetypes (as Boost.Graph's concept archetypes): for each requirement remat places on a user's
// type, the smallest type that meets it and nothing more. remat's own generic code (the executor,
// the profilers, code that takes a policy as a template parameter) is compiled against them in
// tests/exec/test_archetypes.cpp, so that it cannot quietly use a member the concepts do not
// promise; use them the same way to check your own generic code. Every member is declared as the
// concepts ask (move-only where only movability is required) and does nothing useful: they are
// for compiling, not for running.

#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::archetypes {

namespace detail {
[[noreturn]] inline void unreachable() {
  throw std::logic_error("remat::archetypes: for compiling only");
}
}  // namespace detail

/// Move-only, default-constructible: what a backend's allocate returns (exec::buffer_t).
struct buffer {
  buffer() = default;
  buffer(buffer&&) = default;
  buffer& operator=(buffer&&) = default;
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
};

/// A Backend and a TransferBackend (exec/concepts.hpp).
class backend {
 public:
  struct host_copy {
    host_copy() = default;
    host_copy(host_copy&&) = default;
    host_copy& operator=(host_copy&&) = default;
    host_copy(const host_copy&) = delete;
    host_copy& operator=(const host_copy&) = delete;
  };
  struct transfer {
    transfer() = default;
    transfer(transfer&&) = default;
    transfer& operator=(transfer&&) = default;
    transfer(const transfer&) = delete;
    transfer& operator=(const transfer&) = delete;
    [[nodiscard]] bool ready() const { detail::unreachable(); }
    void wait_host() const { detail::unreachable(); }
  };
  buffer allocate(bytes) { detail::unreachable(); }
  [[nodiscard]] bytes in_use() const { detail::unreachable(); }
  [[nodiscard]] bytes high_water() const { detail::unreachable(); }
  [[nodiscard]] bytes budget() const { detail::unreachable(); }
  void reset_high_water() { detail::unreachable(); }
  void set_activity(std::string) { detail::unreachable(); }
  [[nodiscard]] const std::string& activity() const { detail::unreachable(); }
  std::pair<host_copy, transfer> offload(const buffer&) { detail::unreachable(); }
  std::pair<buffer, transfer> prefetch(const host_copy&) { detail::unreachable(); }
  void wait(const transfer&) { detail::unreachable(); }
};

/// A Tensor and a TransferableTensor of `backend`: move-only, its size, its buffer.
struct tensor {
  tensor() = delete;
  explicit tensor(buffer) {}
  tensor(tensor&&) = default;
  tensor& operator=(tensor&&) = default;
  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;
  [[nodiscard]] remat::bytes bytes() const { detail::unreachable(); }
  buffer& storage() { detail::unreachable(); }
};

/// A layer's context: default-constructible, movable, its size.
struct context {
  context() = default;
  context(context&&) = default;
  context& operator=(context&&) = default;
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  [[nodiscard]] remat::bytes bytes() const { detail::unreachable(); }
};

/// A chain layer (exec::Layer): both backwards, as a model's layers may be the loss or not.
struct chain_layer {
  using context = archetypes::context;
  tensor forward(const tensor&, backend&) { detail::unreachable(); }
  tensor forward_save(const tensor&, context&, backend&) { detail::unreachable(); }
  tensor backward(const tensor&, const tensor&, const context&, const tensor&, backend&) {
    detail::unreachable();
  }
  tensor backward(const tensor&, const tensor&, const context&, backend&) { detail::unreachable(); }
};

/// A graph (DAG) layer (exec::DagLayer): both backwards.
struct dag_layer {
  using context = archetypes::context;
  tensor forward(std::span<const tensor* const>, backend&) { detail::unreachable(); }
  tensor forward_save(std::span<const tensor* const>, context&, backend&) { detail::unreachable(); }
  void backward(std::span<const tensor* const>, const tensor*, const context&, const tensor&,
                std::span<std::optional<tensor>>, backend&) {
    detail::unreachable();
  }
  void backward(std::span<const tensor* const>, const tensor*, const context&,
                std::span<std::optional<tensor>>, backend&) {
    detail::unreachable();
  }
};

/// A policy (Policy<P, chain> and Policy<P, graph>, policy/concepts.hpp).
struct policy {
  static constexpr std::string_view name = "archetype";
  [[nodiscard]] result<schedule> solve(const chain&, bytes) const { detail::unreachable(); }
  [[nodiscard]] result<schedule> solve(const graph&, bytes) const { detail::unreachable(); }
};

}  // namespace remat::archetypes
