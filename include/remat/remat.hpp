#pragma once
// remat: everything that needs only the standard library (and Eigen). Opt-in parts are not
// included here: <remat/io/json.hpp> and <remat/io/graph_json.hpp> (nlohmann_json), the MILP
// backends <remat/milp/lpsolve.hpp> and <remat/milp/cbc.hpp>, CUDA.

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/executor.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/host_backend.hpp>
#include <remat/exec/placement.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/exec/train.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/policy/offload.hpp>
#include <remat/policy/periodic.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/rotor_floating.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>
