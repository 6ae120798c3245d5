#pragma once
// From a forward DAG to the training graph [Rockmate23, App. A.6] (one backward per forward
// node), and from a chain to the same kind of graph. A forward DAG lists the ops of a network's
// forward pass (times, output and phantom bytes, what the backward reads, overheads); the last op
// is the loss. build_graph makes per op a forward, a backward, its activation, gradient and
// phantom (the backward's context, made only by the normal forward), a placeholder loss node,
// and the protected graph input and its gradient, in the fixed training_layout. A chain is the
// forward DAG whose op l reads op l-1. docs/training-graph.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>

namespace remat {

/// One op of a forward DAG.
struct forward_op {
  std::string name;
  std::vector<std::string> inputs;  ///< "input" (the graph input) or names of other ops
  seconds forward_time = 0;
  seconds backward_time = 0;
  bytes output_bytes = 0;
  bytes phantom_bytes = 0;
  std::vector<std::string> backward_reads;  ///< names among `inputs`, and/or "output"
  bytes forward_overhead_bytes = 0;
  bytes backward_overhead_bytes = 0;
  std::optional<bytes> forward_save_overhead_bytes = std::nullopt;
  // The work behind the times, when a cost model made them (forward_dag::costs); informative,
  // no planner reads them. Members added last so that brace initialisations of the fields above
  // keep compiling.
  std::optional<double> forward_flops = std::nullopt;        ///< floating-point operations
  std::optional<double> backward_flops = std::nullopt;       ///< floating-point operations
  std::optional<bytes> forward_bytes_moved = std::nullopt;   ///< device-memory traffic
  std::optional<bytes> backward_bytes_moved = std::nullopt;  ///< device-memory traffic
  /// The parameters (forward_dag::parameters, by name) the op reads; its backward makes their
  /// gradients.
  std::vector<std::string> parameters = {};

  friend bool operator==(const forward_op&, const forward_op&) = default;
};

/// How a forward DAG's times were derived from its ops' work, when a model made them rather than
/// a measurement: a named device's peak compute and memory bandwidth, and the rule in words (the
/// roofline of zoo/roofline.hpp: time = max(flops / peak_flops, bytes / memory_bandwidth)).
struct cost_model {
  std::string device;
  double peak_flops = 0;        ///< FLOP/s
  double memory_bandwidth = 0;  ///< bytes/s
  std::string rule;

  friend bool operator==(const cost_model&, const cost_model&) = default;
};

/// A network's forward pass; the last op is the loss function.
struct forward_dag {
  std::string name;
  bytes input_bytes = 0;
  std::vector<forward_op> ops;
  std::optional<cost_model> costs = std::nullopt;  ///< where the times came from, if a model
  /// The model's weights, which ops read by name; only the planners of parameters use them.
  std::vector<parameter> parameters = {};

