#pragma once
// FUZZ_CHECK(cond, what): a property of a fuzz target. When it does not hold, the target prints
// the property and what it saw, then aborts, so that libFuzzer or our driver (fuzz/driver.cpp)
// keeps the input as a crash reproducer.

#include <cstdio>
#include <cstdlib>
#include <string>

namespace remat::fuzz {

[[noreturn]] inline void fail(const char* cond, const std::string& what, const char* file,
                              int line) {
  std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n  %s\n", file, line, cond, what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace remat::fuzz

#define FUZZ_CHECK(cond, what)                                           \
  do {                                                                   \
    if (!(cond)) ::remat::fuzz::fail(#cond, (what), __FILE__, __LINE__); \
  } while (false)
