#pragma once
// Dynamic Tensor Rematerialization [DTR21] replayed on a training graph: the graph's ops run in
// their order (store-all's), each datum freed after its last reader; when an op's allocation
// would pass the budget, the resident activation with the smallest score of the heuristic is
// evicted (freed), and an evicted input is remade when an op needs it, by running its producer
// again (recursively, its own evicted inputs first). The decisions are written as an ordinary
// program, which the simulator then checks like any plan. One engine takes the decisions
// (detail::dtr_engine) for the policy and for the executor's dynamic mode, which runs each
// decision as it is taken and tells the engine the sizes of the tensors as they are made. The
// heuristics (h_DTR, size, LRU, or one of them by name) and the decisions where the graph's model
// differs from the paper's: docs/dtr.md.

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// What a heuristic sees of a resident activation it may evict.
struct dtr_candidate {
  seconds cost = 0;          ///< its producer's time (a fast-forward's where that remakes it)
  seconds neighborhood = 0;  ///< the producers' times of its evicted neighborhood e*(t)
  bytes size = 0;
  double staleness = 1;  ///< ops run since it was last read or made, plus one
};

/// DTR's heuristic h_DTR [DTR21]: (c(t) + c(e*(t))) / (m(t) s(t)), the smallest evicted first.
struct h_dtr {
  static constexpr std::string_view name = "h_dtr";
  [[nodiscard]] double operator()(const dtr_candidate& c) const {
    return (c.cost + c.neighborhood) / (static_cast<double>(c.size) * c.staleness);
  }
};
/// The largest first (a baseline of [DTR21]).
struct h_size {
  static constexpr std::string_view name = "size";
  [[nodiscard]] double operator()(const dtr_candidate& c) const {
    return 1 / static_cast<double>(c.size);
  }
};
/// The least recently used first (a baseline of [DTR21]).
struct h_lru {
  static constexpr std::string_view name = "lru";
  [[nodiscard]] double operator()(const dtr_candidate& c) const { return 1 / c.staleness; }
};

/// The heuristics remat ships, in the order dtr_heuristic lists them.
using dtr_heuristics = std::tuple<h_dtr, h_size, h_lru>;

/// One of dtr_heuristics, chosen at run time (by type, or by name: remat-plan's --heuristic);
/// h_dtr unless set. Its score is the chosen heuristic's.
class dtr_heuristic {
  static constexpr std::size_t count = std::tuple_size_v<dtr_heuristics>;
  template <class H, std::size_t... I>
  static constexpr std::size_t index_of(std::index_sequence<I...>) {
    return ((std::is_same_v<H, std::tuple_element_t<I, dtr_heuristics>> ? I : 0) + ...);
  }

 public:
  constexpr dtr_heuristic() = default;
  template <class H>
  requires(std::is_same_v<H, h_dtr> || std::is_same_v<H, h_size> ||
           std::is_same_v<H, h_lru>) constexpr dtr_heuristic(H /*unused*/)  // NOLINT: implicit, a
                                                                            // heuristic is one
      : which_(index_of<H>(std::make_index_sequence<count>{})) {}

  /// The names, in the order of dtr_heuristics: h_dtr, size, lru.
  [[nodiscard]] static std::vector<std::string_view> names() {
    return std::apply([](auto... h) { return std::vector<std::string_view>{decltype(h)::name...}; },
                      dtr_heuristics{});
  }
  /// The heuristic called `name`, or none.
  [[nodiscard]] static std::optional<dtr_heuristic> named(std::string_view name) {
    const auto all = names();
    for (std::size_t i = 0; i < all.size(); ++i)
      if (all[i] == name) {
        dtr_heuristic h;
        h.which_ = i;
        return h;
      }
    return std::nullopt;
  }
  [[nodiscard]] std::string_view name() const { return names()[which_]; }
  [[nodiscard]] double operator()(const dtr_candidate& c) const {
    return with([&](const auto& h) { return h(c); });
  }
  friend constexpr bool operator==(dtr_heuristic, dtr_heuristic) = default;

 private:
  /// f(the chosen heuristic).
  template <class F>
  [[nodiscard]] double with(F&& f) const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      double r = 0;
      ((which_ == I ? (void)(r = f(std::tuple_element_t<I, dtr_heuristics>{})) : void()), ...);
      return r;
    }
    (std::make_index_sequence<count>{});
  }
  std::size_t which_ = 0;
};

/// A heuristic's name: the static `name` of h_dtr, h_size, h_lru; dtr_heuristic's name().
template <class H>
[[nodiscard]] std::string_view heuristic_name(const H& h) {
  if constexpr (requires { h.name(); })
    return h.name();
  else
    return H::name;
}