  friend bool operator==(const forward_dag&, const forward_dag&) = default;
};

/// Where build_graph puts the nodes of a forward DAG with `ops` ops; i is an op's position in
/// the graph's order (for a chain, stage l is i = l - 1).
struct training_layout {
  int ops = 0;
  static constexpr int input = 0;           ///< data: the graph input
  static constexpr int input_gradient = 1;  ///< data: its gradient
  [[nodiscard]] constexpr int forward(int i) const noexcept { return i; }
  [[nodiscard]] constexpr int loss() const noexcept { return ops; }
  [[nodiscard]] constexpr int backward(int i) const noexcept { return 2 * ops - i; }
  [[nodiscard]] static constexpr int activation(int i) noexcept { return 2 + 3 * i; }
  [[nodiscard]] static constexpr int gradient(int i) noexcept { return 3 + 3 * i; }
  [[nodiscard]] static constexpr int phantom(int i) noexcept { return 4 + 3 * i; }
};

namespace detail {

inline constexpr std::string_view graph_input_name = "input";
inline constexpr std::string_view own_output_name = "output";

inline std::string op_label(const forward_dag& f, std::size_t i) {
  return "op '" + f.ops[i].name + "' (ops[" + std::to_string(i) + "])";
}

/// The ops' order in the graph (listing order where possible), or a cycle's description.
struct op_order {
  std::vector<std::size_t> order;
  std::string cycle;
};

/// Kahn's algorithm picking the first-listed ready op; `reads[i]` are the op indices op i reads.
inline op_order sort_ops(const forward_dag& f, const std::vector<std::vector<std::size_t>>& reads) {
  const std::size_t n = f.ops.size();
  std::vector<std::vector<std::size_t>> readers(n);
  std::vector<std::size_t> pending(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j : reads[i]) {
      readers[j].push_back(i);
      ++pending[i];
    }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  op_order out;
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    out.order.push_back(i);
    for (std::size_t r : readers[i])
      if (--pending[r] == 0) ready.push(r);
  }
  if (out.order.size() == n) return out;
  // Every op left is on a cycle or downstream of one: walk inputs among them until one repeats.
  std::vector<char> left(n, 0);
  for (std::size_t i = 0; i < n; ++i) left[i] = pending[i] > 0;
  std::size_t start = 0;
  while (!left[start]) ++start;
  std::vector<std::size_t> path;
  std::vector<std::size_t> seen_at(n, n);
  for (std::size_t cur = start; seen_at[cur] == n;) {
    seen_at[cur] = path.size();
    path.push_back(cur);
    for (std::size_t j : reads[cur])
      if (left[j]) {
        cur = j;
        break;
      }
    if (seen_at[cur] != n) {
      // path[seen_at[cur]..] reads backwards along the cycle; print it in data-flow order.
      std::string s;
      for (std::size_t k = path.size(); k-- > seen_at[cur];)
        s += "'" + f.ops[path[k]].name + "' -> ";
      s += "'" + f.ops[path.back()].name + "'";
      out.cycle = s;
      break;
    }
  }
  return out;
}

}  // namespace detail

