#pragma once
// measured_report(schedule, run_result): what a run of the executor measured, as a sim::report,
// so that everything drawn from the simulator's reports (io/trace.hpp's Chrome traces; pictures
// of memory over time) draws measured runs too, next to the plan. The report is built from the
// run's per-instruction times and peaks alone. docs/executor.md, "Measured reports".

#include <cstddef>
#include <string>

#include <remat/core/result.hpp>
#include <remat/exec/run_result.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/report.hpp>

namespace remat::exec {

/// The lane an instruction runs on, in the simulator's terms.
inline constexpr sim::lane lane_of(const instruction& i) {
  return i.op == op_kind::offload      ? sim::lane::device_to_host
         : i.op == op_kind::prefetch   ? sim::lane::host_to_device
         : i.op == op_kind::cpu_update ? sim::lane::cpu
                                       : sim::lane::compute;
}

/// The measured run as a report: a timeline point per instruction, which starts when the one
/// before ended (the instructions ran one after the other on the host thread) and lasts its
/// op_times[i]; its memory before, at its peak and after are all op_peaks[i] (only the high water
/// is measured, an upper bound of all three). Offloads and prefetches sit on their lanes. peak is
/// the run's measured_peak, makespan its elapsed time, valid true, host_peak 0 (not measured). A
/// run_result of another schedule (not one time and peak per instruction) is refused
/// (status::invalid_problem).
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
