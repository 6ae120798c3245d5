#pragma once
// checkmate's formulation: the RK-Checkmate MILP over a training graph [Zhao24, §2.4, Eqs.
// 2.3-2.19], its extraction into a schedule (Alg. 4), the warm start and the cover cuts;
// independent of the MILP backend. Stages t = 0..T-1 over the compute nodes in topological order,
// step k of stage t = "maybe run c_k, then maybe free data"; variables R, F (runs), S
// (contributions), P (alive at a stage's start), create, del and U (memory).
//
// Memory is counted in integer units rounded down, so the MILP is a relaxation of the byte
// problem ("infeasible" is a proof); each schedule is replayed in bytes and cover cuts remove
// those over the budget. The model is built without variables its optimum does not need
// ("Reductions"), step by step (model_builder).
//
// The variables, the constraints, the reductions and the decisions: docs/checkmate.md.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/milp/model.hpp>
#include <remat/policy/checkmate/bounds.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::detail {

/// The MILP of checkmate (its `fast_forward` knob decides whether forwards get a fast variant).
struct checkmate_formulation {
  bool fast_forward = true;
  /// The budget is at most 2^memory_bits memory units (see memory_unit).
  int memory_bits = 17;
  /// Sizes and scratch rounded up to the unit rather than down: the MILP is then a restriction
  /// of the byte problem (its plans fit in bytes, its infeasibility proves nothing), as the
  /// H-ILP wants (policy/hiremate/hilp.hpp).
  bool round_up = false;
  /// The bytes the memory unit is chosen for (memory_unit's budget); 0: the budget's. One
  /// reference for every budget keeps the unit, so a plan that fits one budget fits every larger
  /// one (with round_up).
  bytes unit_reference = 0;

  /// A way to run a compute node: its time and scratch, which of its outputs it makes and which
  /// of its inputs it reads (per position in g.outputs(k), g.inputs(k)), and the instruction
  /// that runs it. On a training graph a node has its normal run, and a forward the fast-forward
  /// (no phantom) where has_fast; the model is written over variants so that a node may have
  /// others (a cluster's options in a hierarchical graph, [Zhao24, §3.4]).
  struct run_variant {
    seconds time = 0;
    bytes overhead = 0;
    std::vector<char> makes, reads;
    op_kind op = op_kind::compute;
    /// The variant runs in the node's own stage only (a hierarchical graph's sub-cluster whose
    /// option runs the graph's loss: run again, it would run the loss again).
    bool once = false;
  };

  /// (step k, a variable or the constant 1); a step that is not listed is the constant 0.
  using steps = std::vector<std::pair<int, milp::linear_expr>>;
  using keep_matrix = std::vector<std::vector<char>>;  // [t][i], t = 0..T

  struct built {
    milp::model m;
    bytes unit = 1;
    /// Seconds per unit of the objective (see time_unit).
    double time_scale = 1;
    /// Per compute node, its variants (variants_of): 0 the normal run, 1 the fast-forward.
    std::vector<std::vector<run_variant>> variants;
    /// [t][k][v], k <= t: variant v of c_k runs in stage t: a variable, or a constant (see
    /// "Reductions"); 0 where c_k cannot run in stage t.
    std::vector<std::vector<std::vector<milp::linear_expr>>> run;
    std::vector<std::vector<milp::linear_expr>> P;               // [t][i]: a variable or a constant
    std::vector<std::vector<std::vector<milp::linear_expr>>> S;  // [t][i][producer position]
    std::vector<std::vector<steps>> cre, del;                    // [t][i]
    std::vector<std::vector<milp::variable>> U;                  // [t][k]
    /// [k]: the phantom that a normal run of c_k always makes (variant 0's run is its create),
    /// or -1.
    std::vector<int> normal_makes;

    /// The variant of c_k that runs in stage t of solution s, or -1.
    [[nodiscard]] int variant_on(const milp::solution& s, int t, int k) const {
      const auto& v = run[ix(t)][ix(k)];
      for (std::size_t i = 0; i < v.size(); ++i)
        if (s.value(v[i]) > 0.5) return static_cast<int>(i);
      return -1;
    }
  };

  static const milp::linear_expr* at_step(const steps& v, int k) {
    for (const auto& [kk, x] : v)
      if (kk == k) return &x;
    return nullptr;
  }

  /// The memory unit of the model (see "Memory units" above): the gcd of every size and overhead
  /// when that leaves fewer than 2^bits units in the budget (exact), else the smallest power of
  /// two that does (sizes rounded down to it).
  static bytes memory_unit(const graph& g, bytes budget, int bits = 17) {
    const bytes u = memory_gcd(g);
    if (budget / u < (bytes{1} << bits)) return u;
    bytes coarse = 1;
    while (coarse <= (budget >> bits)) coarse *= 2;
    return coarse;
  }
  /// Bytes in model units, rounded down (exact when the unit is the gcd): the MILP is then a
  /// relaxation of the byte problem, and its schedules are checked in bytes (see "Memory units").
  static double units(bytes v, bytes unit) { return static_cast<double>(v / unit); }
  /// Rounded down, or up (round_up: the MILP is then a restriction of the byte problem).
  static double units(bytes v, bytes unit, bool up) {
    return up ? static_cast<double>((v + unit - 1) / unit) : units(v, unit);
  }
  /// The objective's unit of time: the power of two nearest below the longest op time (1 when
  /// every time is 0), so that the objective's coefficients lie in (0, 2) and dividing by it is
  /// exact. CBC aborts the process (a failed assertion in Clp) on an objective coefficient of
  /// 1e25 or more, and solvers' tolerances are absolute: in seconds, times of 1e-9 s would fall
  /// below them, times of 1e20 s above every gap.
  static double time_unit(const graph& g) {
    double longest = 0;
    for (const auto& c : g.compute_nodes()) longest = std::max({longest, c.time, c.fast_time});
    if (!(longest > 0) || !std::isfinite(longest)) return 1;
    int e = 0;
    std::frexp(longest, &e);  // longest = f * 2^e, f in [0.5, 1)
    return std::ldexp(1.0, e - 1);
  }

