#pragma once
// JSON reading and writing of chains and schedules (a program's text form, or the chain notation
// for a chain's program). Opt-in: needs nlohmann_json 3 (CMake target remat::json);
// <remat/remat.hpp> never includes it. Loading checks the file's size, its fields (an unknown one
// is named with the closest known field) and the chain (validate()). The format:
// docs/json-format.md; the decisions: docs/io.md.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/core/closest_name.hpp>
#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::io {

/// The most bytes load_chain and load_graph read from a file: 256 MiB.
inline constexpr std::uintmax_t max_file_bytes = std::uintmax_t{256} << 20;

namespace detail {

using json = nlohmann::json;

inline error invalid(std::string msg) { return error{status::invalid_problem, std::move(msg), {}}; }

/// The text of the file at `path`, at most `cap` bytes (max_file_bytes). `where` names the file in
/// messages ("chain file 'x.json'"), `what` what it should hold ("a chain"). Every message starts
/// with "cannot read <where>: ".
inline result<std::string> read_text_file(const std::filesystem::path& path,
                                          const std::string& where, std::string_view what,
                                          std::uintmax_t cap = max_file_bytes) {
  const std::string cannot = "cannot read " + where + ": ";
  const std::string mib = std::to_string(cap >> 20) + " MiB";
  const std::string limit =
      cap % (std::uintmax_t{1} << 20) == 0 && cap > 0
          ? "the " + mib + " " + std::string(what) + " file may have"
          : "the " + std::to_string(cap) + " bytes " + std::string(what) + " file may have";
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return invalid(cannot + ec.message());
  if (!std::filesystem::exists(st)) return invalid(cannot + "no such file");
  if (std::filesystem::is_directory(st))
    return invalid(cannot + "it is a directory, not a JSON file");
  const bool regular = std::filesystem::is_regular_file(st);
  if (regular) {
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > cap)
      return invalid(cannot + "it has " + std::to_string(size) + " bytes, larger than " + limit);
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return invalid(cannot + (err ? std::string(std::strerror(err)) : std::string("open failed")));
  }
  // Read in blocks, at most one block past the cap: a stream may be endless (/dev/zero). The
  // blocks are left uninitialised and joined once at the end, so an endless stream costs one
  // pass over the cap's bytes.
  constexpr std::size_t block = std::size_t{1} << 20;
  std::vector<std::pair<std::unique_ptr<char[]>, std::size_t>> blocks;
  std::uintmax_t total = 0;
  while (in) {
    auto buf = std::make_unique_for_overwrite<char[]>(block);
    in.read(buf.get(), static_cast<std::streamsize>(block));
    const auto got = static_cast<std::size_t>(in.gcount());
    total += got;
    if (total > cap)
      return invalid(cannot + (regular ? "it grew while being read to more than " + limit
                                       : "it is not a regular file and gave more than " + limit));
    if (got > 0) blocks.emplace_back(std::move(buf), got);
  }
  if (in.bad()) return invalid(cannot + "read error");
  std::string text;
  text.reserve(static_cast<std::size_t>(total));
  for (const auto& [buf, n] : blocks) text.append(buf.get(), n);
  return text;
}

/// A field of an object in the format: its name and what a valid value looks like.
struct field_spec {
  std::string_view name;
  std::string_view expect;
};

inline constexpr field_spec chain_fields[] = {
    {"name", "a string"},
    {"input_bytes", "the size of the chain input in bytes, an integer >= 0"},
    {"stages", "an array of stage objects, the last one being the loss"},
};

