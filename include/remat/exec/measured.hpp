#pragma once
// measured_report(schedule, run_result): what a run of the executor measured, as a sim::report,
// so that everything drawn from the simulator's reports (io/trace.hpp's Chrome traces; pictures
// of memory over time) draws measured runs too, next to the plan (issue 15 §2).
//
// The executor measures per instruction its time (op_times) and its high water of device memory
// (op_peaks), and the run's peak and elapsed time (exec/executor.hpp); the report is built from
// those alone:
//   * the instructions ran one after the other on the host thread, so instruction i starts at the
//     sum of op_times[0..i) and ends op_times[i] later. Offloads and prefetches sit on their lanes
//     (device_to_host, host_to_device) at those measured times: on host_backend their copies are
//     synchronous, so they never overlap compute; on a TimingBackend (CUDA) an op's time is
//     between two marks of the compute stream, and a copy issued on its own stream is seen only
//     through the waits that block on it;
//   * before, peak and after of instruction i are all op_peaks[i]: the executor keeps no memory
//     in use before and after each instruction, only its high water (an upper bound of both);
//   * peak is the run's measured_peak, makespan its elapsed time (it may exceed the sum of the
//     op times by the executor's own work between instructions), valid is true (the run
//     succeeded), host_peak is 0 (not measured), no violation.
// A run_result of another schedule (op_times or op_peaks not one per instruction) is refused
// (status::invalid_problem).

#include <cstddef>
#include <remat/core/result.hpp>
#include <remat/exec/executor.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/report.hpp>
#include <string>

namespace remat::exec {

/// The lane an instruction runs on, in the simulator's terms.
inline constexpr sim::lane lane_of(const instruction& i) {
  return i.op == op_kind::offload    ? sim::lane::device_to_host
         : i.op == op_kind::prefetch ? sim::lane::host_to_device
                                     : sim::lane::compute;
}

/// The measured run as a report: a timeline point per instruction (the rules at the top).
template <class T>
result<sim::report> measured_report(const schedule& s, const run_result<T>& run) {
  if (run.op_times.size() != s.ops.size() || run.op_peaks.size() != s.ops.size())
    return error{status::invalid_problem,
                 "measured_report: the run measured " + std::to_string(run.op_times.size()) +
                     " times and " + std::to_string(run.op_peaks.size()) +
                     " peaks for a schedule of " + std::to_string(s.ops.size()) +
                     " instructions; pass the schedule that was run",
                 {}};
  sim::report r;
  r.valid = true;
  r.peak = run.measured_peak;
  r.makespan = run.elapsed;
  r.timeline.reserve(s.ops.size());
  seconds t = 0;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const bytes high = run.op_peaks[i];
    r.timeline.push_back({i, t, t + run.op_times[i], high, high, high, lane_of(s.ops[i])});
    t += run.op_times[i];
  }
  return r;
}

}  // namespace remat::exec
