#pragma once
// Chain programs in the policy tests: chain ops (the chain notation, schedule/notation.hpp)
// lowered to programs over the chain's training graph, and programs printed back in the
// notation, so that expected schedules read as the thesis writes them.

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::test {

/// The program of chain ops over chain c; they must lower (the chain notation's rules).
inline schedule program(const chain& c, std::span<const chain_op> ops) {
  auto s = lower(c.length(), ops);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? std::string() : s.err().message));
  return std::move(*s);
}

/// The program of a text in the chain notation ("F1_ck F2_none ... B1") over chain c.
inline schedule program(const chain& c, std::string_view text) {
  auto s = parse_chain_program(c.length(), text);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? std::string() : s.err().message));
  return std::move(*s);
}

/// The training graph of chain c (build it once per chain when replaying many programs).
inline graph graph_of(const chain& c) {
  auto g = build_graph(c);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? std::string() : g.err().message));
  return std::move(*g);
}

/// A chain policy's program in the chain notation; a program that is not chain-shaped prints
/// as such (and so never equals an expected chain text).
inline std::string chain_text(const chain& c, const schedule& s) {
  const auto t = to_chain_string(c.length(), s);
  return t ? *t : "<not chain-shaped: " + to_string(s) + ">";
}

/// A chain policy's program as chain ops; it must be chain-shaped.
inline std::vector<chain_op> chain_ops(const chain& c, const schedule& s) {
  auto ops = to_chain_ops(c.length(), s);
  REQUIRE_MESSAGE(ops.has_value(), "not chain-shaped: ", to_string(s));
  return std::move(*ops);
}

/// How many forwards (F_l of any mode) and backwards a chain program runs.
inline int count_forwards(const std::vector<chain_op>& ops) {
  return static_cast<int>(std::count_if(
      ops.begin(), ops.end(), [](const chain_op& i) { return i.kind == chain_op_kind::forward; }));
}
inline int count_backwards(const std::vector<chain_op>& ops) {
  return static_cast<int>(std::count_if(
      ops.begin(), ops.end(), [](const chain_op& i) { return i.kind == chain_op_kind::backward; }));
}

}  // namespace remat::test
