#pragma once
// What the simulator reports (sim::simulate, sim/simulate.hpp) and what a measured run is turned
// into (exec::measured_report, exec/measured.hpp): validity, makespan, peaks and the timeline, one
// memory point per instruction. Apart from simulate.hpp so that the readers of a report (the SVG
// and trace writers) need neither the simulator nor the problem types.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <remat/core/units.hpp>

namespace remat::sim {

enum class violation_kind {
  invalid_graph,        ///< validate(graph) failed (op 0)
  unknown_node,         ///< an index that is not in the graph
  invalid_instruction,  ///< a fast-forward of a node that is not a forward
  missing_input,        ///< an input is not alive
  incomplete_input,     ///< an input gradient lacks some of its contributions
  already_present,      ///< the node's contribution to an output is already in memory
  not_in_memory,        ///< free of a data node that is not alive
  protected_free,       ///< free of a protected data node
  loss_repeated,        ///< the loss run a second time
  backward_repeated,    ///< a backward run a second time
  not_resident,         ///< a compute op uses a tensor that is offloaded or in transfer
  invalid_transfer,     ///< an offload, prefetch or wait that cannot be (twice, of nothing, ...)
  over_budget,
  over_host_memory,   ///< offloaded data beyond the machine's host memory
  wrong_final_state,  ///< a compute node never ran, or data is left alive or on the host
};

struct violation {
  violation_kind kind = violation_kind::missing_input;
  std::size_t op = 0;  ///< index of the offending instruction (ops.size() for the final state)
  std::string message;
};

/// Where an instruction runs: compute (compute ops, frees, and waits, which block it), a
/// transfer lane, or the CPU (a parameter's optimizer step on the host).
enum class lane : unsigned char { compute, device_to_host, host_to_device, cpu };

/// One instruction's effect on device memory. For a transfer, start and end are those of the
/// copy on its lane, and the memory is the device memory when it is issued (before), the highest
/// until the next instruction (peak) and after it (after); its own effect may come later.
struct memory_point {
  std::size_t op = 0;
  seconds start = 0;
  seconds end = 0;
  bytes before = 0;  ///< stored data when the op starts
  bytes peak = 0;    ///< stored data + output + overhead while it runs
  bytes after = 0;   ///< stored data when it ends
  sim::lane lane = lane::compute;
};

struct report {
  bool valid = false;  ///< no violation at all, budget included
  seconds makespan = 0;
  bytes peak = 0;                      ///< device memory
  bytes host_peak = 0;                 ///< host memory held by offloaded data
  std::vector<memory_point> timeline;  ///< one point per instruction
  std::optional<violation> first_violation;
};

}  // namespace remat::sim