  /// Backwards and the loss run once, in their own stage; so does a forward with a protected
  /// output other than a phantom (a block's output in rockmate's block graphs): that output,
  /// never freed, is alive from the first run on, and a second run would make it again, which
  /// the simulator rejects (the MILP used to plan such a run to get the phantom back, and the
  /// extraction failed on it).
  static bool runs_once(const graph& g, int k) {
    if (g.compute(k).kind != compute_kind::forward) return true;
    for (int i : g.outputs(k))
      if (g.data(i).is_protected && g.data(i).kind != data_kind::phantom) return true;
    return false;
  }

  /// Whether the model gives forward k a fast-forward variable: not when it runs once, nor when
  /// its phantoms are all empty and the fast-forward is no cheaper (time and overhead), since
  /// the normal run then does the same for no more (both would only double the solutions).
  [[nodiscard]] bool has_fast(const graph& g, int k) const {
    const auto& n = g.compute(k);
    // A forward that runs once runs normally: its phantom's life is fixed (is_fixed) from then.
    if (!fast_forward || runs_once(g, k)) return false;
    bool empty = true;
    for (int i : g.outputs(k))
      if (g.data(i).kind == data_kind::phantom && g.data(i).size > 0) empty = false;
    return !(empty && n.fast_time >= n.time && n.fast_overhead >= n.overhead);
  }

  /// Each compute node's variants on a training graph: the normal run (every output, the
  /// node's time and overhead), and where has_fast the fast-forward (no phantom, its fast time
  /// and overhead); both read every input.
  [[nodiscard]] std::vector<std::vector<run_variant>> variants_of(const graph& g) const {
    std::vector<std::vector<run_variant>> out(ix(g.compute_count()));
    for (int k = 0; k < g.compute_count(); ++k) {
      const auto& n = g.compute(k);
      const std::vector<char> all_in(g.inputs(k).size(), 1), all_out(g.outputs(k).size(), 1);
      out[ix(k)].push_back({n.time, n.overhead, all_out, all_in, op_kind::compute});
      if (!has_fast(g, k)) continue;
      std::vector<char> no_phantom(all_out.size(), 1);
      for (std::size_t p = 0; p < no_phantom.size(); ++p)
        no_phantom[p] = g.data(g.outputs(k)[p]).kind != data_kind::phantom;
      out[ix(k)].push_back(
          {n.fast_time, n.fast_overhead, no_phantom, all_in, op_kind::fast_forward});
    }
    return out;
  }

  /// Data every related node of which runs once (gradients: made by backwards and the loss, read
  /// by backwards): its life is fixed (see "Reductions").
  static bool is_fixed(const graph& g, int i) {
    if (g.is_source(i)) return false;
    for (int k : g.producers(i))
      if (!runs_once(g, k)) return false;
    for (int k : g.consumers(i))
      if (!runs_once(g, k)) return false;
    return true;
  }

  using clock = std::chrono::steady_clock;

  /// The time limit as a deadline from `start` (time_point::max() when the limit is not finite).
  static clock::time_point deadline_after(clock::time_point start, double limit) {
    if (!(limit < 1e9)) return clock::time_point::max();
    return start + std::chrono::duration_cast<clock::duration>(
                       std::chrono::duration<double>(std::max(0.0, limit)));
  }
  static double seconds_left(clock::time_point deadline) {
    if (deadline == clock::time_point::max()) return std::numeric_limits<double>::infinity();
    return std::chrono::duration<double>(deadline - clock::now()).count();
  }

  /// An upper bound on the MILP's variables for this graph (R and F per step, P and S per stage
  /// and data, create and free per stage and related step), computed before building anything.
  static double variables_bound(const graph& g) {
    const double T = g.compute_count();
    double related = 0, producers = 0;
    for (int i = 0; i < g.data_count(); ++i) {
      related += static_cast<double>(g.producers(i).size() + g.consumers(i).size());
      producers += static_cast<double>(g.producers(i).size());
    }
    return T * (T + 1) + T * (g.data_count() + producers) + 2 * T * related + T * (T + 1) / 2;
  }