inline constexpr field_spec stage_fields[] = {
    {"name", "a string"},
    {"forward_time", "the forward's duration in seconds, a number >= 0"},
    {"backward_time", "the backward's duration in seconds, a number >= 0"},
    {"output_bytes", "the size of the stage's output in bytes, an integer >= 0"},
    {"saved_bytes",
     "the bytes the backward needs, the output included, an integer >= output_bytes"},
    {"forward_overhead_bytes",
     "temporary bytes while the forward runs, an integer >= 0 (default 0)"},
    {"backward_overhead_bytes",
     "temporary bytes while the backward runs, an integer >= 0 (default 0)"},
    {"forward_save_overhead_bytes",
     "temporary bytes while the forward runs keeping what the backward needs (F_all), an "
     "integer >= 0 (default: forward_overhead_bytes)"},
    {"options",
     "an array of option objects, other ways to run the stage's F_all and B (a cost set; default "
     "none)"},
    {"control_flow",
     "true when the stage holds control flow (branches, loops: its ops are known only at run "
     "time), which no static plan may hold; mixed_mode runs it dynamically (default false)"},
    {"weight_bytes",
     "the bytes of the stage's parameters (one copy), an integer >= 0, used by the pipeline "
     "planners (default 0)"},
};

inline constexpr field_spec option_fields[] = {
    {"forward_time", "the forward's duration in seconds, a number >= 0"},
    {"backward_time", "the backward's duration in seconds, a number >= 0"},
    {"saved_bytes",
     "the bytes the forward keeps for the backward, the output included, an integer"},
    {"forward_overhead_bytes",
     "temporary bytes while the forward runs, an integer >= 0 (default 0)"},
    {"backward_overhead_bytes",
     "temporary bytes while the backward runs, an integer >= 0 (default 0)"},
};

template <std::size_t N>
const field_spec& spec_of(const field_spec (&specs)[N], std::string_view name) {
  for (const auto& f : specs)
    if (f.name == name) return f;
  return specs[0];  // unreachable: callers ask only for listed names
}

/// A short description of a JSON value for error messages. Containers are not dumped (their
/// dump is recursive and could be huge); strings are cut.
inline std::string describe(const json& v) {
  auto scalar = [&] {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
  };
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean (" + scalar() + ")";
    case json::value_t::string:
      return "a string (" + scalar() + ")";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer (" + scalar() + ")";
    case json::value_t::number_float:
      return "a floating-point number (" + scalar() + ")";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::binary:
      return "binary data";
    case json::value_t::discarded:
      return "a discarded value";
  }
  return "an unknown value";
}

/// Rejects fields that are not in `specs`, naming the field, the closest known one, and the
/// list of known fields.
template <std::size_t N>
std::optional<error> check_unknown_fields(const json& obj, const std::string& where,
                                          const field_spec (&specs)[N], std::string_view what) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (std::any_of(std::begin(specs), std::end(specs),
                    [&](const field_spec& f) { return f.name == key; }))
      continue;
    std::string msg = where + ": unknown field \"" + key + "\"";
    std::string_view names[N];
    for (std::size_t i = 0; i < N; ++i) names[i] = specs[i].name;
    if (const auto best = closest_name(key, names))
      msg += " (did you mean \"" + std::string(*best) + "\"?)";
    msg += "; " + std::string(what) + " has the fields";
    for (std::size_t i = 0; i < N; ++i) msg += (i ? ", " : " ") + std::string(specs[i].name);
    return invalid(std::move(msg));
  }
  return std::nullopt;
}

/// A byte count: a JSON integer that fits in bytes. Range (>= 0, <= 2^52) is left to validate().
inline result<bytes> read_bytes(const json& obj, const std::string& where, const field_spec& f,
                                bool required) {
  const auto it = obj.find(f.name);
  if (it == obj.end()) {
    if (!required) return bytes{0};
    return invalid(where + ": missing field \"" + std::string(f.name) + "\" (" +
                   std::string(f.expect) + ")");
  }
  const json& v = *it;
  const std::string field = where + ": \"" + std::string(f.name) + "\" is ";
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<std::int64_t>();
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<bytes>::max()))
      return invalid(field + std::to_string(u) + ", too large for a byte count (at most 2^52)");
    return static_cast<bytes>(u);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    std::string msg = field + describe(v) +
                      "; byte counts must be JSON integers (no decimal point "
                      "or exponent)";
    if (std::isfinite(d) && std::abs(d) < 9.0e15)
      msg += ": write " + std::to_string(static_cast<long long>(std::llround(d)));
    return invalid(std::move(msg));
  }
  return invalid(field + describe(v) + "; it must be " + std::string(f.expect) +
                 (v.is_string() ? ", without quotes or units" : ""));
}

