#pragma once
// A small Llama-like decoder (width 256, 4 heads, vocabulary 1000, 64 tokens, batch 2) with its
// weights, for the tests of the planners of parameters: optionally with the head reading the
// embedding's weight (tied, as GPT-2's).

#include <vector>

#include <remat/problem/builder.hpp>
#include <remat/zoo/llama.hpp>

namespace remat::testing {

inline forward_dag small_llama(int layers, bool tied) {
  forward_dag f = zoo::llama({.layers = layers,
                              .width = 256,
                              .heads = 4,
                              .ffn = 688,
                              .vocab = 1000,
                              .sequence = 64,
                              .batch = 2},
                             zoo::devices::rtx3060())
                      .value();
  if (tied) {
    std::erase_if(f.parameters, [](const parameter& w) { return w.name == "lm_head.weight"; });
    for (auto& op : f.ops)
      if (op.name == "lm_head") op.parameters = {"embed_tokens.weight"};
  }
  return f;
}

}  // namespace remat::testing