  /// The MILP at this budget; without objective when only feasibility matters. time_limit when
  /// the deadline passes while building (solve_detailed has refused graphs over max_variables).
  /// The steps (model_builder's members, in this order; the order the variables are made in is
  /// part of the model): which stages each op can run in, the run variables R and F, the data's
  /// P and S, their creates and frees, the transitions between steps, memory, the objective.
  [[nodiscard]] result<built> build(const graph& g, bytes budget, bool feasibility,
                                    clock::time_point deadline) const {
    return build(g, variants_of(g), {}, budget, feasibility, deadline);
  }
  /// The MILP with the nodes' variants given (one list per compute node, each variant's masks
  /// the size of the node's outputs and inputs), and groups of data of which at most one is
  /// alive at a time (a cluster's option phantoms in an H-graph, [Zhao24, Eq. 3.16]).
  [[nodiscard]] result<built> build(const graph& g, std::vector<std::vector<run_variant>> variants,
                                    const std::vector<std::vector<int>>& exclusive, bytes budget,
                                    bool feasibility, clock::time_point deadline) const {
    model_builder mb(g, budget, std::move(variants), memory_bits, round_up, unit_reference);
    const error out_of_time{status::time_limit,
                            "checkmate: the time limit passed while building the MILP of graph '" +
                                g.name + "' (" + std::to_string(g.compute_count()) +
                                " compute nodes); raise time_limit",
                            {}};
    auto past_deadline = [&] { return clock::now() > deadline; };
    mb.find_useful_stages();
    mb.add_runs();
    mb.add_data();
    if (!mb.add_creates_and_frees(past_deadline)) return out_of_time;
    mb.add_exclusive(exclusive);
    if (!mb.add_transitions(past_deadline)) return out_of_time;
    if (!mb.add_memory(past_deadline)) return out_of_time;
    mb.add_objective(feasibility);
    if (past_deadline()) return out_of_time;
    return std::move(mb.b);
  }

  /// Builds the MILP step by step (build()): the state the steps share, and one member per step.
  class model_builder {
   public:
    model_builder(const graph& g, bytes budget, std::vector<std::vector<run_variant>> variants,
                  int memory_bits, bool round_up, bytes unit_reference)
        : up_(round_up),
          g_(g),
          T(g.compute_count()),
          I(g.data_count()),
          unit_(memory_unit(g, unit_reference > 0 ? unit_reference : budget, memory_bits)),
          cap_(units(budget, unit_)) {
      b.unit = unit_;
      b.variants = std::move(variants);
    }

    built b;

    /// useful[k]: the last stage in which running c_k can help (see "Reductions").
    void find_useful_stages() {
      useful_.assign(ix(T), T - 1);
      for (int k = T - 1; k >= 0; --k) {
        if (runs_once(g_, k)) {
          useful_[ix(k)] = k;
          continue;
        }
        int u = -1;
        for (int i : g_.outputs(k)) {
          if (g_.data(i).is_protected) u = T - 1;
          for (int c : g_.consumers(i)) u = std::max(u, useful_[ix(c)]);
        }
        useful_[ix(k)] = std::max(u, k);
      }
    }

    /// The runs: constants where c_k cannot run (0), and 1 for c_t's single variant in stage t;
    /// each stage t runs c_t once, and an op at most once (in one variant) in a stage.
    void add_runs() {
      milp::model& m = b.m;
      b.run.assign(ix(T), {});
      b.normal_makes.assign(ix(T), -1);
      for (int k = 0; k < T; ++k) {
        // The phantom tied to the normal run: where the fast-forward is no dearer, a normal run
        // that makes no phantom is the fast-forward (see "Reductions").
        const auto& v = b.variants[ix(k)];
        if (v.size() != 2 || v[1].time > v[0].time || v[1].overhead > v[0].overhead) continue;
        int phantoms = 0;
        for (int i : g_.outputs(k))
          if (g_.data(i).kind == data_kind::phantom) {
            ++phantoms;
            b.normal_makes[ix(k)] = i;
          }
        if (phantoms != 1) b.normal_makes[ix(k)] = -1;
      }
      for (int t = 0; t < T; ++t) {
        b.run[ix(t)].resize(ix(t + 1));
        for (int k = 0; k <= t; ++k) {
          const std::size_t nv = b.variants[ix(k)].size();
          auto& r = b.run[ix(t)][ix(k)];
          r.assign(nv, milp::linear_expr());
          if (!can_run(t, k)) continue;
          for (std::size_t v = 0; v < nv; ++v)
            if (k == t || !b.variants[ix(k)][v].once)
              r[v] = k == t && nv == 1 ? milp::linear_expr(1.0) : milp::linear_expr(m.add_binary());
        }
      }
      for (int t = 0; t < T; ++t) {
        m.add(run(t, t) == 1);
        for (int k = 0; k < t; ++k)
          if (b.variants[ix(k)].size() > 1 && can_run(t, k)) m.add(run(t, k) <= 1);
      }
    }