namespace detail {

/// DTR's decisions on g within `budget` with heuristic H: the graph's ops in their order, each
/// once, every decision (a compute, a fast-forward, a free) handed to `emit` as it is taken. The
/// sizes are the graph's until resize() corrects them: the executor's dynamic mode tells it the
/// size of every tensor an op makes, so that it evicts by the memory the run really holds. `who`
/// begins its messages ("dtr", "executor (dynamic)").
template <class H>
class dtr_engine {
 public:
  dtr_engine(const graph& g, bytes budget, const H& heuristic, std::string who = "dtr")
      : g_(g),
        budget_(budget),
        heuristic_(heuristic),
        who_(std::move(who)),
        size_(ix(g.data_count())),
        remakeable_(ix(g.data_count()), 0),
        last_(ix(g.data_count()), -1),
        alive_(ix(g.data_count()), 0),
        evicted_(ix(g.data_count()), 0),
        locked_(ix(g.data_count()), 0),
        seen_(ix(g.data_count()), 0),
        touched_(ix(g.data_count()), 0) {
    for (int d = 0; d < g.data_count(); ++d) size_[ix(d)] = g.data(d).size;
  }

  /// Runs every op of the graph in its order, its evicted inputs remade first; emit(instruction)
  /// runs each decision (or writes it down), and may correct the sizes of what it made (resize)
  /// before it returns. Error: budget_too_small where an op, with every activation it does not
  /// need evicted, still does not fit (the message names the op and what it needs; the error's
  /// minimum is what it needs, a lower bound), invalid_problem for an activation with several
  /// producers (not a training graph's).
  template <class Emit>
  result<void> run(Emit&& emit) {
    if (auto ok = classify(); !ok) return ok;
    for (int d = 0; d < g_.data_count(); ++d)
      if (g_.is_source(d)) {
        alive_[ix(d)] = 1;
        mem_ += size_[ix(d)];
      }
    for (step_ = 0; step_ < g_.compute_count(); ++step_) {
      if (auto r = remake_inputs_and_run(step_, false, emit); !r) return r;
      // What no later op reads is freed: k's inputs and outputs read last here, and what was
      // remade only to remake others (the sources stay: they remake everything).
      for (int d = 0; d < g_.data_count(); ++d) {
        if (wanted(d) || g_.is_source(d)) continue;
        if (alive_[ix(d)]) free_data(d, emit);
        evicted_[ix(d)] = 0;
      }
    }
    return {};
  }

  /// d is `real` bytes from now on (the tensor an op made); a resident d's bytes change in the
  /// count.
  void resize(int d, bytes real) {
    if (alive_[ix(d)]) mem_ += real - size_[ix(d)];
    size_[ix(d)] = real;
  }
  /// The ops' times summed over the decisions so far (a fast-forward at its own time).
  [[nodiscard]] seconds time() const { return time_; }

 private:
  static std::size_t ix(int i) { return static_cast<std::size_t>(i); }

  /// Which activations can be remade: made by a forward none of whose outputs is protected (a
  /// protected output is never freed, so its forward cannot run again); and each datum's last
  /// reader in the graph's order (its last producer if none reads it).
  result<void> classify() {
    for (int d = 0; d < g_.data_count(); ++d) {
      for (int c : g_.consumers(d)) last_[ix(d)] = std::max(last_[ix(d)], c);
      if (last_[ix(d)] < 0)
        for (int c : g_.producers(d)) last_[ix(d)] = std::max(last_[ix(d)], c);
      if (g_.is_source(d) || g_.data(d).is_protected) continue;
      const auto pr = g_.producers(d);
      if (g_.compute(pr.front()).kind != compute_kind::forward) continue;
      const auto outs = g_.outputs(pr.front());
      if (std::ranges::any_of(outs, [&](int x) { return g_.data(x).is_protected; })) continue;
      if (pr.size() > 1)
        return error{status::invalid_problem,
                     who_ + ": data '" + g_.data(d).name +
                         "' is made by several forwards; DTR remakes an activation by running its "
                         "one producer again",
                     {}};
      remakeable_[ix(d)] = 1;
    }
    return {};
  }

  template <class Emit>
  void free_data(int d, Emit& emit) {
    alive_[ix(d)] = 0;
    mem_ -= size_[ix(d)];
    emit(instruction::free(d));
  }
  /// Whether a datum is still wanted: read by an op after the current one, or protected.
  bool wanted(int d) const { return g_.data(d).is_protected || last_[ix(d)] > step_; }

  /// e*(d): the evicted data reached from d through producers' inputs and forward consumers'
  /// outputs, over evicted data only; the sum of their producers' times.
  seconds neighborhood(int d) {
    seconds sum = 0;
    stack_.assign(1, d);
    visited_.assign(1, d);
    seen_[ix(d)] = 1;
    while (!stack_.empty()) {
      const int x = stack_.back();
      stack_.pop_back();
      auto reach = [&](int y) {
        if (seen_[ix(y)] || !evicted_[ix(y)]) return;
        seen_[ix(y)] = 1;
        visited_.push_back(y);
        sum += g_.compute(g_.producers(y).front()).time;
        stack_.push_back(y);
      };
      if (remakeable_[ix(x)])
        for (int y : g_.inputs(g_.producers(x).front())) reach(y);
      for (int k : g_.consumers(x))
        if (g_.compute(k).kind == compute_kind::forward)
          for (int y : g_.outputs(k)) reach(y);
    }
    for (int y : visited_) seen_[ix(y)] = 0;
    return sum;
  }

