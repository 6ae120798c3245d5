#pragma once
// The pipeline policies remat ships, declared once, for a MILP backend M (MadPipe's phase 2; the
// backend's header is not included here): pipedream, PipeDream's partitioning with 1F1B*, and
// madpipe. remat-plan's --policy choices with --processors, its dispatch and help come from this
// list. A pipeline policy has a `name`, a `summary` and `solve(const pipeline_problem&)`
// returning result<pipeline_solution>. docs/pipeline.md.

#include <remat/milp/model.hpp>
#include <remat/policy/catalogue.hpp>
#include <remat/policy/madpipe.hpp>
#include <remat/policy/pipedream.hpp>

namespace remat {

/// Every pipeline policy, for the MILP backend M.
template <milp::MilpBackend M>
using pipeline_policies = policy_list<pipedream<>, madpipe<M>>;

}  // namespace remat
