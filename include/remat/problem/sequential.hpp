#pragma once
// A forward DAG as a chain of its sequential pieces: the DAG is cut wherever one tensor alone
// crosses (the output of the op before the cut, read by nothing older), and each piece becomes a
// chain stage with its ops' times, the bytes their backwards keep and the weights they read. A
// residual block becomes one stage; a plain sequence of ops, one stage per op. The pipeline
// planners take chains (docs/pipeline.md): this is how a zoo model or a user's DAG reaches them.
// docs/pipeline.md, "Chains from DAGs".

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>

namespace remat {

/// The chain of f's sequential pieces, in the ops' order (builder's, the listing order where the
/// dependencies allow). A stage's times are the sums of its ops'; its output is its last op's;
/// its saved bytes are what its ops' backwards read among the ops of the stage (an op's output
/// another op's backward, or its own, reads) and their phantoms, at least its output; its
/// overheads are the largest of its ops'; its weight_bytes the sizes of the parameters its ops
/// read, each once. The last op (the loss) ends the last stage.
inline result<chain> sequential_chain(const forward_dag& f) {
  if (auto v = validate(f); !v) return v.err();
  const std::size_t n = f.ops.size();
  std::map<std::string, std::size_t, std::less<>> index;
  for (std::size_t i = 0; i < n; ++i) index.emplace(f.ops[i].name, i);
  std::vector<std::vector<std::size_t>> reads(n);
  std::vector<char> reads_input(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (const std::string& in : f.ops[i].inputs) {
      if (in == detail::graph_input_name)
        reads_input[i] = 1;
      else
        reads[i].push_back(index.at(in));
    }
  const detail::op_order ord = detail::sort_ops(f, reads);
  std::vector<std::size_t> pos(n);
  for (std::size_t p = 0; p < n; ++p) pos[ord.order[p]] = p;
  // The last position reading each op's output, and the input.
  std::vector<std::size_t> last_use(n);
  std::size_t input_last = 0;
  for (std::size_t i = 0; i < n; ++i) last_use[i] = pos[i];
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j : reads[i]) last_use[j] = std::max(last_use[j], pos[i]);
    if (reads_input[i]) input_last = std::max(input_last, pos[i]);
  }
  // Whether a backward reads each op's output.
  std::vector<char> kept(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (const std::string& r : f.ops[i].backward_reads) {
      if (r == detail::own_output_name)
        kept[i] = 1;
      else if (auto it = index.find(r); it != index.end())
        kept[it->second] = 1;
    }
  std::map<std::string, bytes, std::less<>> param_size;
  for (const parameter& p : f.parameters) param_size.emplace(p.name, p.size);

  chain c;
  c.name = f.name;
  c.input_bytes = f.input_bytes;
  std::size_t begin = 0;
  std::size_t crossing = 0;  // the last position read by an op before the current one
  for (std::size_t p = 0; p < n; ++p) {
    const bool cut = p + 1 == n || (crossing <= p && input_last <= p);
    crossing = std::max(crossing, last_use[ord.order[p]]);
    if (!cut) continue;
    stage st;
    const forward_op& head = f.ops[ord.order[begin]];
    const forward_op& tail = f.ops[ord.order[p]];
    st.name = begin == p ? head.name : head.name + " .. " + tail.name;
    st.output_bytes = tail.output_bytes;
    std::set<std::string, std::less<>> weights;
    for (std::size_t q = begin; q <= p; ++q) {
      const forward_op& op = f.ops[ord.order[q]];
      st.forward_time += op.forward_time;
      st.backward_time += op.backward_time;
      st.saved_bytes += op.phantom_bytes + (kept[ord.order[q]] ? op.output_bytes : 0);
      st.forward_overhead_bytes = std::max(st.forward_overhead_bytes, op.forward_overhead_bytes);
      st.backward_overhead_bytes = std::max(st.backward_overhead_bytes, op.backward_overhead_bytes);
      for (const std::string& w : op.parameters)
        if (weights.insert(w).second)
          if (auto it = param_size.find(w); it != param_size.end()) st.weight_bytes += it->second;
    }
    st.saved_bytes = std::max(st.saved_bytes, st.output_bytes);
    c.stages.push_back(std::move(st));
    begin = p + 1;
  }
  if (auto v = validate(c); !v)
    return error{status::invalid_problem,
                 "forward DAG '" + f.name + "' as a chain of its sequential pieces: " + v.message(),
                 {}};
  return c;
}

}  // namespace remat