/// Checks a forward DAG; the error names the op (and its position) and the field at fault.
inline result<void> validate(const forward_dag& f) {
  const std::string where = "forward DAG '" + f.name + "': ";
  auto bad = [&](std::string msg) { return error{status::invalid_problem, where + msg, {}}; };
  constexpr bytes max_size = bytes{1} << 52;
  if (f.input_bytes < 0)
    return bad("input_bytes is negative (" + std::to_string(f.input_bytes) +
               "); sizes are byte counts >= 0");
  if (f.input_bytes > max_size)
    return bad("input_bytes (" + std::to_string(f.input_bytes) + ") exceeds 2^52 bytes");
  if (f.ops.empty())
    return bad("it has no op; the last op is the loss function, so at least one is needed");
  if (f.costs) {
    for (auto [v, field, unit] :
         {std::tuple{f.costs->peak_flops, "peak_flops", "FLOP/s"},
          std::tuple{f.costs->memory_bandwidth, "memory_bandwidth", "bytes/s"}})
      if (!std::isfinite(v) || v <= 0)
        return bad(std::string("cost_model: ") + field + " is " + detail::time_text(v) +
                   "; it must be a finite number > 0 (" + unit + ")");
  }

  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < f.ops.size(); ++i) {
    const forward_op& op = f.ops[i];
    const std::string at = "op " + std::to_string(i + 1) + " at ops[" + std::to_string(i) + "]";
    if (op.name.empty())
      return bad(at + " has no name; ops are named so that other ops can read them");
    if (op.name == detail::graph_input_name || op.name == detail::own_output_name)
      return bad(at + " is named '" + op.name +
                 "', which is reserved (\"input\" is the graph input, \"output\" an " +
                 "op's own output in backward_reads); rename it");
    if (const auto [it, fresh] = index.emplace(op.name, i); !fresh)
      return bad(detail::op_label(f, i) + " has the same name as ops[" +
                 std::to_string(it->second) + "]; op names must be unique");
  }

  std::vector<std::vector<std::size_t>> reads(f.ops.size());
  std::vector<std::size_t> read_by(f.ops.size(),
                                   f.ops.size());  // one reader of each op, for messages
  seconds total = 0;  // the ideal time, which must stay below max_time (core/units.hpp)
  for (std::size_t i = 0; i < f.ops.size(); ++i) {
    const forward_op& op = f.ops[i];
    const std::string who = detail::op_label(f, i);
    for (auto [v, field] : {std::pair{op.forward_time, "forward_time"},
                            std::pair{op.backward_time, "backward_time"}}) {
      if (auto e = detail::time_field_error(v, who, field)) return bad(*e);
      if (auto e = detail::time_total_error(total, v, who, field, "the forward DAG"))
        return bad(*e);
    }
    for (auto [v, field] :
         {std::pair{op.output_bytes, "output_bytes"}, std::pair{op.phantom_bytes, "phantom_bytes"},
          std::pair{op.forward_overhead_bytes, "forward_overhead_bytes"},
          std::pair{op.backward_overhead_bytes, "backward_overhead_bytes"},
          std::pair{op.forward_save_overhead_bytes.value_or(0), "forward_save_overhead_bytes"}}) {
      if (v < 0)
        return bad(who + ": " + field + " is negative (" + std::to_string(v) +
                   "); sizes are byte counts >= 0");
      if (v > max_size)
        return bad(who + ": " + field + " (" + std::to_string(v) + ") exceeds 2^52 bytes");
    }
    for (auto [v, field] : {std::pair{op.forward_flops, "forward_flops"},
                            std::pair{op.backward_flops, "backward_flops"}})
      if (v && (!std::isfinite(*v) || *v < 0))
        return bad(who + ": " + field + " is " + detail::time_text(*v) +
                   "; a FLOP count is a finite number >= 0 (or absent)");
    for (auto [v, field] : {std::pair{op.forward_bytes_moved, "forward_bytes_moved"},
                            std::pair{op.backward_bytes_moved, "backward_bytes_moved"}})
      if (v && (*v < 0 || *v > max_size))
        return bad(who + ": " + field + " is " + std::to_string(*v) +
                   "; bytes moved are a byte count >= 0 and at most 2^52 (or absent)");
    if (op.inputs.empty())
      return bad(who + ": inputs is empty; an op reads the graph input (\"input\") or other ops");
    for (const std::string& in : op.inputs) {
      if (in == detail::graph_input_name) continue;
      const auto it = index.find(in);
      if (it == index.end())
        return bad(who + ": input '" + in +
                   "' is a dangling input: it is neither \"input\" nor the name of an op");
      if (it->second == i)
        return bad(who + " reads its own output: an op cannot be its own input (a cycle)");
      if (std::find(reads[i].begin(), reads[i].end(), it->second) == reads[i].end())
        reads[i].push_back(it->second);
      read_by[it->second] = i;
    }
    for (const std::string& r : op.backward_reads)
      if (r != detail::own_output_name &&
          std::find(op.inputs.begin(), op.inputs.end(), r) == op.inputs.end())
        return bad(who + ": backward_reads names '" + r +
                   "', which is not one of its inputs; list names from inputs, " +
                   "or \"output\" for the op's own output");
  }

  const std::size_t last = f.ops.size() - 1;
  if (read_by[last] != f.ops.size())
    return bad("the last op '" + f.ops[last].name + "' is the loss function, but " +
               detail::op_label(f, read_by[last]) + " reads it; list the loss function last");
  for (std::size_t i = 0; i < last; ++i)
    if (read_by[i] == f.ops.size())
      return bad(detail::op_label(f, i) +
                 " is read by no op and is not the loss function (the last op, '" +
                 f.ops[last].name +
                 "'): nothing depends on it; remove it or make another op read it");

  if (const auto sorted = detail::sort_ops(f, reads); !sorted.cycle.empty())
    return bad("ops " + sorted.cycle + " form a cycle (a -> b: b reads a)");

  // Parameters: named once each, sizes in range, read by some op; ops read known ones.
  std::unordered_map<std::string, std::size_t> params;
  std::vector<char> used(f.parameters.size(), 0);
  for (std::size_t p = 0; p < f.parameters.size(); ++p) {
    const parameter& w = f.parameters[p];
    const std::string at = "parameters[" + std::to_string(p) + "]";
    if (w.name.empty()) return bad(at + " has no name; ops read parameters by name");
    if (const auto [it, fresh] = params.emplace(w.name, p); !fresh)
      return bad(at + " has the name '" + w.name + "' of parameters[" + std::to_string(it->second) +
                 "]; parameter names must be unique");
    if (w.size < 0)
      return bad("parameter '" + w.name + "': bytes is negative (" + std::to_string(w.size) +
                 "); sizes are byte counts >= 0");
    if (w.size > max_size)
      return bad("parameter '" + w.name + "': bytes (" + std::to_string(w.size) + ") exceeds 2^52");
  }
  for (std::size_t i = 0; i < f.ops.size(); ++i)
    for (const std::string& name : f.ops[i].parameters) {
      const auto it = params.find(name);
      if (it == params.end())
        return bad(detail::op_label(f, i) + " reads parameter '" + name +
                   "', which is not in the DAG's parameters; list it there with its bytes");
      used[it->second] = 1;
    }
  for (std::size_t p = 0; p < f.parameters.size(); ++p)
    if (!used[p])
      return bad("parameter '" + f.parameters[p].name +
                 "' is read by no op; name it in the parameters of the ops that use it, or "
                 "remove it");
  return {};
}

