#pragma once
// The details the catalogue's policies put in their solutions (policy/solution.hpp), apart from
// the policies so that what only reads or writes them (io/solution_json.hpp, remat-plan's
// summary) does not compile the planners.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/multi_chain_ops.hpp>
#include <remat/schedule/notation.hpp>

namespace remat {

/// How rotor, rotor_floating (and rockmate's RK-Rotor) reached a plan.
struct chain_dp_details {
  enum class method {
    store_all,       ///< store-all fits the budget: the ideal time, optimal
    dp,              ///< the DP's optimum at `slots` (optimal when exact_sizes)
    minimum_memory,  ///< the budget is within rounding of the minimum at every affordable slot
                     ///< count: the fastest minimum-memory schedule, valid but not proven optimal
  };
  method how = method::dp;
  std::int64_t slots = 0;    ///< how == dp: the slots the DP ran at (refined from the knob's)
  bool exact_sizes = false;  ///< how == dp: one slot per byte, the plan is optimal
  friend bool operator==(const chain_dp_details&, const chain_dp_details&) = default;
};

/// The name of a method, as remat-plan's JSON writes it: store_all, dp, minimum_memory.
inline constexpr std::string_view to_string(chain_dp_details::method m) {
  switch (m) {
    case chain_dp_details::method::store_all:
      return "store_all";
    case chain_dp_details::method::dp:
      return "dp";
    case chain_dp_details::method::minimum_memory:
      return "minimum_memory";
  }
  return "unknown";
}

/// What periodic chose: the number of segments.
struct periodic_details {
  int segments = 0;
  friend bool operator==(const periodic_details&, const periodic_details&) = default;
};

/// What revolve chose: the free snapshot slots.
struct revolve_details {
  int snapshots = 0;
  friend bool operator==(const revolve_details&, const revolve_details&) = default;
};

/// What the multi-chain DP planned: the slots it planned with, Lemma 2's least, and its program
/// in the thesis' operations (schedule/multi_chain_ops.hpp).
struct multi_chain_details {
  int slots = 0;              ///< m: floor(budget / slot_bytes) less the reserved, capped
  int minimum_slots = 0;      ///< m_min [Shilova21, Lemma 2]
  std::int64_t forwards = 0;  ///< F ops, recomputations included (the DP's value)
  std::vector<multi_chain_op> ops;
  friend bool operator==(const multi_chain_details&, const multi_chain_details&) = default;
};

/// What an offloading policy's plan is made of.
struct offload_details {
  std::vector<chain_op> ops;   ///< the program in the chain notation, O_k / P_k / W_k included
  std::vector<int> offloaded;  ///< k: a_k goes to the host and back
  bytes offloaded_bytes = 0;   ///< sum of the a_k moved
  seconds model_time = 0;      ///< the DP's time in pofo's model (docs/offloading.md)
  seconds compute_time = 0;    ///< the compute ops' time, recomputations included
  seconds transfer_time = 0;   ///< both links' busy time
  seconds idle_time = 0;       ///< the compute lane waiting for transfers (program time - compute)
  machine hw;                  ///< the machine it planned for