/// A duration in seconds: any JSON number. Sign and finiteness are left to validate().
inline result<seconds> read_seconds(const json& obj, const std::string& where,
                                    const field_spec& f) {
  const auto it = obj.find(f.name);
  if (it == obj.end())
    return invalid(where + ": missing field \"" + std::string(f.name) + "\" (" +
                   std::string(f.expect) + ")");
  if (!it->is_number())
    return invalid(where + ": \"" + std::string(f.name) + "\" is " + describe(*it) +
                   "; it must be " + std::string(f.expect) +
                   (it->is_string() ? ", without quotes or units" : ""));
  return it->get<double>();
}

inline result<std::string> read_name(const json& obj, const std::string& where) {
  const auto it = obj.find("name");
  if (it == obj.end()) return std::string();
  if (!it->is_string())
    return invalid(where + ": \"name\" is " + describe(*it) + "; it must be a string");
  return it->get<std::string>();
}

inline result<stage> stage_from_json(const json& j, std::size_t i) {
  const int l = static_cast<int>(i) + 1;
  std::string where = "stage " + std::to_string(l) + " at stages[" + std::to_string(i) + "]";
  if (!j.is_object())
    return invalid(where + " is " + describe(j) +
                   "; each stage must be an object with the fields forward_time, backward_time, "
                   "output_bytes, saved_bytes (and optionally name, forward_overhead_bytes, "
                   "backward_overhead_bytes)");
  auto name = read_name(j, where);
  if (!name) return name.err();
  stage s;
  s.name = std::move(*name);
  if (!s.name.empty())
    where =
        "stage " + std::to_string(l) + " ('" + s.name + "') at stages[" + std::to_string(i) + "]";
  if (auto e = check_unknown_fields(j, where, stage_fields, "a stage")) return *e;
  auto time = [&](seconds& out, std::string_view field) -> std::optional<error> {
    auto v = read_seconds(j, where, spec_of(stage_fields, field));
    if (!v) return v.err();
    out = *v;
    return std::nullopt;
  };
  auto size = [&](bytes& out, std::string_view field, bool required) -> std::optional<error> {
    auto v = read_bytes(j, where, spec_of(stage_fields, field), required);
    if (!v) return v.err();
    out = *v;
    return std::nullopt;
  };
  if (auto e = time(s.forward_time, "forward_time")) return *e;
  if (auto e = time(s.backward_time, "backward_time")) return *e;
  if (auto e = size(s.output_bytes, "output_bytes", true)) return *e;
  if (auto e = size(s.saved_bytes, "saved_bytes", true)) return *e;
  if (auto e = size(s.forward_overhead_bytes, "forward_overhead_bytes", false)) return *e;
  if (auto e = size(s.backward_overhead_bytes, "backward_overhead_bytes", false)) return *e;
  if (auto e = size(s.weight_bytes, "weight_bytes", false)) return *e;
  if (j.contains("forward_save_overhead_bytes")) {
    bytes v = 0;
    if (auto e = size(v, "forward_save_overhead_bytes", true)) return *e;
    s.forward_save_overhead_bytes = v;
  }
  if (const auto cf = j.find("control_flow"); cf != j.end()) {
    if (!cf->is_boolean())
      return invalid(where + ": \"control_flow\" is " + describe(*cf) + "; it must be " +
                     std::string(spec_of(stage_fields, "control_flow").expect));
    s.control_flow = cf->get<bool>();
  }
  if (const auto opts = j.find("options"); opts != j.end()) {
    if (!opts->is_array())
      return invalid(where + ": \"options\" is " + describe(*opts) + "; it must be " +
                     std::string(spec_of(stage_fields, "options").expect));
    for (std::size_t o = 0; o < opts->size(); ++o) {
      const json& oj = (*opts)[o];
      const std::string at = where + ", options[" + std::to_string(o) + "]";
      if (!oj.is_object())
        return invalid(at + " is " + describe(oj) +
                       "; an option is an object with the fields forward_time, backward_time, "
                       "saved_bytes (and "
                       "optionally forward_overhead_bytes, backward_overhead_bytes)");
      if (auto e = check_unknown_fields(oj, at, option_fields, "an option")) return *e;
      stage_option op;
      for (auto [out, field] : {std::pair{&op.forward_time, "forward_time"},
                                std::pair{&op.backward_time, "backward_time"}}) {
        auto v = read_seconds(oj, at, spec_of(option_fields, field));
        if (!v) return v.err();
        *out = *v;
      }
      for (auto [out, field, required] :
           {std::tuple{&op.saved_bytes, "saved_bytes", true},
            std::tuple{&op.forward_overhead_bytes, "forward_overhead_bytes", false},
            std::tuple{&op.backward_overhead_bytes, "backward_overhead_bytes", false}}) {
        auto v = read_bytes(oj, at, spec_of(option_fields, field), required);
        if (!v) return v.err();
        *out = *v;
      }
      s.options.push_back(op);
    }
  }
  return s;
}

