#pragma once
// Chain layers for the compile-fail programs on a model's places and the loss's targets
// (tests/CMakeLists.txt, compile_fail.*): a layer with the backward with dy, a loss without
// targets, a loss that takes targets only.
#include <vector>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

namespace cf {
using remat::exec::host_backend;

struct tensor {
  host_backend::buffer buf;
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
};
struct context {
  [[nodiscard]] remat::bytes bytes() const { return 0; }
};
using targets = std::vector<float>;

/// Not a loss: its backward takes dy.
struct layer {
  using context = cf::context;
  tensor forward(const tensor& x, host_backend& b) { return {b.allocate(x.bytes())}; }
  tensor forward_save(const tensor& x, context&, host_backend& b) {
    return {b.allocate(x.bytes())};
  }
  tensor backward(const tensor& x, const tensor&, const context&, const tensor&, host_backend& b) {
    return {b.allocate(x.bytes())};
  }
};
/// A loss without targets: its backward takes no dy.
struct loss {
  using context = cf::context;
  tensor forward(const tensor&, host_backend& b) { return {b.allocate(4)}; }
  tensor forward_save(const tensor&, context&, host_backend& b) { return {b.allocate(4)}; }
  tensor backward(const tensor& x, const tensor&, const context&, host_backend& b) {
    return {b.allocate(x.bytes())};
  }
};
/// A loss that takes the batch's targets, and only them.
struct targets_loss {
  using context = cf::context;
  tensor forward(const tensor&, const targets&, host_backend& b) { return {b.allocate(4)}; }
  tensor forward_save(const tensor&, const targets&, context&, host_backend& b) {
    return {b.allocate(4)};
  }
  tensor backward(const tensor& x, const tensor&, const context&, const targets&, host_backend& b) {
    return {b.allocate(x.bytes())};
  }
};

/// A chain of n stages for the executor.
inline remat::chain chain_of(int n) {
  remat::chain c{"c", 4, {}};
  for (int i = 0; i < n; ++i) c.stages.push_back({"s", 1, 1, 4, 4, 0, 0});
  return c;
}
}  // namespace cf