    /// Per data node: its related steps, first producer, last related node and last useful
    /// stage; P[t][i] (constants for sources, fixed data, and before the first producer) and
    /// S[t][i][pos] for producer pos of i (0 when t <= producer; with one producer the
    /// contribution is there exactly when the data is alive: S is P).
    void add_data() {
      milp::model& m = b.m;
      rel_.assign(ix(I), {});
      fixed_.assign(ix(I), 0);  // data whose life the model fixes (see is_fixed)
      first_.assign(ix(I), 0);
      last_.assign(ix(I), 0);
      for (int i = 0; i < I; ++i) {
        auto& v = rel_[ix(i)];
        for (int k : g_.producers(i)) v.push_back(k);
        for (int k : g_.consumers(i)) v.push_back(k);
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
        fixed_[ix(i)] = is_fixed(g_, i) ? 1 : 0;
        if (!g_.is_source(i)) {
          first_[ix(i)] = *std::min_element(g_.producers(i).begin(), g_.producers(i).end());
          last_[ix(i)] = v.back();
        }
      }
      // dead[i]: the last stage in which a consumer of i can run (past it, i is freed).
      dead_.assign(ix(I), T);
      for (int i = 0; i < I; ++i) {
        if (g_.data(i).is_protected) continue;
        int d = -1;
        for (int c : g_.consumers(i)) d = std::max(d, useful_[ix(c)]);
        dead_[ix(i)] = d;
      }
      auto& P = b.P;
      P.assign(ix(T), std::vector<milp::linear_expr>(ix(I)));
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < I; ++i) {
          if (g_.is_source(i))
            P[ix(t)][ix(i)] = milp::linear_expr(1.0);
          else if (fixed_[ix(i)])
            P[ix(t)][ix(i)] = milp::linear_expr(fixed_alive(t, i) ? 1.0 : 0.0);
          else if (t > first_[ix(i)] && t <= dead_[ix(i)])
            P[ix(t)][ix(i)] = m.add_binary();
        }
      auto& S = b.S;
      S.assign(ix(T), {});
      for (int t = 0; t < T; ++t) {
        S[ix(t)].resize(ix(I));
        for (int i = 0; i < I; ++i) {
          const auto pr = g_.producers(i);
          S[ix(t)][ix(i)].resize(pr.size());
          for (std::size_t p = 0; p < pr.size(); ++p)
            if (pr.size() == 1)
              S[ix(t)][ix(i)][p] = P[ix(t)][ix(i)];
            else if (fixed_[ix(i)])
              S[ix(t)][ix(i)][p] = milp::linear_expr(t > pr[p] && fixed_alive(t, i) ? 1.0 : 0.0);
            else if (t > pr[p])
              S[ix(t)][ix(i)][p] = m.add_binary();
        }
      }
    }

    /// create[t][i][k] (k producer <= t) and del[t][i][k] (k related <= t, not protected), at
    /// the steps that can run; false when the deadline passed.
    template <class Past>
    bool add_creates_and_frees(const Past& past_deadline) {
      milp::model& m = b.m;
      auto& cre = b.cre;
      cre.assign(ix(T), std::vector<steps>(ix(I)));
      b.del.assign(ix(T), std::vector<steps>(ix(I)));
      for (int t = 0; t < T; ++t) {
        if (past_deadline()) return false;
        for (int i = 0; i < I; ++i) {
          for (int k : rel_[ix(i)]) {
            if (k > t) break;
            if (!can_run(t, k)) continue;
            const auto pr = g_.producers(i);
            const bool producer = std::find(pr.begin(), pr.end(), k) != pr.end();
            const bool freeable = !g_.data(i).is_protected;
            if (fixed_[ix(i)]) {  // here k == t
              if (producer && k == first_[ix(i)])
                cre[ix(t)][ix(i)].push_back({k, milp::linear_expr(1.0)});
              if (freeable && k == last_[ix(i)])
                b.del[ix(t)][ix(i)].push_back({k, milp::linear_expr(1.0)});
              continue;
            }
            if (producer && b.normal_makes[ix(k)] == i) {
              cre[ix(t)][ix(i)].push_back({k, var(t, k, 0)});  // the normal run makes the phantom
            } else if (producer) {
              milp::variable c = m.add_binary();
              m.add(milp::linear_expr(c) <= prodrun(t, k, i));
              cre[ix(t)][ix(i)].push_back({k, c});
            }
            if (freeable) {
              milp::variable d = m.add_binary();
              m.add(milp::linear_expr(d) <= run(t, k));
              b.del[ix(t)][ix(i)].push_back({k, d});
            }
          }
        }
      }
      return true;
    }

    /// At most one datum of each group alive at a stage's start, or made at its step in the
    /// stage (the group's data share their producer).
    void add_exclusive(const std::vector<std::vector<int>>& groups) {
      for (const auto& grp : groups) {
        if (grp.size() < 2) continue;
        for (int t = 0; t < T; ++t) {
          milp::linear_expr alive;
          for (int i : grp) {
            alive += b.P[ix(t)][ix(i)];
            for (const auto& [k, x] : b.cre[ix(t)][ix(i)]) alive += x;
          }
          b.m.add(alive <= 1);
        }
      }
    }

