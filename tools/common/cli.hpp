#pragma once
// What the command-line tools (remat-plan, remat-zoo) share to read their arguments and write
// their files.

#include <charconv>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#ifndef _WIN32
#include <unistd.h>
#endif

#include <remat/io/file.hpp>

namespace remat_cli {

/// The whole of s as an integer of type Int, or nothing (empty, trailing text, out of range).
template <class Int>
std::optional<Int> parse_int(std::string_view s) {
  Int v{};
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

/// Why `path` cannot be written (a folder, in a folder that does not exist or that this user may
/// not write in), checked before a long solve whose output would be lost; nullopt when it looks
/// writable. Creates nothing.
inline std::optional<std::string> unwritable(const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec)) return "cannot write '" + path + "': it is a folder";
  const auto parent = p.parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    return "cannot write '" + path + "': the folder '" + parent.string() + "' does not exist";
#ifndef _WIN32
  if (::access(parent.empty() ? "." : parent.c_str(), W_OK) != 0)
    return "cannot write '" + path + "': no permission to write in '" +
           (parent.empty() ? std::string(".") : parent.string()) + "'";
#endif
  return std::nullopt;
}

/// Writes `text` to `path`, replacing the file; why it could not, else nullopt.
inline std::optional<std::string> write_file(const std::string& path, std::string_view text) {
  if (auto why = unwritable(path)) return why;
  if (auto written = remat::io::write_text_file(path, text); !written) return written.message();
  return std::nullopt;
}

}  // namespace remat_cli
