#pragma once
// The training graph, the input of the graph policies: the FB-Graph of [Zhao24, §1.3.1], the
// CD_graph of [Rockmate23, §3.2, App. A.6]. A directed bipartite DAG of compute nodes (forwards,
// backwards, one loss) and data nodes (activations, gradients, phantoms: a backward's saved
// context); a gradient may have several producers whose contributions are summed, and is complete
// only when every contribution has run. validate(graph) checks every invariant the planners rely
// on. docs/training-graph.md, "The training graph".

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>

namespace remat {

enum class compute_kind : unsigned char { forward, backward, loss };
enum class data_kind : unsigned char { activation, gradient, phantom };

inline constexpr std::string_view to_string(compute_kind k) {
  switch (k) {
    case compute_kind::forward:
      return "forward";
    case compute_kind::backward:
      return "backward";
    case compute_kind::loss:
      return "loss";
  }
  return "?";
}

inline constexpr std::string_view to_string(data_kind k) {
  switch (k) {
    case data_kind::activation:
      return "activation";
    case data_kind::gradient:
      return "gradient";
    case data_kind::phantom:
      return "phantom";
  }
  return "?";
}

struct compute_node {
  std::string name;
  compute_kind kind = compute_kind::forward;
  seconds time = 0;
  bytes overhead = 0;  ///< temporary memory while it runs: its peak minus what it holds at the end
  /// Forward nodes only: the fast-forward variant, which creates no phantom.
  seconds fast_time = 0;
  bytes fast_overhead = 0;

  friend bool operator==(const compute_node&, const compute_node&) = default;
};

struct data_node {
  std::string name;
  data_kind kind = data_kind::activation;
  bytes size = 0;
  /// A graph input (alive from the start) or output (alive at the end); never freed.
  bool is_protected = false;

  friend bool operator==(const data_node&, const data_node&) = default;
};

/// A parameter tensor of the model (a weight): its bytes, whether the optimizer trains it, and
/// its element type (informative: "fp32", "bf16", ...). The forward nodes that read it are its
/// users; their backwards make its gradient. Only the planners of parameters read them
/// (offmate); the others plan activations alone.
struct parameter {
  std::string name;
  bytes size = 0;
  bool trainable = true;
  std::string dtype = "fp32";

  friend bool operator==(const parameter&, const parameter&) = default;
};

class graph {
 public:
  std::string name;

  graph() = default;
  explicit graph(std::string n) : name(std::move(n)) {}

  // --- building --------------------------------------------------------------------------------
  // Out-of-range indices are programming errors and throw std::out_of_range.

  /// Appends a compute node; its index is its position in the topological order.
  int add_compute(compute_node c) {
    computes_.push_back(std::move(c));
    params_of_.emplace_back();
    inputs_.emplace_back();
    outputs_.emplace_back();
    partner_.push_back(-1);
    return compute_count() - 1;
  }
  int add_data(data_node d) {
    data_.push_back(std::move(d));
    producers_.emplace_back();
    consumers_.emplace_back();
    twin_.push_back(-1);
    return data_count() - 1;
  }
  /// d -> c: c needs d. Adding an edge twice is the same as adding it once.
  void add_input(int c, int d) {
    check_compute(c);
    check_data(d);
    if (link(inputs_[detail::ix(c)], d)) consumers_[detail::ix(d)].push_back(c);
  }
  /// c -> d: c creates d (or contributes to it).
  void add_output(int c, int d) {
    check_compute(c);
    check_data(d);
    if (link(outputs_[detail::ix(c)], d)) producers_[detail::ix(d)].push_back(c);
  }
  /// Pairs a forward node with its backward (the executor and Rockmate's phantoms need the pair).
  void set_backward(int forward, int backward) {
    check_compute(forward);
    check_compute(backward);
    unpair(partner_, forward);
    unpair(partner_, backward);
    partner_[detail::ix(forward)] = backward;
    partner_[detail::ix(backward)] = forward;
  }
  /// Links an activation with its gradient.
  void set_gradient(int activation, int gradient) {
    check_data(activation);
    check_data(gradient);
    unpair(twin_, activation);
    unpair(twin_, gradient);
    twin_[detail::ix(activation)] = gradient;
    twin_[detail::ix(gradient)] = activation;
  }

  /// Appends a parameter; its index is its position in parameters().
  int add_parameter(parameter p) {
    params_.push_back(std::move(p));
    users_.emplace_back();
    return static_cast<int>(params_.size()) - 1;
  }
  /// Forward node c reads parameter p (its backward makes p's gradient). Twice is once.
  void use_parameter(int c, int p) {
    check_compute(c);
    if (p < 0 || p >= static_cast<int>(params_.size()))
      throw std::out_of_range("remat::graph: parameter " + std::to_string(p) +
                              " does not exist (the graph has " + std::to_string(params_.size()) +
                              ")");
    if (link(params_of_[detail::ix(c)], p)) users_[detail::ix(p)].push_back(c);
  }