    /// Liveness, dependencies, and the S and P transitions from step to step; false when the
    /// deadline passed.
    template <class Past>
    bool add_transitions(const Past& past_deadline) {
      milp::model& m = b.m;
      auto& P = b.P;
      auto& S = b.S;
      for (int t = 0; t < T; ++t) {
        if (past_deadline()) return false;
        for (int i = 0; i < I; ++i) {
          const auto pr = g_.producers(i);
          const auto& D = b.del[ix(t)][ix(i)];
          const bool multi = pr.size() > 1;
          milp::linear_expr alive = P[ix(t)][ix(i)];
          milp::linear_expr freed_before;  // frees at steps < k
          for (int k : rel_[ix(i)]) {
            if (k > t) break;
            if (!can_run(t, k)) continue;
            const milp::linear_expr c = find(b.cre[ix(t)][ix(i)], k);
            const milp::linear_expr d = find(D, k);
            alive += c;
            const milp::linear_expr before_free = alive;
            const bool producer = std::find(pr.begin(), pr.end(), k) != pr.end();
            // No allocation of what is alive (a free comes after it), and no free of what is
            // not. With one producer, which comes before the consumers, only the producer's step
            // can allocate and the frees only lower `alive`: the rows at the other steps follow
            // from the producer's and from P[t+1] >= 0 (or the end row).
            if (multi || producer) m.add(before_free <= 1);
            alive -= d;
            if (multi) m.add(alive >= 0);  // (alive <= 1 follows from before_free <= 1)
            if (producer) {
              m.add(before_free >= prodrun(t, k, i));
              const auto p =
                  static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
              if (multi)  // never sum a contribution twice
                m.add(prodrun(t, k, i) + S[ix(t)][ix(i)][p] <= 1 + freed_before);
            } else {  // consumer
              const milp::linear_expr reads = readrun(t, k, i);
              m.add(before_free >= reads);
              // Every contribution, kept or made in the stage; with one producer it is the row
              // above (create <= the producer's run).
              for (std::size_t p = 0; p < pr.size() && multi; ++p) {
                milp::linear_expr have = S[ix(t)][ix(i)][p];
                if (pr[p] <= t) have += prodrun(t, pr[p], i);
                m.add(reads <= have);
              }
              if (multi)
                for (const auto& [kk, x] : D)
                  if (kk < k) m.add(x + reads <= 1);
            }
            freed_before += d;
          }
          if (t + 1 < T) {
            if (!g_.is_source(i)) m.add(P[ix(t + 1)][ix(i)] == alive);
            for (std::size_t p = 0; p < pr.size() && multi; ++p) {
              const int k = pr[p];
              if (k > t) continue;
              const milp::linear_expr s1 = S[ix(t + 1)][ix(i)][p];
              const milp::linear_expr s0 = S[ix(t)][ix(i)][p];
              const milp::linear_expr made = prodrun(t, k, i);
              m.add(s1 <= s0 + made);
              m.add(s1 <= P[ix(t + 1)][ix(i)]);
              milp::linear_expr late, all;
              for (const auto& [kk, x] : D) {
                all += x;
                if (kk >= k) {
                  m.add(s1 <= 1 - x);
                  late += x;
                } else {
                  m.add(s1 <= 1 - x + made);
                }
              }
              m.add(s1 >= made - late);
              m.add(s1 >= s0 - all);
            }
          } else if (!g_.is_source(i)) {
            m.add(alive == (g_.data(i).is_protected ? 1.0 : 0.0));
          }
        }
      }
      return true;
    }

    /// Memory: U[t][k], what is alive after step k of stage t, and at each step what is alive,
    /// what it makes and its op's scratch within the budget; false when the deadline passed.
    template <class Past>
    bool add_memory(const Past& past_deadline) {
      milp::model& m = b.m;
      b.U.assign(ix(T), {});
      std::vector<milp::linear_expr> made_at, gone_at;  // [k]: what step k allocates, frees
      for (int t = 0; t < T; ++t) {
        if (past_deadline()) return false;
        milp::linear_expr prev;
        for (int i = 0; i < I; ++i) prev += sz(i) * b.P[ix(t)][ix(i)];
        made_at.assign(ix(t + 1), milp::linear_expr());
        gone_at.assign(ix(t + 1), milp::linear_expr());
        for (int i = 0; i < I; ++i) {
          for (const auto& [k, x] : b.cre[ix(t)][ix(i)]) made_at[ix(k)] += sz(i) * x;
          for (const auto& [k, x] : b.del[ix(t)][ix(i)]) gone_at[ix(k)] += sz(i) * x;
        }
        for (int k = 0; k <= t; ++k) {
          if (!can_run(t, k)) {  // nothing happens at this step: U is the previous step's
            b.U[ix(t)].push_back(milp::variable{});
            continue;
          }
          const milp::linear_expr& made = made_at[ix(k)];
          const milp::linear_expr& gone = gone_at[ix(k)];
          milp::linear_expr tmp;
          const auto& vs = b.variants[ix(k)];
          for (std::size_t v = 0; v < vs.size(); ++v) tmp += amount(vs[v].overhead) * var(t, k, v);
          m.add(prev + made + tmp <= cap_);
          milp::variable u = m.add_continuous(0, milp::infinity);
          m.add(milp::linear_expr(u) == prev + made - gone);
          b.U[ix(t)].push_back(u);
          prev = u;
        }
      }
      return true;
    }

    /// The objective: the makespan, in units of time_scale seconds (none for feasibility).
    void add_objective(bool feasibility) {
      b.time_scale = time_unit(g_);
      milp::linear_expr obj;
      if (!feasibility)
        for (int t = 0; t < T; ++t)
          for (int k = 0; k <= t; ++k) {
            const auto& vs = b.variants[ix(k)];
            for (std::size_t v = 0; v < vs.size(); ++v)
              obj += vs[v].time / b.time_scale * var(t, k, v);
          }
      b.m.minimize(obj);
    }