/// Parses JSON text; a syntax error reports nlohmann's line/column and what was expected. `shape`
/// says what the text should hold, for an empty text.
inline result<json> parse_text(std::string_view text, const std::string& source,
                               std::string_view shape =
                                   "a chain is a JSON object {\"name\": ..., "
                                   "\"input_bytes\": ..., \"stages\": [...]}") {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return invalid(source + ": malformed JSON: the text is empty; " + std::string(shape));
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." -> drop the tag.
    if (const auto p = what.find("] ");
        what.rfind("[json.exception.", 0) == 0 && p != std::string::npos)
      what = what.substr(p + 2);
    return invalid(source + ": malformed JSON: " + what);
  } catch (const json::exception& e) {
    return invalid(source + ": malformed JSON: " + std::string(e.what()));
  }
}

inline error with_prefix(const std::string& prefix, error e) {
  e.message = prefix + ": " + e.message;
  return e;
}

}  // namespace detail

namespace detail {

/// A problem's file format: an object {"name", "input_bytes", <items>: [...]} (format<chain>
/// here, format<forward_dag> in io/graph_json.hpp). One reader serves both; a format with more
/// top-level fields reads them in its extra_from_json(j, problem) -> std::optional<error>.
template <class Problem>
struct format;

template <>
struct format<chain> {
  static constexpr std::string_view noun = "chain", article = "a chain", items = "stages",
                                    item = "stage", last = "the loss", file = "chain file",
                                    file_kind = "a chain";
  static constexpr const auto& fields = chain_fields;
  static auto& items_of(chain& c) { return c.stages; }
  static auto item_from_json(const json& j, std::size_t i) { return stage_from_json(j, i); }
};

/// Reads a problem from parsed JSON in its format, then checks it with remat::validate.
template <class Problem>
result<Problem> problem_from_json(const json& j) {
  using F = format<Problem>;
  const std::string noun(F::noun), items(F::items);
  try {
    if (!j.is_object())
      return invalid(std::string(F::article) +
                     " must be a JSON object with the fields name, input_bytes and " + items +
                     "; got " + describe(j));
    if (auto e = check_unknown_fields(j, noun, F::fields, F::article)) return *e;
    Problem p;
    auto name = read_name(j, noun);
    if (!name) return name.err();
    p.name = std::move(*name);
    auto input = read_bytes(j, noun, spec_of(F::fields, "input_bytes"), true);
    if (!input) return input.err();
    p.input_bytes = *input;
    const auto arr = j.find(items);
    if (arr == j.end())
      return invalid(noun + ": missing field \"" + items + "\" (" +
                     std::string(spec_of(F::fields, F::items).expect) + ")");
    if (!arr->is_array())
      return invalid(noun + ": \"" + items + "\" is " + describe(*arr) +
                     "; it must be an array of " + std::string(F::item) +
                     " objects, the last one being " + std::string(F::last));
    auto& out = F::items_of(p);
    out.reserve(arr->size());
    for (std::size_t i = 0; i < arr->size(); ++i) {
      auto item = F::item_from_json((*arr)[i], i);
      if (!item) return item.err();
      out.push_back(std::move(*item));
    }
    // Top-level fields beyond name, input_bytes and the items, where the format has some
    // (format<forward_dag>: the optional cost_model).
    if constexpr (requires { F::extra_from_json(j, p); })
      if (std::optional<error> e = F::extra_from_json(j, p)) return *e;
    if (auto v = validate(p); !v) return v.err();
    return p;
  } catch (const nlohmann::json::exception& e) {
    return invalid(noun + " JSON could not be read: " + e.what());
  }
}

/// What an empty text should have held.
template <class Problem>
std::string shape_of() {
  using F = format<Problem>;
  return std::string(F::article) + " is a JSON object {\"name\": ..., \"input_bytes\": ..., \"" +
         std::string(F::items) + "\": [...]}";
}

/// Parses JSON text holding a problem.
template <class Problem>
result<Problem> parse_problem(std::string_view text) {
  auto j = parse_text(text, std::string(format<Problem>::noun) + " text", shape_of<Problem>());
  if (!j) return j.err();
  return problem_from_json<Problem>(*j);
}

/// Reads a problem's file (at most max_file_bytes); every error message names the path.
template <class Problem>
result<Problem> load_problem(const std::filesystem::path& path) {
  using F = format<Problem>;
  const std::string where = std::string(F::file) + " '" + path.string() + "'";
  auto text = read_text_file(path, where, F::file_kind);
  if (!text) return text.err();
  auto j = parse_text(*text, where, shape_of<Problem>());
  if (!j) return j.err();
  auto p = problem_from_json<Problem>(*j);
  if (!p) return with_prefix(where, p.err());
  return p;
}

}  // namespace detail

