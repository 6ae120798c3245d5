#pragma once
// JSON reading and writing of multi-chain problems (problem/multi_chain.hpp), the input of the
// multi_chain policy. Opt-in like io/json.hpp: needs nlohmann_json 3 (CMake target remat::json).
// The format: docs/json-format.md, "The multi-chain format".

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/core/result.hpp>
#include <remat/io/json.hpp>
#include <remat/problem/multi_chain.hpp>

namespace remat::io {

namespace detail::multi_chain_json {

using io::detail::field_spec;
using io::detail::invalid;
using json = nlohmann::json;

inline constexpr field_spec fields[] = {
    {"name", "a string"},
    {"lengths", "an array of integers >= 0, the forwards of each chain (at least one chain)"},
    {"forward_time", "u_F, the duration of every forward in seconds, a number >= 0"},
    {"backward_time", "u_B, the duration of every backward in seconds, a number >= 0"},
    {"loss_time", "u_L, the duration of the loss in seconds, a number >= 0"},
    {"slot_bytes", "the size of every activation and gradient in bytes, an integer > 0"},
    {"keep",
     "an array of booleans, one per chain: true keeps its input gradient to the end (optional; "
     "default none)"},
};

inline constexpr std::string_view article = "a multi-chain";
inline constexpr std::string_view shape =
    "a multi-chain is a JSON object {\"name\": ..., \"lengths\": [...], \"forward_time\": ..., "
    "\"backward_time\": ..., \"loss_time\": ..., \"slot_bytes\": ...}";

inline result<multi_chain> from_json(const json& j) {
  const std::string where = "multi-chain";
  try {
    if (!j.is_object()) return invalid(std::string(shape) + "; got " + io::detail::describe(j));
    if (auto e = io::detail::check_unknown_fields(j, where, fields, article)) return *e;
    multi_chain p;
    auto name = io::detail::read_name(j, where);
    if (!name) return name.err();
    p.name = std::move(*name);
    const auto lengths = j.find("lengths");
    if (lengths == j.end())
      return invalid(where + ": missing field \"lengths\" (" +
                     std::string(io::detail::spec_of(fields, "lengths").expect) + ")");
    if (!lengths->is_array())
      return invalid(where + ": \"lengths\" is " + io::detail::describe(*lengths) +
                     "; it must be " + std::string(io::detail::spec_of(fields, "lengths").expect));
    for (std::size_t i = 0; i < lengths->size(); ++i) {
      const json& v = (*lengths)[i];
      if (!v.is_number_integer() || v.get<std::int64_t>() < -(std::int64_t{1} << 30) ||
          v.get<std::int64_t>() > (std::int64_t{1} << 30))
        return invalid(where + ": lengths[" + std::to_string(i) + "] is " +
                       io::detail::describe(v) + "; a length is an integer >= 0");
      p.lengths.push_back(v.get<int>());
    }
    for (auto [field, out] :
         {std::pair{"forward_time", &p.forward_time}, std::pair{"backward_time", &p.backward_time},
          std::pair{"loss_time", &p.loss_time}}) {
      auto t = io::detail::read_seconds(j, where, io::detail::spec_of(fields, field));
      if (!t) return t.err();
      *out = *t;
    }
    auto slot = io::detail::read_bytes(j, where, io::detail::spec_of(fields, "slot_bytes"), true);
    if (!slot) return slot.err();
    p.slot_bytes = *slot;
    if (const auto keep = j.find("keep"); keep != j.end()) {
      if (!keep->is_array())
        return invalid(where + ": \"keep\" is " + io::detail::describe(*keep) + "; it must be " +
                       std::string(io::detail::spec_of(fields, "keep").expect));
      for (std::size_t i = 0; i < keep->size(); ++i) {
        if (!(*keep)[i].is_boolean())
          return invalid(where + ": keep[" + std::to_string(i) + "] is " +
                         io::detail::describe((*keep)[i]) + "; it must be true or false");
        p.keep.push_back((*keep)[i].get<bool>());
      }
    }
    if (auto v = validate(p); !v) return v.err();
    return p;
  } catch (const json::exception& e) {
    return invalid(where + " JSON could not be read: " + e.what());
  }
}

}  // namespace detail::multi_chain_json

/// Reads a multi-chain problem from parsed JSON, then checks it with remat::validate.
inline result<multi_chain> multi_chain_from_json(const nlohmann::json& j) {
  return detail::multi_chain_json::from_json(j);
}

/// Parses JSON text holding a multi-chain problem.
inline result<multi_chain> parse_multi_chain(std::string_view text) {
  auto j = detail::parse_text(text, "multi-chain text", detail::multi_chain_json::shape);
  if (!j) return j.err();
  return multi_chain_from_json(*j);
}

/// Reads a multi-chain file (at most max_file_bytes); every error message names the path.
inline result<multi_chain> load_multi_chain(const std::filesystem::path& path) {
  const std::string where = "multi-chain file '" + path.string() + "'";
  auto text = detail::read_text_file(path, where, "a multi-chain");
  if (!text) return text.err();
  auto j = detail::parse_text(*text, where, detail::multi_chain_json::shape);
  if (!j) return j.err();
  auto p = multi_chain_from_json(*j);
  if (!p) return detail::with_prefix(where, p.err());
  return p;
}

/// The problem as JSON, every field written (keep only when some chain keeps its gradient).
inline nlohmann::json to_json(const multi_chain& p) {
  nlohmann::json out = {{"name", p.name},
                        {"lengths", p.lengths},
                        {"forward_time", p.forward_time},
                        {"backward_time", p.backward_time},
                        {"loss_time", p.loss_time},
                        {"slot_bytes", p.slot_bytes}};
  if (!p.keep.empty()) {
    nlohmann::json keep = nlohmann::json::array();
    for (bool b : p.keep) keep.push_back(b);
    out["keep"] = std::move(keep);
  }
  return out;
}

}  // namespace remat::io