   private:
    [[nodiscard]] bool can_run(int t, int k) const {
      return k == t || (k < t && t <= useful_[ix(k)]);
    }
    [[nodiscard]] const milp::linear_expr& var(int t, int k, std::size_t v) const {
      return b.run[ix(t)][ix(k)][v];
    }
    /// c_k runs in stage t, in any variant.
    [[nodiscard]] milp::linear_expr run(int t, int k) const {
      milp::linear_expr e;
      for (const auto& x : b.run[ix(t)][ix(k)]) e += x;
      return e;
    }
    /// c_k runs in stage t in a variant that makes output i (a phantom: only a normal run),
    /// or that reads input i.
    [[nodiscard]] milp::linear_expr prodrun(int t, int k, int i) const {
      return variants_with(t, k, i, g_.outputs(k), &run_variant::makes);
    }
    [[nodiscard]] milp::linear_expr readrun(int t, int k, int i) const {
      return variants_with(t, k, i, g_.inputs(k), &run_variant::reads);
    }
    [[nodiscard]] milp::linear_expr variants_with(int t, int k, int i, std::span<const int> of,
                                                  std::vector<char> run_variant::*mask) const {
      const auto p = static_cast<std::size_t>(std::find(of.begin(), of.end(), i) - of.begin());
      milp::linear_expr e;
      const auto& vs = b.variants[ix(k)];
      for (std::size_t v = 0; v < vs.size(); ++v)
        if ((vs[v].*mask)[p]) e += var(t, k, v);
      return e;
    }
    [[nodiscard]] double sz(int i) const { return amount(g_.data(i).size); }
    /// Bytes in model units, rounded down, or up with round_up.
    [[nodiscard]] double amount(bytes v) const { return units(v, unit_, up_); }
    /// Fixed data: alive from its first producer's step to its last related step, freed there
    /// unless protected.
    [[nodiscard]] bool fixed_alive(int t, int i) const {
      return t > first_[ix(i)] && (g_.data(i).is_protected || t <= last_[ix(i)]);
    }
    static milp::linear_expr find(const steps& v, int k) {
      const milp::linear_expr* x = at_step(v, k);
      return x ? *x : milp::linear_expr();
    }

