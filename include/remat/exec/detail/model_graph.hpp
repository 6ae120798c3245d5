#pragma once
// Model-to-graph matching: the training graph of a model's structure (no costs) and where each
// op's nodes are in it. A DAG model must be the one its graph was built from (node names, kinds
// and edges; the costs are free): op o is "fwd o", "bwd o", data nodes "o", "grad o",
// "phantom o", the graph input data node 0 and its gradient node 1. A chain model's stage l is op
// l - 1 of build_graph(chain) (training_layout). The executor and the profiler both use it.
// docs/executor.md, "Model and graph".

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/exec/as_graph_layer.hpp>
#include <remat/exec/concepts/dag_layer.hpp>
#include <remat/exec/concepts/model.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>

namespace remat::exec::detail {

using ::remat::detail::compute_label;
using ::remat::detail::data_label;
using ::remat::detail::graph_input_name;
using ::remat::detail::own_output_name;

/// The backward reads of every op of a DAG model, from its layers.
template <class Model>
std::vector<backward_needs> reads_of(Model& m) {
  using mt = model_traits<std::remove_cvref_t<decltype(m.layers)>>;
  std::vector<backward_needs> r;
  for (std::size_t i = 0; i < mt::size(m.layers); ++i)
    mt::visit(m.layers, i, [&](auto& layer) {
      r.push_back(dag_layer_traits<std::remove_reference_t<decltype(layer)>>::reads(layer));
    });
  return r;
}

/// The forward DAG of a model without costs, checked: the errors name the op.
template <class Model>
result<forward_dag> skeleton(Model& m, std::string name) {
  using mt = model_traits<std::remove_cvref_t<decltype(m.layers)>>;
  const std::string where = "DAG model '" + name + "': ";
  auto bad = [&](std::string msg) { return error{status::invalid_problem, where + msg, {}}; };
  if (mt::size(m.layers) != m.ops.size())
    return bad("it has " + std::to_string(mt::size(m.layers)) + " layers but " +
               std::to_string(m.ops.size()) + " ops; op i runs layer i");
  const std::vector<backward_needs> reads = reads_of(m);
  forward_dag f{std::move(name), 0, {}};
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const dag_op& op = m.ops[i];
    std::unordered_set<std::string> seen;
    for (const auto& in : op.inputs)
      if (!seen.insert(in).second)
        return bad(
            "op '" + op.name + "' (ops[" + std::to_string(i) + "]) reads '" + in +
            "' twice; list each tensor once (a layer that uses a tensor twice reads it once)");
    bool one_input = false;
    mt::visit(m.layers, i, [&](auto& layer) {
      one_input = is_chain_stage<std::remove_reference_t<decltype(layer)>>;
    });
    if (one_input && op.inputs.size() != 1)
      return bad("op '" + op.name + "' (ops[" + std::to_string(i) +
                 "]) runs a chain layer (as_graph_layer), "
                 "which takes one input, but it lists " +
                 std::to_string(op.inputs.size()) +
                 "; give it one input, or write a graph layer (exec/concepts.hpp)");
    forward_op fo;
    fo.name = op.name;
    fo.inputs = op.inputs;
    if (reads[i].inputs) fo.backward_reads = op.inputs;
    if (reads[i].output) fo.backward_reads.emplace_back(own_output_name);
    f.ops.push_back(std::move(fo));
  }
  if (auto v = validate(f); !v) return v.err();
  return f;
}

/// Empty when g has the nodes and edges of ref (names, kinds, protection, pairs; not the costs),
/// else the first difference.
inline std::string structure_difference(const graph& g, const graph& ref) {
  if (g.compute_count() != ref.compute_count() || g.data_count() != ref.data_count())
    return "the graph has " + std::to_string(g.compute_count()) + " compute and " +
           std::to_string(g.data_count()) + " data nodes, the model's " +
           std::to_string(ref.compute_count()) + " and " + std::to_string(ref.data_count());
  auto same = [](std::span<const int> a, std::span<const int> b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  };
  for (int d = 0; d < g.data_count(); ++d) {
    const auto &a = g.data(d), &b = ref.data(d);
    if (a.name != b.name || a.kind != b.kind || a.is_protected != b.is_protected ||
        g.gradient_of(d) != ref.gradient_of(d))
      return "data node " + data_label(g, d) + " is " + data_label(ref, d) + " (a " +
             std::string(to_string(b.kind)) + ") in the model's graph";
  }
  for (int c = 0; c < g.compute_count(); ++c) {
    const auto &a = g.compute(c), &b = ref.compute(c);
    if (a.name != b.name || a.kind != b.kind || g.backward_of(c) != ref.backward_of(c))
      return "compute node " + compute_label(g, c) + " is " + compute_label(ref, c) +
             " in the model's graph";
    if (!same(g.inputs(c), ref.inputs(c)) || !same(g.outputs(c), ref.outputs(c)))
      return "compute node " + compute_label(g, c) +
             " reads or writes other data nodes than in the model's graph (its inputs, or which "
             "of them its backward reads, differ)";
  }
  return {};
}

/// Where an op's nodes are in the graph.
struct op_nodes {
  int fwd = -1, bwd = -1, act = -1, grad = -1, phantom = -1;
  std::vector<int> in;       ///< data nodes of its inputs, in the op's order
  std::vector<int> in_grad;  ///< their gradients
};

/// The training graph of a model's structure (no costs) and where each op's nodes are in it.
struct model_nodes {
  graph g;
  std::vector<op_nodes> ops;  ///< in the model's order
};

template <class Model>
result<model_nodes> model_graph(Model& m, std::string name) {
  auto sk = skeleton(m, std::move(name));
  if (!sk) return sk.err();
  auto built = build_graph(*sk);
  if (!built) return built.err();
  model_nodes out{std::move(*built), std::vector<op_nodes>(m.ops.size())};
  const graph& g = out.g;
  const training_layout lay{g.loss()};
  std::unordered_map<std::string, int> position;  // op name -> its forward's index
  for (const auto& op : m.ops) position.emplace(op.name, g.find_compute("fwd " + op.name));
  for (std::size_t i = 0; i < out.ops.size(); ++i) {
    auto& n = out.ops[i];
    const int p = position.at(m.ops[i].name);
    n = {lay.forward(p),
         lay.backward(p),
         lay.activation(p),
         lay.gradient(p),
         lay.phantom(p),
         {},
         {}};
    for (const auto& in : m.ops[i].inputs) {
      const bool graph_input = in == graph_input_name;
      n.in.push_back(graph_input ? lay.input : lay.activation(position.at(in)));
      n.in_grad.push_back(graph_input ? lay.input_gradient : lay.gradient(position.at(in)));
    }
  }
  return out;
}

/// The nodes of an N-stage chain's ops in build_graph(chain) (training_layout).
inline std::vector<op_nodes> chain_op_nodes(int n) {
  const training_layout lay{n};
  std::vector<op_nodes> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    out[static_cast<std::size_t>(i)] = {lay.forward(i),
                                        lay.backward(i),
                                        lay.activation(i),
                                        lay.gradient(i),
                                        lay.phantom(i),
                                        {i == 0 ? lay.input : lay.activation(i - 1)},
                                        {i == 0 ? lay.input_gradient : lay.gradient(i - 1)}};
  return out;
}

}  // namespace remat::exec::detail