/// Reads a chain from parsed JSON, then checks it with remat::validate.
inline result<chain> chain_from_json(const nlohmann::json& j) {
  return detail::problem_from_json<chain>(j);
}

/// Parses JSON text holding a chain.
inline result<chain> parse_chain(std::string_view text) {
  return detail::parse_problem<chain>(text);
}

/// Reads a chain file (at most max_file_bytes); every error message names the path.
inline result<chain> load_chain(const std::filesystem::path& path) {
  return detail::load_problem<chain>(path);
}

/// The chain as JSON, every field written (overheads included; control_flow and weight_bytes
/// when set), in the format above.
inline nlohmann::json to_json(const chain& c) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : c.stages) {
    stages.push_back({{"name", s.name},
                      {"forward_time", s.forward_time},
                      {"backward_time", s.backward_time},
                      {"output_bytes", s.output_bytes},
                      {"saved_bytes", s.saved_bytes},
                      {"forward_overhead_bytes", s.forward_overhead_bytes},
                      {"backward_overhead_bytes", s.backward_overhead_bytes}});
    if (s.forward_save_overhead_bytes)
      stages.back()["forward_save_overhead_bytes"] = *s.forward_save_overhead_bytes;
    if (s.control_flow) stages.back()["control_flow"] = true;
    if (s.weight_bytes != 0) stages.back()["weight_bytes"] = s.weight_bytes;
    if (!s.options.empty()) {
      nlohmann::json opts = nlohmann::json::array();
      for (const auto& o : s.options)
        opts.push_back({{"forward_time", o.forward_time},
                        {"backward_time", o.backward_time},
                        {"saved_bytes", o.saved_bytes},
                        {"forward_overhead_bytes", o.forward_overhead_bytes},
                        {"backward_overhead_bytes", o.backward_overhead_bytes}});
      stages.back()["options"] = std::move(opts);
    }
  }
  return {{"name", c.name}, {"input_bytes", c.input_bytes}, {"stages", std::move(stages)}};
}

/// The program as an array of instruction strings ("C0", "C1_ff", "D2", "O3", ...).
/// predicted_time and predicted_peak are not written: they belong to the policy's report.
inline nlohmann::json to_json(const schedule& s) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& i : s.ops) ops.push_back(to_string(i));
  return ops;
}

