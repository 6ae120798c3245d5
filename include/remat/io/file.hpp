#pragma once
// Writing an output file (a trace, a picture) with an error that says which file and why.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include <remat/core/result.hpp>

namespace remat::io {

/// Writes text to a file (replacing it); the error says which file and why, e.g. a missing
/// folder or no permission. Returns the bytes written.
inline result<std::uintmax_t> write_text_file(const std::filesystem::path& path,
                                              std::string_view text) {
  auto fail = [&](const std::string& why) {
    return error{status::invalid_problem, "cannot write '" + path.string() + "': " + why, {}};
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail("it is a directory; give a file name");
  const auto parent = path.parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    return fail("the folder '" + parent.string() + "' does not exist");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fail("it cannot be opened for writing (permissions?)");
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return fail("write error (disk full?)");
  return static_cast<std::uintmax_t>(text.size());
}

}  // namespace remat::io