  /// Evicts resident activations, the smallest score first, until `need` more bytes fit.
  template <class Emit>
  result<void> make_room(bytes need, int op, Emit& emit) {
    while (mem_ + need > budget_) {
      int best = -1;
      double best_score = 0;
      for (int d = 0; d < g_.data_count(); ++d) {
        if (!alive_[ix(d)] || !remakeable_[ix(d)] || locked_[ix(d)]) continue;
        const auto& p = g_.compute(g_.producers(d).front());
        const dtr_candidate c{p.time, neighborhood(d), size_[ix(d)],
                              static_cast<double>(clock_ - touched_[ix(d)] + 1)};
        if (c.size == 0) continue;
        const double s = heuristic_(c);
        if (best < 0 || s < best_score) {
          best = d;
          best_score = s;
        }
      }
      if (best < 0) {
        bytes held = 0;
        for (int d = 0; d < g_.data_count(); ++d)
          if (alive_[ix(d)]) held += size_[ix(d)];
        return error{status::budget_too_small,
                     who_ + ": '" + g_.compute(op).name + "' needs " + std::to_string(held + need) +
                         " bytes while it runs (" + std::to_string(held) +
                         " held that DTR cannot evict: its inputs, gradients, parameters and what "
                         "it remakes them from; " +
                         std::to_string(need) + " it makes and its scratch), over the budget of " +
                         std::to_string(budget_) + " bytes",
                     held + need};
      }
      free_data(best, emit);
      evicted_[ix(best)] = 1;
    }
    return {};
  }

  /// Runs op k (fast: its fast-forward), its inputs resident and locked by the caller.
  template <class Emit>
  result<void> run_op(int k, bool fast, Emit& emit) {
    const auto& n = g_.compute(k);
    bytes made = 0;
    auto skipped = [&](int d) { return fast && g_.data(d).kind == data_kind::phantom; };
    for (int d : g_.outputs(k)) {
      if (skipped(d)) continue;
      if (alive_[ix(d)] && g_.producers(d).size() == 1) free_data(d, emit);  // remade: freed first
      if (!alive_[ix(d)]) made += size_[ix(d)];
    }
    for (int d : g_.inputs(k)) locked_[ix(d)] += 1;
    auto room = make_room(made + (fast ? n.fast_overhead : n.overhead), k, emit);
    for (int d : g_.inputs(k)) locked_[ix(d)] -= 1;
    if (!room) return room;
    ++clock_;
    for (int d : g_.inputs(k)) touched_[ix(d)] = clock_;
    time_ += fast ? n.fast_time : n.time;
    emit(fast ? instruction::fast_forward(k) : instruction::compute(k));
    for (int d : g_.outputs(k)) {
      if (skipped(d)) continue;
      if (!alive_[ix(d)]) {
        alive_[ix(d)] = 1;
        evicted_[ix(d)] = 0;
        mem_ += size_[ix(d)];
      }
      touched_[ix(d)] = clock_;
    }
    return {};
  }

  /// Makes d resident: its producer run again, its evicted inputs first (each locked once made).
  template <class Emit>
  result<void> remake(int d, Emit& emit) {
    if (alive_[ix(d)]) return {};
    if (!remakeable_[ix(d)])
      return error{status::solver_error,
                   who_ + ": '" + g_.data(d).name +
                       "' is needed but not in memory and cannot be remade (a bug in remat)",
                   {}};
    const int k = g_.producers(d).front();
    return remake_inputs_and_run(
        k, g_.data(d).kind != data_kind::phantom && g_.compute(k).kind == compute_kind::forward,
        emit);
  }

  /// Runs op k (fast: its fast-forward) once its evicted inputs are remade, each locked once
  /// resident.
  template <class Emit>
  result<void> remake_inputs_and_run(int k, bool fast, Emit& emit) {
    std::vector<int> held;
    result<void> r{};
    for (int x : g_.inputs(k)) {
      r = remake(x, emit);
      if (!r) break;
      locked_[ix(x)] += 1;
      held.push_back(x);
    }
    if (r) r = run_op(k, fast, emit);
    for (int x : held) locked_[ix(x)] -= 1;
    return r;
  }

  const graph& g_;
  bytes budget_;
  const H& heuristic_;
  std::string who_;
  std::vector<bytes> size_;
  std::vector<char> remakeable_;
  std::vector<int> last_;
  std::vector<char> alive_, evicted_, locked_, seen_;
  std::vector<long long> touched_;
  std::vector<int> stack_, visited_;
  bytes mem_ = 0;
  long long clock_ = 0;
  int step_ = 0;  // the op of the graph's order running now
  seconds time_ = 0;
};

/// The replay: the program DTR runs on g within `budget` with heuristic H, its predicted time
/// the sum of the ops' times (errors: dtr_engine::run's).
template <class H>
result<schedule> dtr_run(const graph& g, bytes budget, const H& heuristic) {
  dtr_engine<H> engine(g, budget, heuristic);
  schedule out;
  if (auto r = engine.run([&](const instruction& i) { out.ops.push_back(i); }); !r) return r.err();
  out.predicted_time = engine.time();
  return out;
}

}  // namespace detail
}  // namespace remat
