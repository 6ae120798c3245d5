// remat-plan's options: the table of them, what each accepts, which policies take which (from
// the catalogue: the knobs each policy has), and the help, whose policy lists are generated.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <remat/policy/multi_chain.hpp>

#include "args.hpp"
#include "policies.hpp"
#include "remat_plan.hpp"

namespace remat_plan {

remat::machine options::machine_from(remat::machine base) const {
  if (bandwidth) {
    base.device_to_host = bandwidth->value;
    base.host_to_device = bandwidth->value;
  }
  if (bandwidth_d2h) base.device_to_host = bandwidth_d2h->value;
  if (bandwidth_h2d) base.host_to_device = bandwidth_h2d->value;
  if (host_memory) base.host_memory = *host_memory;
  return base;
}

namespace {

/// "a, b and c".
std::string listed(const std::vector<std::string_view>& names, std::string_view last = " and ") {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? std::string(last) : ", ") + std::string(names[i]);
  return s;
}

/// "a | b | c".
std::string joined(const std::vector<std::string_view>& names, std::string_view sep) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += (i ? std::string(sep) : "") + std::string(names[i]);
  return s;
}

/// The names of every policy (and auto), in the catalogue's order.
std::vector<std::string_view> policy_names() {
  std::vector<std::string_view> v(policies<naming_milp>::names.begin(),
                                  policies<naming_milp>::names.end());
  v.push_back(auto_policy);
  return v;
}

/// The pipeline policies' names (policy/pipeline_catalogue.hpp).
std::vector<std::string_view> pipeline_policy_names() {
  const auto& n = remat::pipeline_policies<naming_milp>::names;
  return {n.begin(), n.end()};
}

