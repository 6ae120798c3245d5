#pragma once
// detail::parameter_hooks: what a run of a program that manages the parameters asks of their
// state (exec/detail/parameter_run.hpp), behind an interface, so that the executor's run of an
// ordinary program on any backend instantiates none of it (on the CUDA backend, none of the
// optimizer kernel that only managed_training's programs need).

#include <remat/core/units.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::exec::detail {

class parameter_hooks {
 public:
  /// An instruction on a parameter (manages_parameters()).
  virtual void apply(const instruction& ins) = 0;
  /// Before the backward of forward node f's op: the gradients it adds to, created zero.
  virtual void before_backward(int f) = 0;
  /// The device and host bytes the parameters hold now.
  [[nodiscard]] virtual bytes device_bytes() const = 0;
  [[nodiscard]] virtual bytes host_bytes() const = 0;

 protected:
  parameter_hooks() = default;
  parameter_hooks(const parameter_hooks&) = default;
  parameter_hooks(parameter_hooks&&) = default;
  parameter_hooks& operator=(const parameter_hooks&) = default;
  parameter_hooks& operator=(parameter_hooks&&) = default;
  ~parameter_hooks() = default;
};

}  // namespace remat::exec::detail
