#pragma once
// The toy DAG models of the graph executor's and the profiler's tests: ops named by a spec (name,
// inputs, whether it sums them) over toy_graph_layers.hpp's nodes, sizes and temporaries varying
// with a seed, the last op the loss; four shapes (a diamond, a residual net, a node with three
// readers, a U-Net) and their input.

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <remat/exec/concepts/model.hpp>
#include <remat/exec/host_backend.hpp>

#include "toy_graph_layers.hpp"

namespace toy::dags {

using model = remat::exec::dag_model<std::vector<node>>;
constexpr int input_floats = 6;

struct op_spec {
  std::string name;
  std::vector<std::string> inputs;
  bool sum = false;
};

/// A toy DAG model; sizes, contexts and temporaries vary per op with the seed; the last op is
/// the loss. A sum node's inputs are as wide as its output.
inline model make_model(const std::vector<op_spec>& spec, unsigned seed, bool noisy) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> size(2, 24), small(0, 9);
  model m;
  std::vector<int> width;
  auto width_of = [&](const std::string& in) {
    if (in == "input") return input_floats;
    for (std::size_t j = 0; j < m.ops.size(); ++j)
      if (m.ops[j].name == in) return width[j];
    return 0;
  };
  for (std::size_t i = 0; i < spec.size(); ++i) {
    node n;
    n.n_out = size(rng);
    n.extra = small(rng);
    n.tmp_f = small(rng);
    n.tmp_b = small(rng);
    n.w = 0.3f + 0.1f * static_cast<float>(i % 5);
    n.noisy = noisy && i % 2 == 1;
    n.rng.seed(seed * 31 + static_cast<unsigned>(i));
    n.label = spec[i].name;
    n.sum = spec[i].sum;
    n.is_loss = i + 1 == spec.size();
    for (const auto& in : spec[i].inputs) n.widths.push_back(width_of(in));
    if (n.sum) n.n_out = *std::max_element(n.widths.begin(), n.widths.end());
    width.push_back(n.is_loss ? 1 : n.n_out);
    m.layers.push_back(std::move(n));
    m.ops.push_back({spec[i].name, spec[i].inputs});
  }
  return m;
}

inline const std::vector<op_spec> diamond = {
    {"a", {"input"}}, {"b", {"a"}}, {"c", {"a"}}, {"d", {"b", "c"}}, {"loss", {"d"}}};
inline const std::vector<op_spec> residual = {{"x", {"input"}},  {"f1", {"x"}},
                                              {"f2", {"f1"}},    {"add", {"x", "f2"}, true},
                                              {"f3", {"add"}},   {"add2", {"add", "f3"}, true},
                                              {"loss", {"add2"}}};
/// "a" has three readers (q, k, v): its gradient sums 3 contributions; the input has two.
inline const std::vector<op_spec> three = {{"a", {"input"}},
                                           {"q", {"a"}},
                                           {"k", {"a"}},
                                           {"v", {"a"}},
                                           {"mix", {"q", "k", "v"}},
                                           {"add", {"mix", "input"}, true},
                                           {"loss", {"add"}}};

/// A U-Net-like net: a down path d1 .. d3, a bottom, an up path whose joins add each level's
/// down output (skips across the whole depth), the loss.
inline const std::vector<op_spec> unet = {{"d1", {"input"}},  {"d2", {"d1"}},
                                          {"d3", {"d2"}},     {"bottom", {"d3"}},
                                          {"u3", {"bottom"}}, {"j3", {"u3", "d3"}, true},
                                          {"u2", {"j3"}},     {"j2", {"u2", "d2"}, true},
                                          {"u1", {"j2"}},     {"j1", {"u1", "d1"}, true},
                                          {"out", {"j1"}},    {"loss", {"out"}}};

inline tensor make_input(remat::exec::host_backend& b) {
  auto x = tensor::make(b, input_floats);
  for (int i = 0; i < input_floats; ++i) x[i] = 0.15f * static_cast<float>(i % 5) - 0.3f;
  return x;
}

}  // namespace toy::dags