  // --- parameters ------------------------------------------------------------------------------
  [[nodiscard]] const std::vector<parameter>& parameters() const noexcept { return params_; }
  /// The forward nodes that read parameter p.
  [[nodiscard]] std::span<const int> parameter_users(int p) const {
    return users_.at(detail::ix(p));
  }
  /// The parameters forward node c reads.
  [[nodiscard]] std::span<const int> parameters_of(int c) const {
    return params_of_.at(detail::ix(c));
  }

  // --- nodes -----------------------------------------------------------------------------------
  [[nodiscard]] int compute_count() const noexcept { return static_cast<int>(computes_.size()); }
  [[nodiscard]] int data_count() const noexcept { return static_cast<int>(data_.size()); }
  [[nodiscard]] const compute_node& compute(int c) const { return computes_.at(detail::ix(c)); }
  [[nodiscard]] compute_node& compute(int c) { return computes_.at(detail::ix(c)); }
  [[nodiscard]] const data_node& data(int d) const { return data_.at(detail::ix(d)); }
  [[nodiscard]] data_node& data(int d) { return data_.at(detail::ix(d)); }
  [[nodiscard]] const std::vector<compute_node>& compute_nodes() const noexcept {
    return computes_;
  }
  [[nodiscard]] const std::vector<data_node>& data_nodes() const noexcept { return data_; }

  // --- edges -----------------------------------------------------------------------------------
  /// The data nodes compute node c needs, in the order they were added.
  [[nodiscard]] std::span<const int> inputs(int c) const { return inputs_.at(detail::ix(c)); }
  /// The data nodes compute node c creates or contributes to.
  [[nodiscard]] std::span<const int> outputs(int c) const { return outputs_.at(detail::ix(c)); }
  /// The compute nodes that create (or contribute to) data node d.
  [[nodiscard]] std::span<const int> producers(int d) const { return producers_.at(detail::ix(d)); }
  /// The compute nodes that need data node d.
  [[nodiscard]] std::span<const int> consumers(int d) const { return consumers_.at(detail::ix(d)); }