/// The training graph of a forward DAG (modelling decisions and layout at the top of this header).
inline result<graph> build_graph(const forward_dag& f) {
  if (auto v = validate(f); !v) return v.err();
  const std::size_t n = f.ops.size();
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < n; ++i) index.emplace(f.ops[i].name, i);
  std::vector<std::vector<std::size_t>> reads(n);
  for (std::size_t i = 0; i < n; ++i)
    for (const auto& in : f.ops[i].inputs)
      if (in != detail::graph_input_name) reads[i].push_back(index.at(in));
  const std::vector<std::size_t> order = detail::sort_ops(f, reads).order;
  std::vector<int> pos(n);  // listing index -> position in the graph's order
  for (std::size_t k = 0; k < n; ++k) pos[order[k]] = static_cast<int>(k);

  const training_layout lay{static_cast<int>(n)};
  graph g(f.name);
  g.add_data({std::string(detail::graph_input_name), data_kind::activation, f.input_bytes, true});
  g.add_data({"grad input", data_kind::gradient, f.input_bytes, true});
  g.set_gradient(lay.input, lay.input_gradient);
  for (std::size_t k = 0; k < n; ++k) {
    const forward_op& op = f.ops[order[k]];
    const bool loss_op = k + 1 == n;
    g.add_data({op.name, data_kind::activation, op.output_bytes, false});
    g.add_data({"grad " + op.name, data_kind::gradient, loss_op ? 0 : op.output_bytes, false});
    g.add_data({"phantom " + op.name, data_kind::phantom, op.phantom_bytes, false});
    g.set_gradient(lay.activation(static_cast<int>(k)), lay.gradient(static_cast<int>(k)));
  }
  auto data_of = [&](const std::string& in) {
    return in == detail::graph_input_name ? lay.input : lay.activation(pos[index.at(in)]);
  };
  auto grad_of = [&](const std::string& in) {
    return in == detail::graph_input_name ? lay.input_gradient : lay.gradient(pos[index.at(in)]);
  };
  for (std::size_t k = 0; k < n; ++k) {
    const forward_op& op = f.ops[order[k]];
    const int c = g.add_compute({"fwd " + op.name, compute_kind::forward, op.forward_time,
                                 op.forward_save_overhead_bytes.value_or(op.forward_overhead_bytes),
                                 op.forward_time, op.forward_overhead_bytes});
    for (const auto& in : op.inputs) g.add_input(c, data_of(in));
    g.add_output(c, lay.activation(static_cast<int>(k)));
    g.add_output(c, lay.phantom(static_cast<int>(k)));
  }
  std::unordered_map<std::string, int> param_index;
  for (const parameter& w : f.parameters) param_index.emplace(w.name, g.add_parameter(w));
  for (std::size_t k = 0; k < n; ++k)
    for (const auto& name : f.ops[order[k]].parameters)
      g.use_parameter(lay.forward(static_cast<int>(k)), param_index.at(name));
  const int last = static_cast<int>(n) - 1;
  const int loss = g.add_compute({"loss", compute_kind::loss, 0, 0, 0, 0});
  g.add_input(loss, lay.activation(last));
  g.add_output(loss, lay.gradient(last));
  for (std::size_t kk = n; kk-- > 0;) {
    const int k = static_cast<int>(kk);
    const forward_op& op = f.ops[order[kk]];
    const int c = g.add_compute({"bwd " + op.name, compute_kind::backward, op.backward_time,
                                 op.backward_overhead_bytes, 0, 0});
    g.add_input(c, lay.gradient(k));
    g.add_input(c, lay.phantom(k));
    for (const auto& r : op.backward_reads)
      g.add_input(c, r == detail::own_output_name ? lay.activation(k) : data_of(r));
    for (const auto& in : op.inputs) g.add_output(c, grad_of(in));
    g.set_backward(lay.forward(k), c);
  }
  if (auto v = validate(g); !v)
    return error{status::solver_error,
                 "build_graph made an invalid graph (a bug in remat; please report it with the "
                 "forward DAG): " +
                     v.message(),
                 {}};
  return g;
}