bool is_pipeline_policy(std::string_view name) {
  const auto n = pipeline_policy_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

bool plans_graphs(std::string_view name) {
  if (name == auto_policy) return true;
  bool graph = false;
  remat::with_policy<remat::graph_policies<naming_milp>>(name, [&](auto) { graph = true; });
  return graph;
}

/// The graph policies' names ("store_all, checkmate or rockmate").
std::string graph_policy_names(std::string_view last = " or ") {
  const auto& n = remat::graph_policies<naming_milp>::names;
  return listed(std::vector<std::string_view>(n.begin(), n.end()), last);
}

/// The options that apply to --policy `name` (auto: its portfolio on a chain or a graph).
std::vector<std::string_view> options_of(std::string_view name, bool graph) {
  std::vector<std::string_view> v;
  options dummy;
  dummy.policy = std::string(name);
  dummy.solver = has_solver ? std::string(solvers_built().front()) : std::string();
  with_policy(dummy, graph,
              [&]<class P>(std::type_identity<P>) { v = remat_plan::options_of<P>(); });
  return v;
}

/// The policies that take `option`, for the help and the messages.
std::vector<std::string_view> takers(std::string_view option) {
  std::vector<std::string_view> v;
  remat::for_each_policy<policies<naming_milp>>([&]<class P>(std::type_identity<P>) {
    const auto opts = remat_plan::options_of<P>();
    if (std::find(opts.begin(), opts.end(), option) != opts.end()) v.push_back(P::name);
  });
  return v;
}

/// Each policy that has a knob `field` with its default, e.g. "rotor 500, pofo 50".
template <class Get>
std::string defaults_of(std::string_view option, Get get) {
  std::vector<std::string> v;
  remat::for_each_policy<policies<naming_milp>>([&]<class P>(std::type_identity<P>) {
    const auto opts = remat_plan::options_of<P>();
    if (std::find(opts.begin(), opts.end(), option) != opts.end())
      if (auto d = get(P{})) v.push_back(std::string(P::name) + " " + *d);
  });
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

/// Wraps `text` at 88 columns with the help's indentation (24 spaces after the first line).
std::string wrapped(std::string_view head, const std::string& text) {
  std::string out = "  " + std::string(head);
  std::size_t col = out.size();
  if (col < 24) {
    out += std::string(24 - col, ' ');
    col = 24;
  } else {
    out += "\n" + std::string(24, ' ');
    col = 24;
  }
  std::istringstream words(text);
  std::string w;
  bool first = true;
  while (words >> w) {
    if (!first && col + 1 + w.size() > 88) {
      out += "\n" + std::string(24, ' ');
      col = 24;
      first = true;
    }
    if (!first) {
      out += ' ';
      ++col;
    }
    out += w;
    col += w.size();
    first = false;
  }
  return out + "\n";
}

}  // namespace

std::string help_text() {
  std::string h =
      R"(usage: remat-plan (--chain FILE | --graph FILE) --budget BYTES --policy NAME [options]
       remat-plan (--chain FILE | --graph FILE) --policy NAME --find-minimum [options]
       remat-plan (--chain FILE | --graph FILE) --budget BYTES --simulate PROGRAM
                  [--bandwidth BYTES_PER_S] [--json]
       remat-plan --chain FILE --sweep [--budgets N] [--bandwidth BYTES_PER_S]
                  [--svg FILE] [--json]
       remat-plan --multi-chain FILE --budget BYTES --policy multi_chain
                  [--time-limit SECONDS] [--json]
       remat-plan --chain FILE --processors P --policy pipedream|madpipe
                  [--memory BYTES] [--bandwidth BYTES_PER_S] [--copies C] [--json]

Plans a chain's or a graph's training (a JSON chain profile or forward DAG, see
docs/json-format.md) within a memory budget, re-simulates the schedule, and prints
the plan. Chain plans are written in the chain notation (F<l>_none, F<l>_ck,
F<l>_all, B<l>, O<k>, P<k>, W<k>), graph plans (checkmate's, and every plan of
--graph) as programs over the training graph (C<c>, C<c>_ff, D<d>, O<d>, P<d>,
W<d>, 0-based node indices).

required:
  --chain FILE          the chain profile (JSON), or
  --graph FILE          the forward DAG (JSON) of a network that is not a chain, or
  --multi-chain FILE    K homogeneous chains joined at one loss (JSON; Siamese,
                        two-tower), planned by --policy multi_chain only
  --budget BYTES        memory budget for the activations: plain bytes, or a number
                        with a suffix KiB, MiB, GiB, TiB (also K, M, G, T), e.g.
                        6GiB, 512MiB, 1.5GiB
)";
  std::vector<std::string_view> chains, graphs;
  for (std::string_view n : policy_names()) {
    if (n == auto_policy) continue;
    chains.push_back(n);
    if (plans_graphs(n)) graphs.push_back(n);
  }
  h += wrapped("--policy NAME", "chains: " + joined(chains, " | ") +
                                    "; graphs: " + joined(graphs, " | ") +
                                    " (graph policies plan a chain through its training graph); "
                                    "or auto: every policy for the problem's kind, the fastest "
                                    "plan (a portfolio, best_of; on a graph its time limit is 60 s "
                                    "unless --time-limit says otherwise)");
  h += "\npolicies:\n";
  remat::for_each_policy<policies<naming_milp>>(
      [&]<class P>(std::type_identity<P>) { h += wrapped(P::name, std::string(P::summary)); });
  h += wrapped(auto_policy, std::string(remat::best_of<remat::store_all>::summary));
  h += "\npolicy knobs (each for the policies named):\n";
  auto knob = [&](std::string_view head, std::string_view option, const std::string& what) {
    h += wrapped(head, listed(takers(option)) + ": " + what);
  };
  knob("--slots N", "--slots",
       "memory slots of the DP (0 = one per byte, exact); defaults: " +
           defaults_of("--slots", [](const auto& p) -> std::optional<std::string> {
             if constexpr (requires { p.slots; })
               return std::to_string(p.slots);
             else
               return std::nullopt;
           }));
  knob("--tolerance F", "--tolerance",
       "the relative gap to the optimum at exact sizes that a plan at slots may have: while the "
       "DP with sizes rounded down (a lower bound) is further below, the slots are refined "
       "(default 0.01; the summary and --json's bound give the gap reached)");
  knob("--segments K", "--segments", "number of segments (default 0 = the best that fits)");
  knob("--snapshots C", "--snapshots", "free snapshot slots (default -1 = the best that fits)");
  knob("--time-limit SECONDS", "--time-limit",
       "wall-clock limit of the solve (kept within a small margin); checkmate returns the best "
       "schedule found by then (not proven optimal) or fails if it found none, the others fail "
       "with \"time limit\"; auto: the whole portfolio's");
  h += wrapped("--solver NAME", listed(takers("--solver")) +
                                    ": the MILP solver, cbc | lpsolve (default: cbc when this "
                                    "build has it, else lpsolve)");
  knob("--find-minimum", "--find-minimum",
       "with --budget, when no schedule fits, find the smallest budget that has one (several "
       "MILP solves); without --budget, see \"the smallest budget\" below");
  knob("--no-portfolio", "--no-portfolio",
       "return its DP's own plan (by default pofo also plans rotor, DYNPROG and autocapper and "
       "returns the fastest program)");
  knob("--relax", "--relax",
       "solve the LP relaxation and round it (Checkmate's two-phase rounding) instead of the "
       "exact MILP; for large graphs, not optimal");
  knob("--grid P,S", "--grid",
       "the budget grid of each block's solves, P peak budgets and S saved-memory budgets per "
       "peak (default 10,10; hiremate's clusters 4,6)");
  knob("--cluster-limits L,T", "--cluster-limits",
       "the most nodes of a cluster below the top (L) and of the top (T) of hiremate's partition, "
       "a sub-cluster counting 2 (default 20,30): smaller plans faster, larger nearer the exact "
       "MILP");
  knob("--threads N", "--threads", "threads for the solves (0: all cores)");
  knob("--bandwidth BYTES_PER_S", "--bandwidth",
       "the machine's link between device and host, each way, in bytes per second: a number "
       "(e.g. 12e9) or one with a suffix KiB, MiB, GiB, TiB, optionally \"/s\" (e.g. 12GiB/s); "
       "0 = no link (no transfers: pofo is then rotor), inf = instantaneous copies; default 12e9 "
       "(PCIe 3 x16)");
  h += wrapped("--bandwidth-d2h BYTES_PER_S, --bandwidth-h2d BYTES_PER_S",
               "the same, for offloads (device to host) or prefetches (host to device) alone, "
               "when they differ");
  knob("--host-memory BYTES", "--host-memory",
       "the host memory the plan may fill (offloaded parameters, optimizer states, gradients "
       "and activations), e.g. 128GiB; default unlimited");
  {
    // Each taker's heuristics (named by policy when several policies take --heuristic).
    std::vector<std::string> choices;
    const auto who = takers("--heuristic");
    remat::for_each_policy<policies<naming_milp>>([&]<class P>(std::type_identity<P>) {
      if (const auto names = heuristics_of<P>(); !names.empty())
        choices.push_back((who.size() > 1 ? std::string(P::name) + ": " : std::string()) +
                          joined(names, " | ") + " (default " + std::string(names.front()) + ")");
    });
    std::string listed_choices;
    for (const auto& c : choices) listed_choices += (listed_choices.empty() ? "" : "; ") + c;
    knob("--heuristic NAME", "--heuristic",
         "the score that picks the tensor to evict when an op does not fit: " + listed_choices +
             " (docs/dtr.md)");
  }
  knob("--max-batch N", "--max-batch",
       "choose the batch size too, from 1 to N times the graph's (OFFMATE's batch-size variant; "
       "the plan is for the graph at the batch chosen, which the output gives); default 1: the "
       "graph's batch");
  knob("--search NAME", "--search",
       "how mixed_mode's DP searches: exact (default), dc (divide and conquer, assuming the "
       "quadrangle inequality) or dc_ternary (also a ternary search over the memory split); the "
       "accelerated ones may miss the optimum");
  knob("--dynamic-overhead SECONDS", "--dynamic-overhead",
       "the time the dynamic runtime adds to each op it runs (dispatch, bookkeeping), which "
       "mixed_mode weighs against planned segments (default 0; not in the predicted time)");
  h += R"(
the smallest budget (instead of --budget):
  --find-minimum        with --policy and no --budget: print the smallest budget the
                        policy plans the problem with (its minimum_budget, or the
                        minimum its solve reports; checkmate bisects with MILP
                        solves), after planning at it. --json prints {"status",
                        "policy", "minimum_budget_bytes", "store_all_peak_bytes",
                        "makespan", "peak_bytes", ...}

replaying a program (instead of --policy):
  --simulate PROGRAM    replay PROGRAM in the simulator within the budget and print
                        whether it is valid, its peak, its makespan and the first
                        violation. PROGRAM is the text of a program, or @FILE to read
                        it from FILE: with --chain, the chain notation ("F1_ck F2_all
                        B2 F1_all B1", told apart by its F and B words) or a program
                        over the chain's training graph ("C0 C1_ff D2 ..."); with
                        --graph, a program. --json prints {"status": "ok" |
                        "invalid_schedule", "valid", "peak_bytes", "makespan",
                        "violation" (a string or null), "budget_bytes", ...}
  --bandwidth BYTES_PER_S
                        with --simulate: the speed of offloads and prefetches (O, P),
                        each way, as above (0: no link, a program that transfers is
                        then invalid); default: instantaneous transfers.
                        --bandwidth-d2h and --bandwidth-h2d set the offloads' and the
                        prefetches' apart

every policy at many budgets (instead of --policy and --budget):
  --sweep               plan the chain with every chain policy (those of "chains"
                        above; rotor_floating up to 24 stages) at evenly spaced budgets
                        from 90% of the smallest that rotor or pofo plans with up to
                        store-all's peak, simulate every plan and print the time
                        overhead over store-all of each (- : no plan at that budget).
                        The graph policies are not swept (a MILP per budget): plan them
                        one budget at a time. --json prints {"status", "chain",
                        "store_all_time", "store_all_peak_bytes", "bandwidth_d2h",
                        "bandwidth_h2d", "budgets", "policies", "points": [{"policy",
                        "budget_bytes", "status", "peak_bytes", "makespan", "overhead",
                        "message"}], "notes"}
  --budgets N           with --sweep: how many budgets (default 12, 2 to 200)
  --bandwidth BYTES_PER_S
                        with --sweep: the offloading policies' link each way
                        (default 12e9; 0 leaves them out)
  --time-limit SECONDS  with --sweep: each solve's limit

a pipeline on several processors (docs/pipeline.md):
  --processors P        plan the chain's training on P processors, mini-batches in
                        a pipeline, with --policy pipedream or madpipe; the chain's
                        weight_bytes count --copies times on the processor that
                        holds a layer. The plan is replayed by the pipeline
                        simulator; it prints the period per mini-batch, the stages
                        (layers, processor, activations in flight, whether the
                        stage recomputes), each processor's peak and the periodic
                        pattern. --json prints {"status", "policy", "chain",
                        "processors", "memory_bytes", "bandwidth", "copies",
                        "period", "pattern_period", "k", "predicted_period",
                        "scheduler", "planning_seconds", "sequential_time",
                        "stages": [{"first", "last", "processor",
                        "concurrent_activations", "recompute"}], "peak_bytes",
                        "pattern": [{"op", "stage", "start", "shift"}]}
  --memory BYTES        each processor's memory (weights, activations, buffers),
                        e.g. 8GiB; default unlimited. Too small for any plan: the
                        error says the smallest that has one
  --bandwidth BYTES_PER_S
                        with --processors: every link between two processors (> 0;
                        inf: free transfers); default inf
  --copies C            copies of the weights each processor keeps (weights,
                        gradients, optimizer state; default 3)
  --time-limit SECONDS  with --processors: the whole solve's limit (madpipe)

output:
  --json                print one JSON object instead of the summary
  --svg FILE            write a picture (SVG): with --sweep, the budget -> overhead
                        curve of every policy; otherwise the device memory over
                        time of the plan (or --simulate's program) against the
                        budget, transfers on a band of their own
  --trace FILE          also write the plan's timeline (with --simulate: the
                        replay's, up to a violation) as a Chrome trace to FILE:
                        open it in ui.perfetto.dev or chrome://tracing (lanes
                        compute, device->host, host->device; device memory and
                        the budget as counters)
  --progress            report the solve's progress on stderr even when stdout or
                        stderr is not a terminal (a line per step on a log); by
                        default a line that overwrites itself is shown while a
                        solve runs when both are terminals: elapsed time and the
                        DP's percent, checkmate's best makespan, bound and gap,
                        rockmate's kinds of blocks and block solves done, auto's
                        member running
  --quiet               no progress display at all
  -h, --help            print this help and exit

Options also take the form --option=VALUE.
exit status: 0 planned (with --simulate: the program is valid); 1 planning failed
(budget too small, time limit, invalid chain, ...) or, with --simulate, the
program is invalid (over the budget, a broken rule, a word that is not an
instruction); the reason is on stderr; 2 usage error.
)";
  return h;
}

