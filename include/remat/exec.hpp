#pragma once
// remat's execution part: the executor (exec/executor.hpp), which trains the user's layers by a
// plan, the counting host_backend, the memory placement of a plan, the profiler that measures
// the layers into a chain or a forward DAG, and managed_training, which runs the programs that
// manage the parameters too (OFFMATE plans) with Adam. The planning core (<remat/remat.hpp>) does
// not include it; include both to profile, plan and train.

#include <remat/exec/adam.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/executor.hpp>
#include <remat/exec/host_backend.hpp>
#include <remat/exec/managed_training.hpp>
#include <remat/exec/measured.hpp>
#include <remat/exec/placement.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/exec/train.hpp>