  // --- structure -------------------------------------------------------------------------------
  /// The compute nodes in topological order: 0, 1, ..., compute_count() - 1.
  [[nodiscard]] std::vector<int> topological_order() const {
    std::vector<int> order(computes_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    return order;
  }
  /// The loss node; -1 when there is none (validate() reports it).
  [[nodiscard]] int loss() const noexcept {
    for (std::size_t i = 0; i < computes_.size(); ++i)
      if (computes_[i].kind == compute_kind::loss) return static_cast<int>(i);
    return -1;
  }
  /// The backward paired with forward f (or the forward paired with backward b); -1 if none.
  [[nodiscard]] int backward_of(int f) const { return partner_.at(detail::ix(f)); }
  [[nodiscard]] int forward_of(int b) const { return partner_.at(detail::ix(b)); }
  /// The phantom forward f creates; -1 if none.
  [[nodiscard]] int phantom_of(int f) const {
    for (int d : outputs(f))
      if (data_[detail::ix(d)].kind == data_kind::phantom) return d;
    return -1;
  }
  /// {forward that creates phantom p, backward that reads it}; -1 where missing.
  [[nodiscard]] std::pair<int, int> phantom_pair(int p) const {
    const auto& pr = producers_.at(detail::ix(p));
    const auto& co = consumers_.at(detail::ix(p));
    return {pr.size() == 1 ? pr[0] : -1, co.size() == 1 ? co[0] : -1};
  }
  /// The gradient of activation a (or the activation of gradient g); -1 if none.
  [[nodiscard]] int gradient_of(int a) const { return twin_.at(detail::ix(a)); }
  [[nodiscard]] int activation_of(int g) const { return twin_.at(detail::ix(g)); }
  /// A data node nothing produces: alive from the start.
  [[nodiscard]] bool is_source(int d) const { return producers_.at(detail::ix(d)).empty(); }

  /// The first node with this name; -1 if none. Names are for people: the builder makes them
  /// unique, the graph does not require it.
  [[nodiscard]] int find_compute(std::string_view n) const {
    for (std::size_t i = 0; i < computes_.size(); ++i)
      if (computes_[i].name == n) return static_cast<int>(i);
    return -1;
  }
  [[nodiscard]] int find_data(std::string_view n) const {
    for (std::size_t i = 0; i < data_.size(); ++i)
      if (data_[i].name == n) return static_cast<int>(i);
    return -1;
  }

  /// Time of plain training: every compute node once, forwards in normal mode.
  [[nodiscard]] seconds ideal_time() const {
    seconds t = 0;
    for (const auto& c : computes_) t += c.time;
    return t;
  }
  /// Memory at the start: the sources (graph inputs).
  [[nodiscard]] bytes initial_bytes() const {
    bytes m = 0;
    for (std::size_t d = 0; d < data_.size(); ++d)
      if (producers_[d].empty()) m += data_[d].size;
    return m;
  }

  friend bool operator==(const graph&, const graph&) = default;

 private:
  void check_compute(int c) const {
    if (c < 0 || c >= compute_count())
      throw std::out_of_range("remat::graph: compute node " + std::to_string(c) +
                              " does not exist (the graph has " + std::to_string(compute_count()) +
                              ")");
  }
  void check_data(int d) const {
    if (d < 0 || d >= data_count())
      throw std::out_of_range("remat::graph: data node " + std::to_string(d) +
                              " does not exist (the graph has " + std::to_string(data_count()) +
                              ")");
  }
  static bool link(std::vector<int>& v, int x) {
    if (std::find(v.begin(), v.end(), x) != v.end()) return false;
    v.push_back(x);
    return true;
  }
  static void unpair(std::vector<int>& pairs, int x) {
    const int old = pairs[detail::ix(x)];
    if (old >= 0) pairs[detail::ix(old)] = -1;
    pairs[detail::ix(x)] = -1;
  }

  std::vector<compute_node> computes_;
  std::vector<data_node> data_;
  std::vector<std::vector<int>> inputs_, outputs_;       // per compute node
  std::vector<std::vector<int>> producers_, consumers_;  // per data node
  std::vector<int> partner_;                             // forward <-> backward
  std::vector<int> twin_;                                // activation <-> gradient
  std::vector<parameter> params_;
  std::vector<std::vector<int>> users_;      // per parameter: the forward nodes that read it
  std::vector<std::vector<int>> params_of_;  // per compute node: the parameters it reads
};

namespace detail {

inline std::string compute_label(const graph& g, int c) {
  const auto& n = g.compute(c);
  return "'" + (n.name.empty() ? "c" + std::to_string(c) : n.name) + "' (compute " +
         std::to_string(c) + ")";
}
inline std::string data_label(const graph& g, int d) {
  const auto& n = g.data(d);
  return "'" + (n.name.empty() ? "d" + std::to_string(d) : n.name) + "' (data " +
         std::to_string(d) + ")";
}
inline std::string compute_list(const graph& g, std::span<const int> cs) {
  std::string s;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (i) s += i + 1 == cs.size() ? " and " : ", ";
    s += compute_label(g, cs[i]);
  }
  return s;
}

/// A cycle of compute nodes through data nodes, as "c1 -> d -> c2 -> ... -> c1"; empty if none.
inline std::string find_cycle(const graph& g) {
  const int n = g.compute_count();
  std::vector<unsigned char> state(static_cast<std::size_t>(n), 0);  // 0 new, 1 on stack, 2 done
  std::vector<std::pair<int, int>> parent(static_cast<std::size_t>(n),
                                          {-1, -1});  // compute, via data
  struct frame {
    int c;
    std::size_t out = 0, cons = 0;
  };
  for (int root = 0; root < n; ++root) {
    if (state[static_cast<std::size_t>(root)]) continue;
    std::vector<frame> stack{{root}};
    state[static_cast<std::size_t>(root)] = 1;
    while (!stack.empty()) {
      frame& f = stack.back();
      const auto outs = g.outputs(f.c);
      if (f.out == outs.size()) {
        state[static_cast<std::size_t>(f.c)] = 2;
        stack.pop_back();
        continue;
      }
      const int d = outs[f.out];
      const auto cons = g.consumers(d);
      if (f.cons == cons.size()) {
        ++f.out;
        f.cons = 0;
        continue;
      }
      const int next = cons[f.cons++];
      const auto sn = static_cast<std::size_t>(next);
      if (state[sn] == 1) {  // back edge: f.c -> d -> next closes a cycle
        std::vector<std::pair<int, int>> path{{f.c, d}};
        for (int c = f.c; c != next;) {
          const auto [p, via] = parent[static_cast<std::size_t>(c)];
          path.push_back({p, via});
          c = p;
        }
        std::string s = compute_label(g, next);
        for (auto it = path.rbegin(); it != path.rend(); ++it) {
          s += " -> " + data_label(g, it->second) + " -> ";
          const auto nx = std::next(it);
          s += compute_label(g, nx == path.rend() ? next : nx->first);
        }
        return s;
      }
      if (state[sn] == 0) {
        state[sn] = 1;
        parent[sn] = {f.c, d};
        stack.push_back({next});
      }
    }
  }
  return {};
}

}  // namespace detail

/// Checks the invariants listed at the top of this header. The error (status::invalid_problem)
/// names the nodes involved and says what would be accepted.
inline result<void> validate(const graph& g) {
  const std::string where = "graph '" + g.name + "': ";
  auto bad = [&](std::string msg) { return error{status::invalid_problem, where + msg, {}}; };
  using detail::compute_label;
  using detail::data_label;
  constexpr bytes max_size = bytes{1} << 52;  // sums stay far from overflow

  if (g.compute_count() == 0)
    return bad("it has no compute node; a training graph needs at least a loss");

  // Values. Times below max_time each, and their sum (the ideal time) too (core/units.hpp).
  seconds total = 0;
  for (int c = 0; c < g.compute_count(); ++c) {
    const compute_node& n = g.compute(c);
    const std::string who = "compute node " + compute_label(g, c);
    for (auto [v, field] : {std::pair{n.time, "time"}, std::pair{n.fast_time, "fast_time"}})
      if (auto e = detail::time_field_error(v, who, field)) return bad(*e);
    if (auto e = detail::time_total_error(total, n.time, who, "time", "the graph")) return bad(*e);
    for (auto [v, field] :
         {std::pair{n.overhead, "overhead"}, std::pair{n.fast_overhead, "fast_overhead"}}) {
      if (v < 0)
        return bad("compute node " + compute_label(g, c) + ": " + field + " is negative (" +
                   std::to_string(v) + "); sizes are byte counts >= 0");
      if (v > max_size)
        return bad("compute node " + compute_label(g, c) + ": " + field + " (" + std::to_string(v) +
                   ") exceeds 2^52 bytes");
    }
  }
  for (int d = 0; d < g.data_count(); ++d) {
    const bytes v = g.data(d).size;
    if (v < 0)
      return bad("data node " + data_label(g, d) + ": size is negative (" + std::to_string(v) +
                 "); sizes are byte counts >= 0");
    if (v > max_size)
      return bad("data node " + data_label(g, d) + ": size (" + std::to_string(v) +
                 ") exceeds 2^52 bytes");
  }

  for (std::size_t p = 0; p < g.parameters().size(); ++p) {
    const parameter& w = g.parameters()[p];
    const std::string who = "parameter '" + w.name + "' (parameter " + std::to_string(p) + ")";
    if (w.size < 0)
      return bad(who + ": size is negative (" + std::to_string(w.size) +
                 "); sizes are byte counts >= 0");
    if (w.size > max_size)
      return bad(who + ": size (" + std::to_string(w.size) + ") exceeds 2^52 bytes");
    for (int c : g.parameter_users(static_cast<int>(p)))
      if (g.compute(c).kind != compute_kind::forward)
        return bad(who + " is read by " + compute_label(g, c) +
                   ", which is not a forward node; forward nodes read parameters (their "
                   "backwards make the gradients)");
  }

  // One loss.
  std::vector<int> losses;
  for (int c = 0; c < g.compute_count(); ++c)
    if (g.compute(c).kind == compute_kind::loss) losses.push_back(c);
  if (losses.empty())
    return bad(
        "it has no loss node; exactly one compute node must have kind loss (it splits the "
        "forward from the backward)");
  if (losses.size() > 1)
    return bad("it has " + std::to_string(losses.size()) + " loss nodes, " +
               detail::compute_list(g, losses) + "; exactly one is allowed");

  // Kinds along edges.
  for (int c = 0; c < g.compute_count(); ++c) {
    const compute_kind k = g.compute(c).kind;
    if (g.outputs(c).empty())
      return bad(std::string(to_string(k)) + " node " + compute_label(g, c) +
                 " creates no data node: nothing depends on it; remove it or give it an output");
    for (int d : g.outputs(c)) {
      const data_kind dk = g.data(d).kind;
      const bool ok =
          k == compute_kind::forward ? dk != data_kind::gradient : dk == data_kind::gradient;
      if (!ok)
        return bad(std::string(to_string(k)) + " node " + compute_label(g, c) + " creates the " +
                   std::string(to_string(dk)) + " " + data_label(g, d) +
                   (k == compute_kind::forward ? "; forwards create activations and phantoms"
                                               : "; backwards and the loss create gradients"));
    }
    if (k != compute_kind::backward)
      for (int d : g.inputs(c))
        if (g.data(d).kind != data_kind::activation)
          return bad(std::string(to_string(k)) + " node " + compute_label(g, c) + " reads the " +
                     std::string(to_string(g.data(d).kind)) + " " + data_label(g, d) +
                     "; only backwards read gradients and phantoms");
    if (const int p = g.forward_of(c); p >= 0) {
      const compute_kind pk = g.compute(p).kind;
      if (!(k == compute_kind::forward && pk == compute_kind::backward) &&
          !(k == compute_kind::backward && pk == compute_kind::forward))
        return bad("compute nodes " + compute_label(g, c) + " and " + compute_label(g, p) +
                   " are paired but are a " + std::string(to_string(k)) + " and a " +
                   std::string(to_string(pk)) + "; a pair is a forward and its backward");
    }
  }
  for (int d = 0; d < g.data_count(); ++d) {
    const data_node& n = g.data(d);
    const auto pr = g.producers(d);
    const auto co = g.consumers(d);
    if (pr.empty() && !n.is_protected)
      return bad("data node " + data_label(g, d) + " is a dangling input: nothing produces it" +
                 (co.empty() ? std::string()
                             : " but " + detail::compute_list(g, co) + " need" +
                                   (co.size() == 1 ? "s" : "") + " it") +
                 "; give it a producer, or mark it protected if it is a graph input");
    if (co.empty() && !n.is_protected)
      return bad("data node " + data_label(g, d) + " is needed by no compute node: nothing " +
                 "depends on it; remove it, or mark it protected if it is a graph output");
    if (n.kind == data_kind::activation && pr.size() > 1)
      return bad("activation " + data_label(g, d) + " has " + std::to_string(pr.size()) +
                 " producers, " + detail::compute_list(g, pr) +
                 "; only gradients may have several (summed) contributions");
    if (n.kind == data_kind::phantom) {
      if (n.is_protected)
        return bad("phantom " + data_label(g, d) + " is protected; a phantom lives between its " +
                   "forward and its backward");
      if (pr.size() != 1 || co.size() != 1)
        return bad("phantom " + data_label(g, d) + " has " + std::to_string(pr.size()) +
                   " producers and " + std::to_string(co.size()) +
                   " consumers; a phantom has exactly one of each, a forward and its backward");
      if (g.backward_of(pr[0]) != co[0])
        return bad("phantom " + data_label(g, d) + " is created by " + compute_label(g, pr[0]) +
                   " but read by " + compute_label(g, co[0]) +
                   ", which is not that forward's backward (set_backward pairs them)");
    }
  }

  // Acyclic, then numbered in a topological order.
  if (const std::string cycle = detail::find_cycle(g); !cycle.empty())
    return bad("it has a cycle: " + cycle);
  for (int d = 0; d < g.data_count(); ++d)
    for (int p : g.producers(d))
      for (int c : g.consumers(d))
        if (p >= c)
          return bad(compute_label(g, c) + " needs " + data_label(g, d) + ", which " +
                     compute_label(g, p) + " produces later in the order; compute nodes must " +
                     "be numbered in a topological order (producers before consumers)");

  // The loss descends from every forward and precedes every backward ([Zhao24, §3.2.1]).
  const int l = losses[0];
  std::vector<char> up(static_cast<std::size_t>(g.compute_count()), 0);
  std::vector<char> down(up.size(), 0);
  up[static_cast<std::size_t>(l)] = down[static_cast<std::size_t>(l)] = 1;
  for (int c = l; c >= 0; --c)  // ancestors: reverse topological order
    if (up[static_cast<std::size_t>(c)])
      for (int d : g.inputs(c))
        for (int p : g.producers(d)) up[static_cast<std::size_t>(p)] = 1;
  for (int c = l; c < g.compute_count(); ++c)  // descendants
    if (down[static_cast<std::size_t>(c)])
      for (int d : g.outputs(c))
        for (int q : g.consumers(d)) down[static_cast<std::size_t>(q)] = 1;
  for (int c = 0; c < g.compute_count(); ++c) {
    const compute_kind k = g.compute(c).kind;
    if (k == compute_kind::forward && !up[static_cast<std::size_t>(c)])
      return bad("forward " + compute_label(g, c) + " does not lead to the loss " +
                 compute_label(g, l) + "; every forward must be an ancestor of the loss");
    if (k == compute_kind::backward && !down[static_cast<std::size_t>(c)])
      return bad("backward " + compute_label(g, c) + " does not follow from the loss " +
                 compute_label(g, l) + "; every backward must be a descendant of the loss");
  }
  return {};
}

}  // namespace remat
