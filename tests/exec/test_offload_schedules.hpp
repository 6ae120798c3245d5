#pragma once
// Hand-written offloading schedules for the executor's tests (host and CUDA): a policy's
// schedule with its kept plain activations moved to the host and back.

#include <cstddef>
#include <vector>

#include <remat/schedule/schedule.hpp>

namespace offload_test {

/// `s` with every plain activation a kept input (of F_ck, F_all or B) offloaded right after
/// the op that keeps it, and brought back (W, P, W) just before the next op that reads it.
inline remat::schedule with_offloads(const remat::schedule& s, int n) {
  enum form { none, plain, full };
  std::vector<form> held(static_cast<std::size_t>(n + 1), none);
  std::vector<char> away(static_cast<std::size_t>(n + 1), 0);
  held[0] = plain;
  remat::schedule out;
  auto at = [](int k) { return static_cast<std::size_t>(k); };
  auto bring_back = [&](int k) {
    if (!away[at(k)]) return;
    using remat::instruction;
    out.ops.insert(out.ops.end(), {instruction::wait(k), instruction::prefetch(k), instruction::wait(k)});
    away[at(k)] = 0;
  };
  for (const remat::instruction& ins : s.ops) {
    const int l = ins.index;
    bring_back(l - 1);
    out.ops.push_back(ins);
    if (ins.kind == remat::op_kind::forward) {
      held[at(l)] = ins.mode == remat::forward_mode::save_all ? full : plain;
      if (ins.mode == remat::forward_mode::no_save) held[at(l - 1)] = none;
    } else {
      held[at(l)] = none;
      if (held[at(l - 1)] == plain) held[at(l - 1)] = none;
    }
    if (held[at(l - 1)] == plain) {
      out.ops.push_back(remat::instruction::offload(l - 1));
      away[at(l - 1)] = 1;
    }
  }
  return out;
}

inline int transfers_in(const remat::schedule& s) {
  int t = 0;
  for (const auto& i : s.ops) t += i.is_compute() ? 0 : 1;
  return t;
}

}  // namespace offload_test
