#pragma once
// The short random chain of the sweep's and the SVG pictures' tests: 5 to 7 stages of bytes to a
// MiB, no size zero, a fifth of the times zero.

#include <cstdint>
#include <string>
#include <utility>

#include <remat/problem/chain.hpp>

#include "support/random_chain.hpp"

namespace remat::testing {

inline chain small_chain(std::uint64_t seed, std::string name = "random") {
  chain_generator gen(seed);
  return gen({.min_length = 5,
              .max_length = 7,
              .max_bytes = 1 << 20,
              .p_zero_size = 0,
              .p_zero_time = 0.2},
             std::move(name));
}

}  // namespace remat::testing