  /// Transfer time hidden behind compute, as a fraction of the transfer time (1 without
  /// transfers).
  [[nodiscard]] double overlap() const {
    if (transfer_time <= 0) return 1.0;
    return std::clamp((transfer_time - idle_time) / transfer_time, 0.0, 1.0);
  }
};

/// One block of a rockmate plan.
struct rockmate_block {
  std::vector<int> forwards;  ///< its forward compute nodes in the graph
  int kind = 0;               ///< its kind (identical blocks share one), 0-based
  int options = 0;            ///< the options of its kind (store-all is option 0)
  int chosen = 0;             ///< the option its F^all / B run with in the plan
  int forward_runs = 0;       ///< how many times its forward runs (1: never recomputed)
};

/// What a rockmate plan is made of.
struct rockmate_details {
  std::vector<rockmate_block> blocks;
  int kinds = 0;  ///< kinds of blocks solved (each once)
  /// The sequence RK-Rotor planned: a stage per block, its options as cost sets.
  chain block_chain;
  seconds options_time = 0;  ///< making the options (the inner solves)
  /// Plans of the whole graph by the inner policy's relaxation (rockmate's whole_graph_budgets;
  /// 0 when the graph cuts into small blocks), the makespan of the fastest that fits the budget,
  /// and whether it was returned rather than RK-Rotor's plan over the blocks.
  int whole_graph_plans = 0;
  std::optional<seconds> whole_graph_time;
  bool whole_graph_chosen = false;
};

/// One cluster of a hiremate plan (the partition's, children before parents, the top last).
struct hiremate_cluster_summary {
  std::vector<int> forwards;  ///< its forward compute nodes in the graph
  int level = 1;              ///< 1: ops alone; the top's is the partition's depth
  int same_as = -1;           ///< an identical cluster planned once for both (-1: none)
  int options = 0;            ///< its options (store-all is option 0; 0 for the top)
  seconds solve_seconds = 0;  ///< its H-ILP solves (the grid's, or the top's)
  int solves = 0;             ///< its grid's H-ILP solves (0 for the top, and with same_as)
  /// Of them, those whose plan was not proven optimal (stopped at the node or time limit).
  int unproven = 0;
  /// In the top's plan, the option the top's H-ILP ran it with (-1: fast-forwarded only, or not
  /// a sub-cluster of the top).
  int chosen = -1;
};

/// What a hiremate plan is made of.
struct hiremate_details {
  std::vector<hiremate_cluster_summary> clusters;
  int levels = 0;            ///< the partition's depth
  seconds options_time = 0;  ///< making the options of every cluster below the top
  seconds top_time = 0;      ///< the top's H-ILP
  int tightened = 0;         ///< top H-ILP solves again at a lower budget (its plan, lowered,
                             ///< peaked over the budget)
  bool top_optimal = false;  ///< the top's H-ILP proved its plan optimal
  /// The top's H-ILP: the relative gap between its plan's objective and its proven bound (0 when
  /// proven optimal; infinite when it proved no bound).
  double top_gap = 0;
  /// The top's plan is its start (cheap storage patterns and a local search): the H-ILP found
  /// no faster plan that fits in its time.
  bool top_from_start = false;
  std::string over_limit;  ///< the partition's top over its size limit, and why (else empty)
};

/// One block of an offmate plan: its option, and where the parameters whose first block it is
/// live and are updated (bytes; parameters read by several blocks count at the first).
struct offmate_block_summary {
  std::string name;
  std::vector<int> forwards;       ///< its forward compute nodes in the graph
  std::string option;              ///< store-all, recompute or offload
  bytes parameter_bytes = 0;       ///< its parameters
  bytes offloaded_bytes = 0;       ///< of them, those that leave the GPU during the iteration
  bytes state_bytes = 0;           ///< their optimizer states
  bytes states_on_host_bytes = 0;  ///< of them, those on the host at some step
  bytes cpu_update_bytes = 0;      ///< trainable bytes the CPU updates (gradients sent to the host)
  bytes gpu_update_bytes = 0;      ///< trainable bytes the GPU updates
};

/// What an offmate plan is made of.
struct offmate_details {
  std::vector<offmate_block_summary> blocks;
  seconds fractional_makespan = 0;  ///< the O-ILP's plan's iteration, before whole tensors
  bytes host_peak_bytes = 0;        ///< the program's (simulated)
  int run_length = 1;               ///< blocks of the graph's cut in each block planned
  machine hw;                       ///< the machine it planned for
  /// The batch size, in units of the graph's (offmate::max_batch > 1: the one chosen; the
  /// program is then for at_batch(graph, batch)), the variant's 1/r and time per sample.
  int batch = 1;
  std::optional<double> continuous_batch;
  std::optional<seconds> time_per_sample;
};

/// The search of Mixed Mode's DP (policy/mixed_mode/dp.hpp).
enum class mixed_search : unsigned char { exact, dc, dc_ternary };

inline constexpr std::string_view to_string(mixed_search s) {
  switch (s) {
    case mixed_search::exact:
      return "exact";
    case mixed_search::dc:
      return "dc";
    case mixed_search::dc_ternary:
      return "dc_ternary";
  }
  return "?";
}

/// The modes of a segment.
enum class segment_mode : unsigned char { planned = 0, dynamic = 1 };

inline constexpr std::string_view to_string(segment_mode m) {
  return m == segment_mode::planned ? "planned" : "dynamic";
}

/// What mixed_mode chose: its segments in stage numbers, and how it searched.
struct mixed_mode_details {
  struct segment {
    int first = 0;  ///< the first stage (1-based)
    int last = 0;   ///< the last stage
    segment_mode mode = segment_mode::planned;
    bytes share = 0;       ///< its share of the budget
    seconds time = 0;      ///< its ops' predicted time
    seconds overhead = 0;  ///< what the DP added for a dynamic runtime (dtr_segments::overhead)
    friend bool operator==(const segment&, const segment&) = default;
  };
  std::vector<segment> segments;
  std::int64_t slots = 0;  ///< the shares' unit: budget / slots bytes
  mixed_search search = mixed_search::exact;
  friend bool operator==(const mixed_mode_details&, const mixed_mode_details&) = default;
};

}  // namespace remat