namespace {

/// The bandwidth options given, with their names.
std::vector<std::pair<const std::optional<bandwidth_arg>*, std::string_view>> bandwidths(
    const options& o) {
  return {{&o.bandwidth, "--bandwidth"},
          {&o.bandwidth_d2h, "--bandwidth-d2h"},
          {&o.bandwidth_h2d, "--bandwidth-h2d"}};
}

/// A link of less than a byte per second: copies of large tensors would not end in a finite
/// makespan.
std::optional<usage_error> check_rates(const options& o) {
  for (const auto& [arg, name] : bandwidths(o)) {
    if (!*arg) continue;
    const double v = (*arg)->value;
    if (v > 0 && v < 1)
      return usage_error{std::string(name) + " '" + (*arg)->text +
                         "' is below 1 byte per second; give 0 (no link), a number >= 1 (e.g. "
                         "12e9 or 12GiB/s) or inf (instantaneous copies)"};
  }
  return std::nullopt;
}

/// The knobs of one policy that were given (the options named), in the order of --help.
std::vector<std::string_view> knobs_given(const options& o) {
  std::vector<std::string_view> given;
  for (const auto& [is, opt] :
       {std::pair{o.slots.has_value(), "--slots"},
        std::pair{o.tolerance.has_value(), "--tolerance"}, std::pair{!o.solver.empty(), "--solver"},
        std::pair{o.relax, "--relax"}, std::pair{o.no_portfolio, "--no-portfolio"},
        std::pair{o.find_minimum, "--find-minimum"},
        std::pair{o.segments.has_value(), "--segments"},
        std::pair{o.snapshots.has_value(), "--snapshots"}, std::pair{o.grid.has_value(), "--grid"},
        std::pair{o.cluster_limits.has_value(), "--cluster-limits"},
        std::pair{o.threads.has_value(), "--threads"},
        std::pair{o.host_memory.has_value(), "--host-memory"},
        std::pair{o.max_batch.has_value(), "--max-batch"},
        std::pair{o.search.has_value(), "--search"},
        std::pair{o.dynamic_overhead.has_value(), "--dynamic-overhead"},
        std::pair{o.heuristic.has_value(), "--heuristic"},
        std::pair{o.processors.has_value(), "--processors"},
        std::pair{o.memory.has_value(), "--memory"}, std::pair{o.copies.has_value(), "--copies"}})
    if (is) given.push_back(opt);
  return given;
}

/// --sweep's options: a chain, no single policy or budget; --bandwidth (one rate, both ways),
/// --time-limit, --budgets, --svg, --json apply.
std::variant<options, usage_error> check_sweep(const options& o) {
  if (!o.graph_path.empty())
    return usage_error{
        "--sweep plans chains (the chain policies at many budgets); give --chain FILE. For "
        "--graph, plan one budget at a time with --policy " +
        graph_policy_names()};
  if (!o.policy.empty())
    return usage_error{"--sweep plans with every chain policy: give --sweep or --policy, not both"};
  if (o.simulate) return usage_error{"give --sweep or --simulate, not both"};
  if (o.trace)
    return usage_error{
        "--trace writes one plan's timeline; --sweep plans many: give --svg FILE for its curve"};
  if (!o.budget_text.empty())
    return usage_error{
        "--sweep chooses its budgets (from below the smallest that plans to store-all's peak); "
        "drop --budget, and give --budgets N for how many"};
  auto knobs = knobs_given(o);
  for (const auto& [given, opt] : {std::pair{o.progress, "--progress"},
                                   std::pair{o.bandwidth_d2h.has_value(), "--bandwidth-d2h"},
                                   std::pair{o.bandwidth_h2d.has_value(), "--bandwidth-h2d"}})
    if (given) knobs.push_back(opt);
  if (!knobs.empty())
    return usage_error{
        std::string(knobs.front()) +
        " applies to one --policy, not to --sweep (which plans every chain policy with its "
        "defaults; --bandwidth, --time-limit, --budgets, --svg and --json apply)"};
  if (auto e = check_rates(o)) return *e;
  return o;
}

/// --multi-chain's options: --policy multi_chain, --budget; --time-limit and --json apply.
std::variant<options, usage_error> check_multi_chain(const options& o) {
  if (o.sweep || o.simulate)
    return usage_error{std::string(o.sweep ? "--sweep" : "--simulate") +
                       " works on --chain or --graph; --multi-chain plans with --policy "
                       "multi_chain at one --budget"};
  if (o.policy.empty())
    return usage_error{"missing --policy multi_chain (the one policy of --multi-chain)"};
  if (o.policy != remat::multi_chain_dp::name)
    return usage_error{"--policy " + o.policy +
                       " plans a chain or a graph; --multi-chain is planned by --policy "
                       "multi_chain only"};
  if (o.budget_text.empty())
    return usage_error{
        "missing --budget BYTES (e.g. 64MiB); with too small a budget the "
        "error says the minimum"};
  auto knobs = knobs_given(o);
  for (const auto& [arg, name] : bandwidths(o))
    if (*arg) knobs.push_back(name);
  for (const auto& [given, opt] :
       {std::pair{o.trace.has_value(), "--trace"}, std::pair{!o.svg.empty(), "--svg"},
        std::pair{o.progress, "--progress"}})
    if (given) knobs.push_back(opt);
  if (!knobs.empty())
    return usage_error{std::string(knobs.front()) +
                       " does not apply to --multi-chain (--policy multi_chain takes "
                       "--time-limit; --json and --quiet apply)"};
  return o;
}

/// A pipeline's options (--processors): --chain, a pipeline --policy, --memory, --bandwidth,
/// --copies; --time-limit, --solver, --progress, --json and --quiet apply.
std::variant<options, usage_error> check_pipeline(const options& o) {
  const std::string policies = listed(pipeline_policy_names(), " or ");
  if (o.chain_path.empty())
    return usage_error{
        "--processors plans a chain's pipeline: give --chain FILE (a graph: make "
        "it a chain first, docs/pipeline.md)"};
  if (o.policy.empty()) return usage_error{"missing --policy " + policies + " (with --processors)"};
  if (!is_pipeline_policy(o.policy))
    return usage_error{"--policy " + o.policy +
                       " plans one device; with --processors use --policy " + policies};
  if (o.sweep || o.simulate || o.find_minimum)
    return usage_error{std::string(o.sweep      ? "--sweep"
                                   : o.simulate ? "--simulate"
                                                : "--find-minimum") +
                       " does not apply to a pipeline (--processors); a memory too small for any "
                       "plan is reported with the smallest that has one"};
  if (!o.budget_text.empty())
    return usage_error{
        "--budget is one device's; a pipeline takes --memory BYTES, each "
        "processor's"};
  auto knobs = knobs_given(o);
  for (const auto& [arg, name] : bandwidths(o))
    if (*arg && std::string_view(name) != "--bandwidth") knobs.push_back(name);
  for (const auto& [given, opt] :
       {std::pair{o.trace.has_value(), "--trace"}, std::pair{!o.svg.empty(), "--svg"},
        std::pair{o.host_memory.has_value(), "--host-memory"}})
    if (given) knobs.push_back(opt);
  knobs.erase(std::remove_if(knobs.begin(), knobs.end(),
                             [](std::string_view k) {
                               return k == "--solver" || k == "--processors" || k == "--memory" ||
                                      k == "--copies";
                             }),
              knobs.end());
  if (!knobs.empty())
    return usage_error{std::string(knobs.front()) +
                       " does not apply to a pipeline (--processors takes --memory, --bandwidth, "
                       "--copies, --time-limit, --solver, --progress, --json and --quiet)"};
  if (o.bandwidth && !(o.bandwidth->value > 0))
    return usage_error{"--bandwidth '" + o.bandwidth->text +
                       "': a pipeline's links need a bandwidth > 0 bytes per second (e.g. 12e9, "
                       "12GiB/s, or inf for free transfers)"};
  if (!o.solver.empty() && !with_solver(o.solver, [](auto) {}))
    return usage_error{"this remat-plan was built without " + o.solver + "; use --solver " +
                       listed(solvers_built(), " or ")};
  return o;
}

/// The options of a plan (or --find-minimum) against what the policy takes.
std::optional<usage_error> check_policy(options& o) {
  const bool graph = !o.graph_path.empty();
  if (graph && !plans_graphs(o.policy))
    return usage_error{o.policy + " plans chains only; for --graph use --policy " +
                       graph_policy_names()};
  const auto takes = options_of(o.policy, graph);
  auto applies = [&](std::string_view opt) {
    return std::find(takes.begin(), takes.end(), opt) != takes.end();
  };
  std::vector<std::string_view> given = knobs_given(o);
  if (o.time_limit) given.insert(given.begin(), "--time-limit");
  for (const auto& [arg, name] : bandwidths(o))
    if (*arg) given.push_back(name);
  for (std::string_view opt : given) {
    if (applies(opt)) continue;
    if (opt == "--find-minimum" && o.finds_minimum()) continue;  // the command
    if (opt.substr(0, 11) == "--bandwidth")
      return usage_error{std::string(opt) +
                         " applies to --simulate and to the policies that plan "
                         "transfers (" +
                         listed(takers("--bandwidth")) + ") only, not to --policy " + o.policy};
    const auto who = takers(opt);
    return usage_error{std::string(opt) + " applies to " + listed(who) + " only, not to --policy " +
                       o.policy};
  }
  if (auto e = check_rates(o)) return *e;
  if (o.heuristic) {
    std::vector<std::string_view> names;
    with_policy(o, graph, [&]<class P>(std::type_identity<P>) { names = heuristics_of<P>(); });
    if (std::find(names.begin(), names.end(), *o.heuristic) == names.end())
      return usage_error{"--heuristic '" + *o.heuristic + "' is not a heuristic of --policy " +
                         o.policy + "; it takes " + listed(names, " or ")};
  }
  if (applies("--solver")) {
    const auto built = solvers_built();
    if (built.empty())
      return usage_error{o.policy +
                         " needs a MILP solver and this remat-plan was built without one (install "
                         "coinor-libcbc-dev or liblpsolve55-dev and rebuild)"};
    if (o.solver.empty()) o.solver = std::string(built.front());
    if (std::find(built.begin(), built.end(), o.solver) == built.end())
      return usage_error{"this remat-plan was built without " + o.solver + "; use --solver " +
                         std::string(built.front())};
  }
  return std::nullopt;
}

}  // namespace

