#pragma once
// remat: the planning core, which needs only the standard library: the cost model (chains,
// graphs, blocks), schedules and their notation, the simulator, and the chain policies of the
// catalogue (policy/catalogue.hpp: store_all, periodic, revolve, rotor, rotor_floating, pofo and
// the offloading baselines) with best_of, the portfolio. Opt-in parts have
// their own headers, so that a file that only plans does not compile them:
//   <remat/exec.hpp>             the executor, host_backend, placement and the profiler
//   <remat/policy/checkmate.hpp>, <remat/policy/rockmate.hpp> with a MILP backend
//   (<remat/policy/graph_catalogue.hpp>: the graph policies' list),
//   <remat/milp/cbc.hpp> (CBC) or <remat/milp/lpsolve.hpp> (lp_solve)
//   <remat/io/json.hpp>, <remat/io/graph_json.hpp>   (nlohmann_json)
//   <remat/zoo/gpt2.hpp>, <remat/zoo/resnet.hpp>     (example graphs)
//   <remat/exec/cuda/...>                            (CUDA)
// bench/compile_cost.sh measures what each public header costs a user's file to compile, and the
// test compile_cost.umbrella_lines keeps this header's preprocessed size under a ceiling
// (docs/design.md, "Compile time").

#include <remat/core/machine.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/policy/best_of.hpp>
#include <remat/policy/catalogue.hpp>
#include <remat/policy/concepts.hpp>
#include <remat/policy/mixed_mode.hpp>
#include <remat/policy/offload.hpp>
#include <remat/policy/periodic.hpp>
#include <remat/policy/revolve.hpp>
#include <remat/policy/rotor.hpp>
#include <remat/policy/rotor_floating.hpp>
#include <remat/policy/solution.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/block.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>
