#pragma once
// The command-line tools' option parser: a table of options, each with what it does with its
// value, read from argv as "--name VALUE", "--name=VALUE" or a flag; an unknown option is named
// with the closest known one ("did you mean"). And the readers of the values the tools share:
// byte counts with binary suffixes ("1.5GiB") and bandwidths ("12e9", "12GiB/s", "inf").
//
// Weighed against CLI11 (Debian's libcli11-dev, 2.3): it would replace the loop below but not the
// value readers nor the messages users and tests rely on ("did you mean", which it lacks), and
// its single header costs each tool's file about 2 s of compile time on CI's machine.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <remat/core/closest_name.hpp>
#include <remat/core/units.hpp>

#include "cli.hpp"

namespace remat_cli {

/// One option of a command line.
struct option {
  std::string_view name;        ///< "--budget"
  bool takes_value = true;      ///< false: a flag
  std::string_view alias = {};  ///< "-o", or none
  /// Takes the value (empty for a flag); returns why it is refused, if it is.
  std::function<std::optional<std::string>(const std::string& value)> apply;
};

/// Reads args (the words after the program name and any the caller took first) with `options`.
/// Returns the first usage error: an argument that is not an option (`not_an_option` says what
/// to do), an unknown option (with the closest known one and "run '<program> --help'"), a flag
/// given a value, an option without one, or what its apply() refused.
inline std::optional<std::string> parse_options(std::span<const std::string_view> args,
                                                std::span<const option> options,
                                                std::string_view program,
                                                std::string_view not_an_option) {
  std::vector<std::string_view> names;
  for (const option& o : options) names.push_back(o.name);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view name = args[i];
    std::optional<std::string_view> value;
    const option* found = nullptr;
    for (const option& o : options)
      if (!o.alias.empty() && o.alias == name) found = &o;
    if (!found) {
      if (name.size() < 3 || name.substr(0, 2) != "--")
        return "unexpected argument '" + std::string(name) + "'; " + std::string(not_an_option);
      if (const auto eq = name.find('='); eq != std::string_view::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      for (const option& o : options)
        if (o.name == name) found = &o;
    }
    if (!found) {
      const auto guess = remat::closest_name(name, names);
      return "unknown option '" + std::string(name) + "'" +
             (guess ? " (did you mean " + std::string(*guess) + "?)" : std::string()) + "; run '" +
             std::string(program) + " --help' for the options";
    }
    if (!found->takes_value) {
      if (value) return "option " + std::string(found->name) + " takes no value";
      if (auto why = found->apply(std::string())) return why;
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size() || args[i + 1].substr(0, 2) == "--")
        return "option " +
               std::string(found->alias.empty() || args[i] != found->alias ? found->name
                                                                           : found->alias) +
               " needs a value";
      value = args[++i];
    }
    if (auto why = found->apply(std::string(*value))) return why;
  }
  return std::nullopt;
}

/// The text in lower case.
inline std::string lowercase(std::string_view s) {
  std::string low(s);
  for (auto& ch : low) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return low;
}

/// log2 of a binary unit in lower case: "" or "b" 0, "kib"/"k" 10, ... "tib"/"t" 40; -1 if none.
inline int binary_shift(std::string_view low) {
  if (low.empty() || low == "b") return 0;
  if (low == "kib" || low == "k") return 10;
  if (low == "mib" || low == "m") return 20;
  if (low == "gib" || low == "g") return 30;
  if (low == "tib" || low == "t") return 40;
  return -1;
}

/// BYTES: digits, or a decimal number followed by a binary suffix (KiB = 2^10 ... TiB = 2^40);
/// `why` says what is wrong otherwise.
inline std::optional<remat::bytes> parse_bytes(std::string_view s, std::string& why) {
  std::size_t k = 0;
  while (k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '.')) ++k;
  const std::string_view number = s.substr(0, k);
  std::string_view suffix = s.substr(k);
  if (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  const std::string low = lowercase(suffix);
  const int shift = binary_shift(low);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".") {
    why = "'" + std::string(s) +
          "' is not a byte count; give bytes (e.g. 1073741824) or a number "
          "with a suffix KiB, MiB, GiB, TiB (e.g. 6GiB, 512MiB, 1.5GiB)";
    return std::nullopt;
  }
  if (shift < 0) {
    why = "'" + std::string(s) + "' has an unknown unit '" + std::string(suffix) + "'";
    if (low == "kb" || low == "mb" || low == "gb" || low == "tb")
      why += " (ambiguous: powers of 1000 or 1024?)";
    why += "; use KiB, MiB, GiB or TiB (powers of 1024), or plain bytes";
    return std::nullopt;
  }
  constexpr remat::bytes limit = remat::unlimited_bytes;
  if (number.find('.') == std::string_view::npos) {
    const auto v = parse_int<remat::bytes>(number);
    if (!v || *v > (limit >> shift)) {
      why = "'" + std::string(s) + "' is too large for a budget";
      return std::nullopt;
    }
    return *v << shift;
  }
  if (shift == 0) {
    why = "'" + std::string(s) +
          "': a byte count is a whole number; use a suffix for fractions "
          "(e.g. 1.5GiB)";
    return std::nullopt;
  }
  double v = 0;
  const auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || p != number.data() + number.size() || !std::isfinite(v)) {
    why = "'" + std::string(s) + "' is not a number";
    return std::nullopt;
  }
  const double b = std::round(std::ldexp(v, shift));
  if (b > static_cast<double>(limit)) {
    why = "'" + std::string(s) + "' is too large for a budget";
    return std::nullopt;
  }
  return static_cast<remat::bytes>(b);
}

/// Bytes per second: a number ("12e9") or one with a binary suffix ("12GiB"), optionally
/// followed by "/s"; 0 (no link) and "inf" (instantaneous) are read too. NaN and negative
/// numbers are refused, with `why`.
inline std::optional<double> parse_bandwidth(std::string_view s, std::string& why) {
  std::string_view t = s;
  if (t.size() >= 2 && t.substr(t.size() - 2) == "/s") t.remove_suffix(2);
  double v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  const std::string expect =
      "; give bytes per second, a number (e.g. 12e9) or one with a suffix KiB, MiB, GiB, TiB "
      "(e.g. 12GiB/s)";
  if (ec != std::errc() || p == t.data()) {
    why = "'" + std::string(s) + "' is not a bandwidth" + expect;
    return std::nullopt;
  }
  std::string_view suffix(p, static_cast<std::size_t>(t.data() + t.size() - p));
  if (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  const std::string low = lowercase(suffix);
  const int shift = binary_shift(low);
  if (shift < 0) {
    why = "'" + std::string(s) + "' has an unknown unit '" + std::string(suffix) + "'" + expect;
    return std::nullopt;
  }
  if (std::isnan(v)) {
    why = "'" + std::string(s) + "' is not a number" + expect;
    return std::nullopt;
  }
  if (v < 0) {
    why = "'" + std::string(s) + "' is negative" + expect;
    return std::nullopt;
  }
  if (v == 0) return 0.0;  // also "-0"
  return std::ldexp(v, shift);
}

/// The whole of s as a number (strtod's forms: 1e12, 0.1), or nothing.
inline std::optional<double> parse_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

}  // namespace remat_cli
