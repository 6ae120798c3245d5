#pragma once
// run_result<T>: what one run of the executor measured (exec/executor.hpp): the input gradient,
// the run's peak and time, per instruction its peak and time, the forwards per op, the loss and
// the host store's peak; in the dynamic mode, the program its decisions made.
// Its own header so that what reads runs (exec/measured.hpp) need not include the executor.
// docs/executor.md, "What a run returns".

#include <optional>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::exec {

/// What one run measured.
template <class T>
struct run_result {
  T input_gradient;               ///< the gradient of the graph (chain) input
  bytes measured_peak = 0;        ///< the run's peak in the backend, the input included
  seconds elapsed = 0;            ///< time of the run (wall clock, or a TimingBackend's)
  std::vector<bytes> op_peaks;    ///< per instruction: peak while it ran (same basis)
  std::vector<seconds> op_times;  ///< per instruction: its time (same clock)
  /// Forward calls (fast-forward and forward_save) per op: forwards[i] counts op i, the model's
  /// element i (a dag_model's ops[i]; a chain model's layer i, which is stage i + 1).
  std::vector<int> forwards;
  /// The loss: tensor_traits<T>::item of the loss op's output at its first forward of the run
  /// (the last op's; empty when the tensor type has no item(), exec/concepts/tensor.hpp).
  std::optional<double> loss;
  /// The host store's peak over the run, on a backend that counts it (host_in_use,
  /// host_high_water, reset_host_high_water: host_backend): offloaded copies and, in a program
  /// that manages the parameters, their host copies, states and gradients. Empty elsewhere.
  std::optional<bytes> measured_host_peak = std::nullopt;
  /// The dynamic mode's decisions (executor::run with exec::dynamic): the instructions it ran, in
  /// order (op_peaks[i] and op_times[i] are ops[i]'s), a program over the run's graph whose
  /// predicted_time sums the graph's times of its computes. Empty for a run of a schedule.
  std::optional<schedule> decisions = std::nullopt;
};

}  // namespace remat::exec