/// Where a program that manages parameters starts (schedule::parameters): {"optimizer_states",
/// "start": [{"weight_on_device", "weight_on_host", "states_on_device", "states_on_host",
/// "cpu_updated", "gradient_on_host"}, ...]}, one entry per graph parameter.
inline nlohmann::json to_json(const parameter_plan& p) {
  nlohmann::json start = nlohmann::json::array();
  for (const parameter_start& s : p.start)
    start.push_back({{"weight_on_device", s.weight_on_device},
                     {"weight_on_host", s.weight_on_host},
                     {"states_on_device", s.states_on_device},
                     {"states_on_host", s.states_on_host},
                     {"cpu_updated", s.cpu_updated},
                     {"gradient_on_host", s.gradient_on_host}});
  return {{"optimizer_states", p.optimizer_states}, {"start", std::move(start)}};
}

/// A chain's program in the chain notation ("F1_ck", "O0", "B2", ...) when it is chain-shaped
/// and has a forward or a backward (the F or B word that schedule_from_json(j, chain) tells the
/// notation by), else as to_json(s).
inline nlohmann::json to_json(const schedule& s, const chain& c) {
  const auto ops = printed_chain_ops(c.length(), s);
  if (!ops) return to_json(s);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& i : *ops) out.push_back(to_string(i));
  return out;
}

namespace detail {
/// The array of instruction strings of a schedule JSON: `j` itself, or its "schedule" field;
/// nullptr when `j` is an object without one.
inline const nlohmann::json* words_array(const nlohmann::json& j) {
  if (!j.is_object()) return &j;
  const auto it = j.find("schedule");
  return it == j.end() ? nullptr : &*it;
}

/// The instruction strings of a schedule JSON (an array, or an object with one under
/// "schedule"), each checked by `parse` (nullopt: not an instruction, described by `forms`).
template <class Parse>
auto read_words(const nlohmann::json& j, std::string_view forms, Parse parse)
    -> result<std::vector<typename decltype(parse(std::string()))::value_type>> {
  const nlohmann::json* arr = words_array(j);
  if (arr == nullptr)
    return invalid("a schedule must be a JSON array of instructions " + std::string(forms) +
                   ", or an object with such an array under \"schedule\"; this object has no "
                   "\"schedule\" field");
  if (!arr->is_array())
    return invalid("schedule is " + describe(*arr) + "; it must be an array of instructions " +
                   std::string(forms));
  std::vector<typename decltype(parse(std::string()))::value_type> out;
  out.reserve(arr->size());
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const auto& v = (*arr)[i];
    const std::string at = "schedule[" + std::to_string(i) + "]";
    const auto ins = v.is_string() ? parse(v.get_ref<const std::string&>()) : std::nullopt;
    if (!ins)
      return invalid(at + " is " + describe(v) + ", not an instruction; write " +
                     std::string(forms));
    out.push_back(*ins);
  }
  return out;
}

/// Whether a schedule JSON is in the chain notation: one of its words begins with 'F' or 'B'
/// (the program text form has no such word; both have O, P and W words).
inline bool in_chain_notation(const nlohmann::json& j) {
  const nlohmann::json* arr = words_array(j);
  if (arr == nullptr || !arr->is_array()) return false;
  return std::any_of(arr->begin(), arr->end(), [](const nlohmann::json& v) {
    if (!v.is_string()) return false;
    const auto& w = v.get_ref<const std::string&>();
    return !w.empty() && (w.front() == 'F' || w.front() == 'B');
  });
}

inline constexpr std::string_view program_forms =
    "\"C<c>\" (compute node c), \"C<c>_ff\" (fast-forward of forward node c), \"D<d>\" (free data "
    "node d), "
    "\"O<d>\", \"P<d>\", \"W<d>\" (offload, prefetch, wait for data node d), with 0-based node "
    "indices, e.g. "
    "[\"C0\", \"C1_ff\", \"D0\"]";
inline constexpr std::string_view chain_forms =
    "\"F<l>_none\", \"F<l>_ck\", \"F<l>_all\" or \"B<l>\" with a stage number l >= 1, or \"O<k>\", "
    "\"P<k>\", "
    "\"W<k>\" (offload, prefetch, wait for the activation a_k) with k >= 0, e.g. [\"F1_ck\", "
    "\"F2_all\", \"B2\"]";