std::variant<options, usage_error> parse_args(int argc, char** argv) {
  options o;
  using remat_cli::parse_int;
  auto flag = [](std::string_view name, bool& target) {
    return remat_cli::option{name, false, {}, [&target](const std::string&) {
                               target = true;
                               return std::optional<std::string>();
                             }};
  };
  auto not_a = [](std::string_view name, std::string_view what) {
    return [name, what](const std::string& v) {
      return std::string(name) + " '" + v + "' is not " + std::string(what);
    };
  };
  // "A,B": two integers separated by a comma (--grid, --cluster-limits).
  auto int_pair = [](std::string_view v) -> std::optional<std::pair<int, int>> {
    const auto comma = v.find(',');
    if (comma == std::string_view::npos) return std::nullopt;
    const auto a = parse_int<int>(v.substr(0, comma));
    const auto b = parse_int<int>(v.substr(comma + 1));
    if (!a || !b) return std::nullopt;
    return std::pair{*a, *b};
  };
  auto bandwidth = [](std::string_view name, std::optional<bandwidth_arg>& target) {
    return remat_cli::option{name, true, {}, [name, &target](const std::string& v) {
                               std::string why;
                               const auto b = remat_cli::parse_bandwidth(v, why);
                               if (!b) return std::optional(std::string(name) + " " + why);
                               target = bandwidth_arg{*b, v};
                               return std::optional<std::string>();
                             }};
  };
  const std::vector<remat_cli::option> table = {
      {"--chain",
       true,
       {},
       [&](const std::string& v) -> std::optional<std::string> {
         if (v.empty()) return "--chain needs a file name";
         o.chain_path = v;
         return std::nullopt;
       }},
      {"--graph",
       true,
       {},
       [&](const std::string& v) -> std::optional<std::string> {
         if (v.empty()) return "--graph needs a file name";
         o.graph_path = v;
         return std::nullopt;
       }},
      {"--multi-chain",
       true,
       {},
       [&](const std::string& v) -> std::optional<std::string> {
         if (v.empty()) return "--multi-chain needs a file name";
         o.multi_chain_path = v;
         return std::nullopt;
       }},
      {"--budget",
       true,
       {},
       [&](const std::string& v) -> std::optional<std::string> {
         std::string why;
         const auto b = remat_cli::parse_bytes(v, why);
         if (!b) return "--budget " + why;
         o.budget_text = v;
         o.budget = *b;
         return std::nullopt;
       }},
      {"--host-memory",
       true,
       {},
       [&](const std::string& v) -> std::optional<std::string> {
         std::string why;
         const auto b = remat_cli::parse_bytes(v, why);
         if (!b) return "--host-memory " + why;
         o.host_memory = *b;
         return std::nullopt;
       }},
      {"--policy",
       true,
       {},
       [&](const std::string& v) -> std::optional<std::string> {
         const auto names = policy_names();
         if (v == remat::multi_chain_dp::name || is_pipeline_policy(v)) {
           o.policy = v;
           return std::nullopt;
         }
         if (std::find(names.begin(), names.end(), v) == names.end()) {
           const auto guess = remat::closest_name(v, names);
           return "unknown policy '" + v + "'" +
                  (guess ? " (did you mean " + std::string(*guess) + "?)" : std::string()) +
                  "; the policies are " + listed(names, ", ");
         }
         o.policy = v;
         return std::nullopt;
       }},
      {"--processors",
       true,
       {},
       [&, bad = not_a("--processors", "an integer >= 1 (the pipeline's processors)")](
           const std::string& v) -> std::optional<std::string> {
         const auto n = parse_int<int>(v);
         if (!n || *n < 1) return bad(v);
         o.processors = *n;
         return std::nullopt;
       }},
      {"--memory",
       true,
       {},
       [&](const std::string& v) -> std::optional<std::string> {
         std::string why;
         const auto b = remat_cli::parse_bytes(v, why);
         if (!b) return "--memory " + why;
         o.memory = *b;
         return std::nullopt;
       }},
      {"--copies",
       true,
       {},
       [&, bad = not_a("--copies",
                       "an integer from 1 to 1024 (3: weights, gradients, optimizer "
                       "state)")](const std::string& v) -> std::optional<std::string> {
         const auto n = parse_int<int>(v);
         if (!n || *n < 1 || *n > 1024) return bad(v);
         o.copies = *n;
         return std::nullopt;
       }},
      {"--slots",
       true,
       {},
       [&, bad = not_a("--slots", "an integer >= 0 (0 = exact)")](
           const std::string& v) -> std::optional<std::string> {
         const auto n = parse_int<std::int64_t>(v);
         if (!n || *n < 0) return bad(v);
         o.slots = *n;
         return std::nullopt;
       }},
      {"--tolerance",
       true,
       {},
       [&, bad = not_a("--tolerance", "a number >= 0 (e.g. 0.01 for 1 %)")](
           const std::string& v) -> std::optional<std::string> {
         const auto x = remat_cli::parse_double(v);
         if (!x || !(*x >= 0) || !std::isfinite(*x)) return bad(v);
         o.tolerance = *x;
         return std::nullopt;
       }},
      {"--segments",
       true,
       {},
       [&, bad = not_a("--segments", "an integer >= 0 (0 = the best that fits)")](
           const std::string& v) -> std::optional<std::string> {
         const auto n = parse_int<int>(v);
         if (!n || *n < 0) return bad(v);
         o.segments = *n;
         return std::nullopt;
       }},
      {"--snapshots",
       true,
       {},
       [&, bad = not_a("--snapshots", "an integer >= -1 (-1 = the best that fits)")](
           const std::string& v) -> std::optional<std::string> {
         const auto n = parse_int<int>(v);
         if (!n || *n < -1) return bad(v);
         o.snapshots = *n;
         return std::nullopt;
       }},
      {"--search",
       true,
       {},
       [&](const std::string& v) -> std::
                                     optional<std::string> {
                                       for (auto s :
                                            {remat::mixed_search::exact, remat::mixed_search::dc,
                                             remat::mixed_search::dc_ternary})
                                         if (v == remat::to_string(s)) {
                                           o.search = s;
                                           return std::nullopt;
                                         }
                                       return "unknown search '" + v +
                                              "'; the searches are exact, dc and dc_ternary";
                                     }},
      {"--dynamic-overhead",
       true,
       {},
       [&, bad = not_a("--dynamic-overhead", "a number of seconds >= 0")](
           const std::string& v) -> std::optional<std::string> {
         const auto t = remat_cli::parse_double(v);
         if (!t || !std::isfinite(*t) || *t < 0) return bad(v);
         o.dynamic_overhead = *t;
         return std::nullopt;
       }},
      {"--time-limit",
       true,
       {},
       [&, bad = not_a("--time-limit", "a number of seconds > 0")](
           const std::string& v) -> std::optional<std::string> {
         const auto t = remat_cli::parse_double(v);
         if (!t || !std::isfinite(*t) || *t <= 0) return bad(v);
         o.time_limit = *t;
         return std::nullopt;
       }},
      {"--solver",
       true,
       {},
       [&](const std::string& v) -> std::
                                     optional<std::string> {
                                       if (v != "cbc" && v != "lpsolve")
                                         return "unknown solver '" + v +
                                                "'; the solvers are cbc and lpsolve";
                                       o.solver = v;
                                       return std::nullopt;
                                     }},
      {"--simulate",
       true,
       {},
       [&](const std::string& v) -> std::
                                     optional<std::string> {
                                       if (v.empty() || v == "@")
                                         return "--simulate needs a program: its text (e.g. "
                                                "\"F1_ck F2_all B2 F1_all B1\") or "
                                                "@FILE";
                                       o.simulate = v;
                                       return std::nullopt;
                                     }},
      bandwidth("--bandwidth", o.bandwidth),
      bandwidth("--bandwidth-d2h", o.bandwidth_d2h),
      bandwidth("--bandwidth-h2d", o.bandwidth_h2d),
      {"--grid",
       true,
       {},
       [&, bad = not_a("--grid", "two integers from 1 to 1000 separated by a comma (e.g. 10,10)")](
           const std::string& v) -> std::optional<std::string> {
         const auto pq = int_pair(v);
         if (!pq || pq->first < 1 || pq->second < 1 || pq->first > 1000 || pq->second > 1000)
           return bad(v);
         o.grid = *pq;
         return std::nullopt;
       }},
      {"--cluster-limits",
       true,
       {},
       [&, bad = not_a("--cluster-limits",
                       "two integers L,T with 2 <= L <= T <= 100000 (e.g. 20,30)")](
           const std::string& v) -> std::optional<std::string> {
         const auto lt = int_pair(v);
         if (!lt || lt->first < 2 || lt->second < lt->first || lt->second > 100000) return bad(v);
         o.cluster_limits = *lt;
         return std::nullopt;
       }},
      {"--max-batch",
       true,
       {},
       [&, bad = not_a("--max-batch", "an integer from 1 to 1024")](
           const std::string& v) -> std::optional<std::string> {
         const auto n = parse_int<int>(v);
         if (!n || *n < 1 || *n > 1024) return bad(v);
         o.max_batch = *n;
         return std::nullopt;
       }},
      {"--heuristic",
       true,
       {},
       [&](const std::string& v)
           -> std::
               optional<std::string> {
                 if (v.empty()) return "--heuristic needs a name (remat-plan --help lists them)";
                 o.heuristic = v;
                 return std::nullopt;
               }},
      {"--threads",
       true,
       {},
       [&, bad = not_a("--threads", "an integer from 0 to 1024 (0 = all cores)")](
           const std::string& v) -> std::optional<std::string> {
         const auto n = parse_int<int>(v);
         if (!n || *n < 0 || *n > 1024) return bad(v);
         o.threads = *n;
         return std::nullopt;
       }},
      {"--trace",
       true,
       {},
       [&](const std::string& v) -> std::
                                     optional<std::string> {
                                       if (v.empty())
                                         return "--trace needs a file name (e.g. plan.json)";
                                       o.trace = v;
                                       return std::nullopt;
                                     }},
      {"--svg",
       true,
       {},
       [&](const std::string& v) -> std::
                                     optional<std::string> {
                                       if (v.empty())
                                         return "--svg needs a file name (e.g. plan.svg)";
                                       if (auto why = remat_cli::unwritable(v))
                                         return "--svg: " + *why;
                                       o.svg = v;
                                       return std::nullopt;
                                     }},
      {"--budgets",
       true,
       {},
       [&, bad = not_a("--budgets", "an integer from 2 to 200")](
           const std::string& v) -> std::optional<std::string> {
         const auto n = parse_int<int>(v);
         if (!n || *n < 2 || *n > 200) return bad(v);
         o.budgets = *n;
         return std::nullopt;
       }},
      flag("--help", o.help),
      flag("--json", o.json),
      flag("--progress", o.progress),
      flag("--quiet", o.quiet),
      flag("--relax", o.relax),
      flag("--no-portfolio", o.no_portfolio),
      flag("--find-minimum", o.find_minimum),
      flag("--sweep", o.sweep),
  };
  std::vector<std::string_view> args(argv + 1, argv + argc);
  for (auto& a : args)
    if (a == "-h") a = "--help";
  if (auto why = remat_cli::parse_options(args, table, "remat-plan",
                                          "every argument is an option (run 'remat-plan --help')"))
    return usage_error{*why};
  if (o.help) return o;
  if (o.progress && o.quiet) return usage_error{"give --progress or --quiet, not both"};
  if (o.chain_path.empty() && o.graph_path.empty() && o.multi_chain_path.empty())
    return usage_error{
        "missing --chain FILE (a chain profile, JSON), --graph FILE (a forward DAG, JSON) or "
        "--multi-chain FILE (chains joined at a loss, JSON)"};
  if (!o.chain_path.empty() + !o.graph_path.empty() + !o.multi_chain_path.empty() > 1)
    return usage_error{"give --chain, --graph or --multi-chain, not both"};
  if (!o.multi_chain_path.empty()) return check_multi_chain(o);
  if (o.processors) return check_pipeline(o);
  if (is_pipeline_policy(o.policy))
    return usage_error{"--policy " + o.policy +
                       " plans a pipeline: give --processors P (and "
                       "--memory BYTES, --bandwidth BYTES_PER_S; docs/pipeline.md)"};
  if (o.memory || o.copies)
    return usage_error{std::string(o.memory ? "--memory" : "--copies") +
                       " applies to a pipeline (--processors); one device takes --budget"};
  if (o.policy == remat::multi_chain_dp::name)
    return usage_error{
        "--policy multi_chain plans chains joined at a loss: give --multi-chain "
        "FILE (docs/multi-chain.md)"};
  if (o.sweep) return check_sweep(o);
  if (o.budgets)
    return usage_error{"--budgets applies to --sweep only (how many budgets it plans at)"};
  if (o.simulate) {
    if (o.budget_text.empty()) return usage_error{"missing --budget BYTES (e.g. 6GiB)"};
    if (!o.policy.empty())
      return usage_error{
          "--simulate replays a program and plans nothing: give --simulate or --policy, not both"};
    auto knobs = knobs_given(o);
    if (o.time_limit) knobs.insert(knobs.begin(), "--time-limit");
    if (!knobs.empty())
      return usage_error{std::string(knobs.front()) +
                         " applies to planning (--policy) only, not to --simulate"};
    if (auto e = check_rates(o)) return *e;
    return o;
  }
  if (o.budget_text.empty() && !o.find_minimum)
    return usage_error{"missing --budget BYTES (e.g. 6GiB), or --find-minimum for the smallest"};
  if (o.policy.empty())
    return usage_error{"missing --policy NAME (or --simulate PROGRAM); the policies are " +
                       listed(policy_names(), ", ")};
  if (o.finds_minimum() && (o.trace || !o.svg.empty()))
    return usage_error{
        "--find-minimum without --budget prints the smallest budget; give --budget for a plan "
        "to draw (--trace, --svg)"};
  if (auto e = check_policy(o)) return *e;
  return o;
}

}  // namespace remat_plan