    const bool up_;
    const graph& g_;
    const int T, I;  // compute and data nodes (the thesis' names)
    const bytes unit_;
    const double cap_;
    std::vector<int> useful_;
    std::vector<std::vector<int>> rel_;  // each data node's related (producing or reading) ops
    std::vector<char> fixed_;
    std::vector<int> first_, last_, dead_;  // first producer, last related op, last useful stage
  };

  /// What a replay tracks: which data is alive, and which contributions each holds.
  struct memory_state {
    std::vector<char> alive;
    std::vector<std::vector<char>> done;  // [i][producer position]
    /// At the start: the sources alive, nothing else.
    static memory_state initial(const graph& g) {
      memory_state m{std::vector<char>(ix(g.data_count()), 0), {}};
      m.done.resize(ix(g.data_count()));
      for (int i = 0; i < g.data_count(); ++i) {
        m.done[ix(i)].assign(g.producers(i).size(), 0);
        if (g.is_source(i)) m.alive[ix(i)] = 1;
      }
      return m;
    }
  };

  /// A step of a program over run variants: an instruction and, for a compute, its variant.
  struct run_record {
    instruction ins;
    int variant = 0;
    friend bool operator==(const run_record&, const run_record&) = default;
  };
  /// Algorithm 4 over an integral solution (extract), each run with its variant.
  [[nodiscard]] result<std::vector<run_record>> extract_runs(const graph& g, const built& b,
                                                             const milp::solution& s) const {
    auto prog = extract(g, b, s);
    if (!prog) return prog.err();
    std::vector<run_record> out;
    const int T = g.compute_count();
    std::size_t at = 0;
    for (int t = 0; t < T; ++t)
      for (int k = 0; k <= t; ++k)
        if (const int v = b.variant_on(s, t, k); v >= 0) {
          while (prog->ops[at].op == op_kind::free) out.push_back({prog->ops[at++], 0});
          out.push_back({prog->ops[at++], v});
        }
    for (; at < prog->ops.size(); ++at) out.push_back({prog->ops[at], 0});
    return out;
  }

  /// Algorithm 4 over an integral solution, replaying the state to free an alive output before
  /// its recompute.
  [[nodiscard]] result<schedule> extract(const graph& g, const built& b,
                                         const milp::solution& s) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    auto on = [&](const milp::linear_expr& e) { return s.value(e) > 0.5; };
    schedule out;
    memory_state state = memory_state::initial(g);  // not a structured binding: lambdas use it
    auto& alive = state.alive;
    auto& done = state.done;
    for (int t = 0; t < T; ++t)
      for (int k = 0; k <= t; ++k) {
        const int v = b.variant_on(s, t, k);
        if (v < 0) continue;
        const run_variant& rv = b.variants[ix(k)][ix(v)];
        const auto outs = g.outputs(k);
        for (std::size_t q = 0; q < outs.size(); ++q) {
          const int i = outs[q];
          if (!rv.makes[q]) continue;
          const auto pr = g.producers(i);
          const auto p = static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
          if (alive[ix(i)] && done[ix(i)][p]) {
            if (pr.size() > 1 || g.data(i).is_protected)
              return error{status::solver_error,
                           "checkmate: the MILP solution sums a contribution to data " +
                               std::to_string(i) + " twice (a bug in the model)",
                           {}};
            out.ops.push_back(instruction::free(i));
            alive[ix(i)] = 0;
            std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
          }
          alive[ix(i)] = 1;
          done[ix(i)][p] = 1;
        }
        out.ops.push_back({rv.op, k});
        out.predicted_time += rv.time;
        for (int i = 0; i < I; ++i)
          for (const auto& [kk, x] : b.del[ix(t)][ix(i)])
            if (kk == k && on(x)) {
              out.ops.push_back(instruction::free(i));
              alive[ix(i)] = 0;
              std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
            }
      }
    return out;
  }

  /// The MILP's values for a schedule (see "Warm start" above); invalid_problem when the
  /// schedule does not follow the stage model. A fast-forward is the node's variant 1.
  [[nodiscard]] result<std::vector<double>> start_values(const graph& g, const built& b,
                                                         const schedule& s) const {
    std::vector<run_record> runs;
    runs.reserve(s.ops.size());
    for (const auto& ins : s.ops) {
      int v = 0;
      if (ins.op == op_kind::fast_forward && ins.node >= 0 && ins.node < g.compute_count()) {
        if (b.variants[ix(ins.node)].size() > 1)
          v = 1;
        else if (!fast_forward)
          return error{status::invalid_problem,
                       "checkmate: the warm start does not fit Checkmate's stage model: '" +
                           g.compute(ins.node).name + "' (c" + std::to_string(ins.node) +
                           ") runs as a fast-forward but fast_forward is off",
                       {}};
        // else no fast variant (see has_fast): the normal run, which also makes its empty
        // phantoms
      }
      runs.push_back({ins, v});
    }
    return start_values(g, b, runs);
  }

  /// The MILP's values for a program of runs, each with its variant (b.variants); invalid_problem
  /// when the program does not follow the stage model or breaks one of the MILP's rows (over
  /// the budget in the model's units, two phantoms of an exclusive group alive).
  [[nodiscard]] result<std::vector<double>> start_values(const graph& g, const built& b,
                                                         std::span<const run_record> s) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    auto bad = [&](const std::string& why) {
      return error{status::invalid_problem,
                   "checkmate: the warm start does not fit Checkmate's stage model: " + why +
                       " (stage t runs some of c_0..c_t, each once and in index order, and ends "
                       "with the first run of c_t)",
                   {}};
    };
    auto cname = [&](int c) { return "'" + g.compute(c).name + "' (c" + std::to_string(c) + ")"; };
    // mode[t][k]: the variant run plus one (0 idle); frees[t][k]: data freed after step (t,k).
    std::vector<std::vector<int>> mode(ix(T));
    std::vector<std::vector<std::vector<int>>> frees(ix(T));
    for (int t = 0; t < T; ++t) {
      mode[ix(t)].assign(ix(t + 1), 0);
      frees[ix(t)].resize(ix(t + 1));
    }
    std::vector<std::pair<int, int>> last_rel(ix(I), {-1, -1});  // (t, k)
    int next = 0;     // the first compute node not run yet: the current stage
    int last_k = -1;  // the last step run in the current stage
    for (const auto& [ins, variant] : s) {
      if (ins.op == op_kind::free) {
        if (ins.node < 0 || ins.node >= I)
          return bad("it frees data " + std::to_string(ins.node) + ", not in the graph");
        const auto [t, k] = last_rel[ix(ins.node)];
        if (t < 0)
          return bad("data " + std::to_string(ins.node) +
                     " is freed before any step that reads or makes it");
        frees[ix(t)][ix(k)].push_back(ins.node);
        continue;
      }
      const int k = ins.node;
      if (k < 0 || k >= T)
        return bad("it runs compute node " + std::to_string(k) + ", not in the graph");
      if (variant < 0 || variant >= static_cast<int>(b.variants[ix(k)].size()))
        return bad(cname(k) + " runs in variant " + std::to_string(variant) + " of " +
                   std::to_string(b.variants[ix(k)].size()));
      if (next >= T) return bad(cname(k) + " runs after the last stage");
      const int t = next;
      if (k > t) return bad(cname(k) + " runs for the first time before " + cname(t));
      if (k <= last_k)
        return bad(cname(k) + " runs in stage " + std::to_string(t) + " after " + cname(last_k));
      mode[ix(t)][ix(k)] = variant + 1;
      for (int i : g.inputs(k)) last_rel[ix(i)] = {t, k};
      for (int i : g.outputs(k)) last_rel[ix(i)] = {t, k};
      last_k = k;
      if (k == t) {
        ++next;
        last_k = -1;
      }
    }
    if (next < T) return bad(cname(next) + " never runs");

    std::vector<double> x(b.m.num_variables(), 0.0);
    auto set = [&](const milp::linear_expr& e, double v) -> bool {
      if (e.terms.empty()) return std::abs(e.constant - v) < 0.5;
      x[e.terms.front().index] = v;
      return true;
    };
    memory_state state = memory_state::initial(g);  // not a structured binding: lambdas use it
    auto& alive = state.alive;
    auto& done = state.done;
    auto sz = [&](int i) { return units(g.data(i).size, b.unit, round_up); };
    for (int t = 0; t < T; ++t) {
      double mem = 0;
      for (int i = 0; i < I; ++i) {
        if (!set(b.P[ix(t)][ix(i)], alive[ix(i)]))
          return bad("data " + std::to_string(i) + " is alive where the model cannot hold it");
        for (std::size_t p = 0; p < done[ix(i)].size(); ++p)
          set(b.S[ix(t)][ix(i)][p], done[ix(i)][p]);
        if (alive[ix(i)]) mem += sz(i);
      }
      for (int k = 0; k <= t; ++k) {
        int v = mode[ix(t)][ix(k)] - 1;
        const auto& r = b.run[ix(t)][ix(k)];
        if (v == 0 && r.size() > 1 && b.normal_makes[ix(k)] >= 0 &&
            alive[ix(b.normal_makes[ix(k)])])
          v = 1;  // makes no phantom: the model's fast-forward (as fast, as small)
        if (v >= 0 && !set(r[ix(v)], 1))
          return bad(cname(k) + " runs where it cannot (backwards and the loss run once)");
        if (v >= 0) {
          const auto outs = g.outputs(k);
          for (std::size_t q = 0; q < outs.size(); ++q) {
            const int i = outs[q];
            if (!b.variants[ix(k)][ix(v)].makes[q]) continue;
            const auto pr = g.producers(i);
            const auto p =
                static_cast<std::size_t>(std::find(pr.begin(), pr.end(), k) - pr.begin());
            if (!alive[ix(i)]) {
              if (const auto* c = at_step(b.cre[ix(t)][ix(i)], k)) set(*c, 1);
              alive[ix(i)] = 1;
              mem += sz(i);
            }
            done[ix(i)][p] = 1;
          }
        }
        for (int i : frees[ix(t)][ix(k)]) {
          const auto* d = at_step(b.del[ix(t)][ix(i)], k);
          if (d == nullptr || !alive[ix(i)] || !set(*d, 1))
            return bad("data " + std::to_string(i) + " is freed where the model cannot free it");
          alive[ix(i)] = 0;
          std::fill(done[ix(i)].begin(), done[ix(i)].end(), 0);
          mem -= sz(i);
        }
        if (const auto u = b.U[ix(t)][ix(k)]; u.index != milp::variable::none) x[u.index] = mem;
      }
    }
    if (b.m.max_violation(x) > 1e-6) {
      for (std::size_t c = 0; c < b.m.num_constraints(); ++c)
        if (b.m.constraints()[c].violation(x) > 1e-6)
          return bad("it breaks the MILP's constraint #" + std::to_string(c));
      return bad("a variable is out of its bounds");
    }
    return x;
  }

  /// Cover cuts for the steps of an integral solution whose memory, in bytes, exceeds the
  /// budget (the MILP let them through by its tolerance): at such a step (t, k), a smallest set
  /// C of the data alive there (before the step's frees), largest first, with the op's scratch,
  /// that exceeds the budget on its own cannot be alive together again at that step:
  ///   sum_{i in C} alive(t, k, i) [+ the run variable of the op's variant] <= |C| [+ 1] - 1.
  /// Every schedule within the budget satisfies it; it cuts off every solution with that
  /// configuration, whatever its other variables (a no-good cut of the whole point cut off one
  /// at a time, and the MILP has many points that differ only where it does not matter).
  [[nodiscard]] std::vector<milp::constraint> cover_cuts(const graph& g, const built& b,
                                                         const milp::solution& s,
                                                         bytes budget) const {
    const int T = g.compute_count();
    const int I = g.data_count();
    auto on = [&](const milp::linear_expr& e) { return s.value(e) > 0.5 ? 1 : 0; };
    std::vector<milp::constraint> out;
    std::vector<int> alive(ix(I));
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < I; ++i) alive[ix(i)] = on(b.P[ix(t)][ix(i)]);
      for (int k = 0; k <= t; ++k) {
        for (int i = 0; i < I; ++i)
          if (const auto* c = at_step(b.cre[ix(t)][ix(i)], k)) alive[ix(i)] += on(*c);
        if (const int v = b.variant_on(s, t, k); v >= 0) {
          const bytes scratch = b.variants[ix(k)][ix(v)].overhead;
          std::vector<std::pair<bytes, int>> items;  // (size, data; -1: the op's scratch)
          bytes mem = scratch;
          if (scratch > 0) items.push_back({scratch, -1});
          for (int i = 0; i < I; ++i)
            if (alive[ix(i)] > 0 && g.data(i).size > 0) {
              mem += g.data(i).size;
              items.push_back({g.data(i).size, i});
            }
          if (mem > budget) {
            std::sort(items.begin(), items.end(), std::greater<>());
            milp::linear_expr lhs;
            bytes sum = 0;
            double count = 0;
            for (const auto& [size, i] : items) {
              if (i < 0) {
                lhs += b.run[ix(t)][ix(k)][ix(v)];
              } else {
                lhs += b.P[ix(t)][ix(i)];
                for (const auto& [kk, x] : b.cre[ix(t)][ix(i)])
                  if (kk <= k) lhs += x;
                for (const auto& [kk, x] : b.del[ix(t)][ix(i)])
                  if (kk < k) lhs -= x;
              }
              sum += size;
              count += 1;
              if (sum > budget) break;
            }
            out.push_back(lhs <= count - 1);
          }
        }
        for (int i = 0; i < I; ++i)
          if (const auto* d = at_step(b.del[ix(t)][ix(i)], k)) alive[ix(i)] -= on(*d);
      }
    }
    return out;
  }

  /// The no-good cut of an integral point: sum over the binaries at 1 of (1 - x) plus sum over
  /// those at 0 of x >= 1 (every other 0-1 point satisfies it; the model's integers are all
  /// binaries).
  static milp::constraint no_good(const milp::model& m, const std::vector<double>& x) {
    milp::linear_expr cut;
    double ones = 0;
    const auto vars = m.variables();
    for (std::size_t j = 0; j < vars.size(); ++j) {
      if (vars[j].type == milp::var_type::continuous) continue;
      if (x[j] > 0.5) {
        cut -= milp::linear_expr(milp::variable{j});
        ones += 1;
      } else {
        cut += milp::linear_expr(milp::variable{j});
      }
    }
    return cut >= 1 - ones;
  }
};

}  // namespace remat::detail
