#pragma once
// What the pipeline planners (pipedream.hpp, madpipe.hpp) return: the plan, the simulator's
// report of it, the planning time, and what the planner predicted on the way (its DP's period,
// MadPipe's target period T-hat, the scheduler that made the plan). docs/pipeline.md.

#include <optional>
#include <string>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/schedule/pipeline.hpp>
#include <remat/sim/pipeline.hpp>

namespace remat {

struct pipeline_solution {
  pipeline_plan plan;            ///< replayed by sim::simulate_pipeline: `report`
  sim::pipeline_report report;   ///< valid, its period the plan's, every peak within M
  seconds planning_seconds = 0;  ///< wall-clock time of the whole solve
  /// The period the partitioning DP predicted (PipeDream: the max of the stage works and
  /// transfers; MadPipe: its DP's T at the chosen T-hat), before scheduling.
  seconds predicted_period = 0;
  /// MadPipe: the target period T-hat of the chosen allocation (0 for PipeDream).
  seconds target_period = 0;
  /// The scheduler that made the plan: "1F1B*" (Alg. 7) or "modulo" (any allocation).
  std::string scheduler;
  int dp_runs = 0;  ///< how many times the partitioning DP ran (searches over M or T-hat)
  /// MadPipe's phase 2: the ILP's proven lower bound on the period of 1-periodic plans of these
  /// stages (any allocation), when it ran.
  std::optional<seconds> period_bound;
  /// What the user should know: phases skipped or stopped, fallbacks.
  std::vector<std::string> notes;
};

}  // namespace remat