/// The "parameter_plan" of an object holding a program (to_json(parameter_plan)).
inline result<parameter_plan> parameter_plan_from_json(const nlohmann::json& j) {
  const std::string where = "parameter_plan";
  if (!j.is_object()) return invalid(where + " is " + describe(j) + "; it must be an object");
  parameter_plan p;
  p.managed = true;
  if (const auto k = j.find("optimizer_states"); k != j.end()) {
    if (!k->is_number() || !(k->get<double>() >= 0))
      return invalid(where + ".optimizer_states is " + describe(*k) +
                     "; it must be a number >= 0 of state bytes per trainable byte (Adam: 2)");
    p.optimizer_states = k->get<double>();
  }
  const auto st = j.find("start");
  if (st == j.end() || !st->is_array())
    return invalid(where + ".start must be an array with one object per graph parameter");
  for (std::size_t i = 0; i < st->size(); ++i) {
    const auto& e = (*st)[i];
    const std::string at = where + ".start[" + std::to_string(i) + "]";
    if (!e.is_object()) return invalid(at + " is " + describe(e) + "; it must be an object");
    parameter_start s;
    for (auto [name, field] :
         {std::pair{"weight_on_device", &s.weight_on_device},
          std::pair{"weight_on_host", &s.weight_on_host},
          std::pair{"states_on_device", &s.states_on_device},
          std::pair{"states_on_host", &s.states_on_host}, std::pair{"cpu_updated", &s.cpu_updated},
          std::pair{"gradient_on_host", &s.gradient_on_host}}) {
      const auto f = e.find(name);
      if (f == e.end()) continue;
      if (!f->is_boolean())
        return invalid(at + "." + name + " is " + describe(*f) + "; it must be true or false");
      *field = f->get<bool>();
    }
    p.start.push_back(s);
  }
  return p;
}

/// Program text; `forms` describes the words accepted, for the messages. An object may hold
/// the program's "parameter_plan" beside its "schedule".
inline result<schedule> program_from_json(const nlohmann::json& j, std::string_view forms) {
  try {
    auto ops = read_words(j, forms, [](const std::string& w) { return parse_instruction(w); });
    if (!ops) return ops.err();
    schedule s{std::move(*ops), 0, 0};
    if (j.is_object())
      if (const auto it = j.find("parameter_plan"); it != j.end()) {
        auto p = parameter_plan_from_json(*it);
        if (!p) return p.err();
        s.parameters = std::move(*p);
      }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return invalid(std::string("schedule JSON could not be read: ") + e.what());
  }
}
}  // namespace detail

/// Reads a program in its text form: an array of instruction strings, or an object holding one
/// under "schedule". Node indices are checked against a graph by sim::simulate, not here.
inline result<schedule> schedule_from_json(const nlohmann::json& j) {
  return detail::program_from_json(j, detail::program_forms);
}

/// Reads a chain's schedule (an array of instruction strings, or an object holding one under
/// "schedule") in either notation. With a word that begins with 'F' or 'B' it is the chain
/// notation, lowered onto the chain's graph (schedule/notation.hpp): stage and activation
/// numbers, and the notation's rules, are checked against the chain here. Otherwise it is
/// program text, as schedule_from_json(j): node indices into build_graph(chain), checked by
/// sim::simulate. schedule_from_json(to_json(s, c), c) gives back s for every program s.
inline result<schedule> schedule_from_json(const nlohmann::json& j, const chain& c) {
  if (!detail::in_chain_notation(j))
    return detail::program_from_json(j,
                                     std::string(detail::program_forms) +
                                         "; or the chain notation, with a forward or backward: " +
                                         std::string(detail::chain_forms));
  try {
    auto ops = detail::read_words(j, detail::chain_forms,
                                  [](const std::string& w) { return parse_chain_op(w); });
    if (!ops) return ops.err();
    return lower(c.length(), *ops);
  } catch (const nlohmann::json::exception& e) {
    return detail::invalid(std::string("schedule JSON could not be read: ") + e.what());
  }
}

}  // namespace remat::io