/// The forward DAG of a chain: op l reads op l-1 (op 1 the input), phantom = abar_l - a_l, the
/// backward reads the op's input and output. Ops keep their stage's name when it is non-empty,
/// unique and not reserved; otherwise they are named "stage <l>" (made unique if needed).
inline forward_dag to_forward_dag(const chain& c) {
  forward_dag f;
  f.name = c.name;
  f.input_bytes = c.input_bytes;
  std::unordered_map<std::string, int> count;
  for (const auto& s : c.stages) ++count[s.name];
  std::unordered_map<std::string, int> used;
  for (const auto& s : c.stages) used[s.name] = 1;
  std::vector<std::string> names;
  for (int l = 1; l <= c.length(); ++l) {
    const std::string& sn = c.at(l).name;
    std::string nm = sn;
    if (sn.empty() || count[sn] > 1 || sn == detail::graph_input_name ||
        sn == detail::own_output_name) {
      nm = "stage " + std::to_string(l);
      while (used.count(nm)) nm += "'";
      used[nm] = 1;
    }
    names.push_back(std::move(nm));
  }
  for (int l = 1; l <= c.length(); ++l) {
    const stage& s = c.at(l);
    const std::string in =
        l == 1 ? std::string(detail::graph_input_name) : names[static_cast<std::size_t>(l - 2)];
    f.ops.push_back({names[static_cast<std::size_t>(l - 1)],
                     {in},
                     s.forward_time,
                     s.backward_time,
                     s.output_bytes,
                     s.saved_bytes - s.output_bytes,
                     {in, std::string(detail::own_output_name)},
                     s.forward_overhead_bytes,
                     s.backward_overhead_bytes,
                     s.forward_save_overhead_bytes});
  }
  return f;
}

/// The training graph of a chain; stage l's nodes are at training_layout{N} position l - 1.
inline result<graph> build_graph(const chain& c) {
  if (auto v = validate(c); !v) return v.err();
  return build_graph(to_forward_dag(c));
}

}  // namespace remat
