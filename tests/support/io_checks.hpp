#pragma once
// Helpers shared by the JSON tests (tests/io/).

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include <remat/core/result.hpp>

namespace remat::testing {

/// The whole content of file p ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// r failed with invalid_problem and its message contains every part (says which is missing).
template <class T>
bool says(const result<T>& r, std::initializer_list<std::string_view> parts) {
  if (r.ok() || r.code() != status::invalid_problem) {
    MESSAGE("expected invalid_problem, got " << (r.ok() ? std::string("ok") : r.message()));
    return false;
  }
  for (auto p : parts)
    if (r.message().find(p) == std::string::npos) {
      MESSAGE("message '" << r.message() << "' lacks '" << p << "'");
      return false;
    }
  return true;
}

/// A file name in the temporary directory, unique to this process (builds may run side by side).
inline std::filesystem::path scratch(std::string_view prefix, const std::string& name) {
  static const std::string tag = std::to_string(std::random_device{}());
  return std::filesystem::temp_directory_path() / (std::string(prefix) + tag + "_" + name);
}

}  // namespace remat::testing
