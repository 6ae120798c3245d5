#pragma once
// JSON reading and writing of forward DAGs, the input of the graph policies (problem/builder.hpp).
// Opt-in like io/json.hpp: needs nlohmann_json 3 (CMake target remat::json).
//
// Format:
//   {"name": "residual", "input_bytes": 19267584,
//    "ops": [{"name": "conv1", "inputs": ["input"], "forward_time": 0.0012,
//             "backward_time": 0.0024, "output_bytes": 25690112, "phantom_bytes": 25690112,
//             "backward_reads": ["input", "output"],
//             "forward_overhead_bytes": 0, "backward_overhead_bytes": 0}, ...]}
// Each op reads "input" (the graph input) or other ops by name; backward_reads lists which of
// them its backward reads, and "output" when it reads the op's own output. The last op is the
// loss function. Times are seconds (any JSON number), sizes bytes (JSON integers). Optional:
// the top-level and the ops' overheads (default 0), forward_save_overhead_bytes (the normal
// forward's overhead when it differs, default forward_overhead_bytes) and the top-level name.
// Unknown fields are rejected with their name.
//
// Graph schedules (schedule/graph_schedule.hpp) are written as an array of instruction strings,
// "C3" (compute node 3), "C3_ff" (its fast-forward), "D5" (free data node 5), 0-based indices
// into the training graph that build_graph makes of the forward DAG.
//
// Files are read as chain files are (io/json.hpp): at most io::max_file_bytes (256 MiB).
//
// Nothing here throws on bad input: every failure comes back as status::invalid_problem with a
// message that names the op (1-based, and its JSON position), the field, and what would be
// accepted. Only std::bad_alloc escapes.

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <remat/core/result.hpp>
#include <remat/io/json.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/graph_schedule.hpp>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace remat::io {

namespace detail::graph_json {

using io::detail::field_spec;
using io::detail::invalid;
using json = nlohmann::json;

inline constexpr field_spec dag_fields[] = {
    {"name", "a string"},
    {"input_bytes", "the size of the graph input in bytes, an integer >= 0"},
    {"ops", "an array of op objects, the last one being the loss function"},
};

inline constexpr field_spec op_fields[] = {
    {"name", "a string, unique among the ops, other than \"input\" and \"output\""},
    {"inputs", "an array of names: \"input\" (the graph input) or names of other ops"},
    {"forward_time", "the forward's duration in seconds, a number >= 0"},
    {"backward_time", "the backward's duration in seconds, a number >= 0"},
    {"output_bytes", "the size of the op's output in bytes, an integer >= 0"},
    {"phantom_bytes", "the bytes the backward keeps besides the tensors it reads, an integer >= 0"},
    {"backward_reads",
     "an array of the names among inputs that the backward reads, and \"output\" if it reads "
     "the op's own output"},
    {"forward_overhead_bytes",
     "temporary bytes while the forward runs, an integer >= 0 (default 0)"},
    {"backward_overhead_bytes",
     "temporary bytes while the backward runs, an integer >= 0 (default 0)"},
    {"forward_save_overhead_bytes",
     "temporary bytes while the forward runs keeping its phantom, an integer >= 0 (default: "
     "forward_overhead_bytes)"},
};

inline result<std::vector<std::string>> read_names(const json& obj, const std::string& where,
                                                   std::string_view field) {
  const field_spec& f = io::detail::spec_of(op_fields, field);
  const auto it = obj.find(f.name);
  if (it == obj.end())
    return invalid(where + ": missing field \"" + std::string(f.name) + "\" (" +
                   std::string(f.expect) + ")");
  if (!it->is_array())
    return invalid(where + ": \"" + std::string(f.name) + "\" is " + io::detail::describe(*it) +
                   "; it must be " + std::string(f.expect));
  std::vector<std::string> out;
  out.reserve(it->size());
  for (std::size_t k = 0; k < it->size(); ++k) {
    const json& v = (*it)[k];
    if (!v.is_string())
      return invalid(where + ": \"" + std::string(f.name) + "\"[" + std::to_string(k) + "] is " +
                     io::detail::describe(v) + "; it must be a name (a string)");
    out.push_back(v.get<std::string>());
  }
  return out;
}

inline result<forward_op> op_from_json(const json& j, std::size_t i) {
  const std::string pos = "ops[" + std::to_string(i) + "]";
  std::string where = "op " + std::to_string(i + 1) + " at " + pos;
  if (!j.is_object())
    return invalid(
        where + " is " + io::detail::describe(j) +
        "; each op must be an object with the fields name, inputs, forward_time, backward_time, "
        "output_bytes, phantom_bytes, backward_reads (and optionally forward_overhead_bytes, "
        "backward_overhead_bytes, forward_save_overhead_bytes)");
  forward_op op;
  const auto nm = j.find("name");
  if (nm == j.end())
    return invalid(where + ": missing field \"name\" (" + std::string(op_fields[0].expect) + ")");
  if (!nm->is_string())
    return invalid(where + ": \"name\" is " + io::detail::describe(*nm) + "; it must be a string");
  op.name = nm->get<std::string>();
  if (!op.name.empty()) where = "op " + std::to_string(i + 1) + " ('" + op.name + "') at " + pos;
  if (auto e = io::detail::check_unknown_fields(j, where, op_fields, "an op")) return *e;
  auto names = [&](std::vector<std::string>& out, std::string_view field) -> std::optional<error> {
    auto v = read_names(j, where, field);
    if (!v) return v.err();
    out = std::move(*v);
    return std::nullopt;
  };
  auto time = [&](seconds& out, std::string_view field) -> std::optional<error> {
    auto v = io::detail::read_seconds(j, where, io::detail::spec_of(op_fields, field));
    if (!v) return v.err();
    out = *v;
    return std::nullopt;
  };
  auto size = [&](bytes& out, std::string_view field, bool required) -> std::optional<error> {
    auto v = io::detail::read_bytes(j, where, io::detail::spec_of(op_fields, field), required);
    if (!v) return v.err();
    out = *v;
    return std::nullopt;
  };
  if (auto e = names(op.inputs, "inputs")) return *e;
  if (auto e = time(op.forward_time, "forward_time")) return *e;
  if (auto e = time(op.backward_time, "backward_time")) return *e;
  if (auto e = size(op.output_bytes, "output_bytes", true)) return *e;
  if (auto e = size(op.phantom_bytes, "phantom_bytes", true)) return *e;
  if (auto e = names(op.backward_reads, "backward_reads")) return *e;
  if (auto e = size(op.forward_overhead_bytes, "forward_overhead_bytes", false)) return *e;
  if (auto e = size(op.backward_overhead_bytes, "backward_overhead_bytes", false)) return *e;
  if (j.contains("forward_save_overhead_bytes")) {
    bytes v = 0;
    if (auto e = size(v, "forward_save_overhead_bytes", true)) return *e;
    op.forward_save_overhead_bytes = v;
  }
  return op;
}

inline result<std::string> read_file(const std::filesystem::path& path, const std::string& where) {
  return io::detail::read_text_file(path, where, "a graph");
}

inline result<json> parse(std::string_view text, const std::string& source) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return invalid(source +
                   ": malformed JSON: the text is empty; a forward DAG is a JSON object "
                   "{\"name\": ..., \"input_bytes\": ..., \"ops\": [...]}");
  return io::detail::parse_text(text, source);
}

}  // namespace detail::graph_json

/// Reads a forward DAG from parsed JSON, then checks it with remat::validate(forward_dag).
inline result<forward_dag> forward_dag_from_json(const nlohmann::json& j) {
  namespace gj = detail::graph_json;
  using gj::invalid;
  try {
    if (!j.is_object())
      return invalid(
          "a forward DAG must be a JSON object with the fields name, input_bytes and ops; got " +
          io::detail::describe(j));
    const std::string where = "forward DAG";
    if (auto e = io::detail::check_unknown_fields(j, where, gj::dag_fields, "a forward DAG"))
      return *e;
    forward_dag f;
    auto name = io::detail::read_name(j, where);
    if (!name) return name.err();
    f.name = std::move(*name);
    auto input =
        io::detail::read_bytes(j, where, io::detail::spec_of(gj::dag_fields, "input_bytes"), true);
    if (!input) return input.err();
    f.input_bytes = *input;
    const auto ops = j.find("ops");
    if (ops == j.end())
      return invalid("forward DAG: missing field \"ops\" (" +
                     std::string(io::detail::spec_of(gj::dag_fields, "ops").expect) + ")");
    if (!ops->is_array())
      return invalid("forward DAG: \"ops\" is " + io::detail::describe(*ops) +
                     "; it must be an array of op objects, the last one being the loss function");
    f.ops.reserve(ops->size());
    for (std::size_t i = 0; i < ops->size(); ++i) {
      auto op = gj::op_from_json((*ops)[i], i);
      if (!op) return op.err();
      f.ops.push_back(std::move(*op));
    }
    if (auto v = validate(f); !v) return v.err();
    return f;
  } catch (const nlohmann::json::exception& e) {
    return invalid(std::string("forward DAG JSON could not be read: ") + e.what());
  }
}

/// Parses JSON text holding a forward DAG.
inline result<forward_dag> parse_forward_dag(std::string_view text) {
  auto j = detail::graph_json::parse(text, "forward DAG text");
  if (!j) return j.err();
  return forward_dag_from_json(*j);
}

/// Reads a forward DAG file; every error message starts with the path.
inline result<forward_dag> load_forward_dag(const std::filesystem::path& path) {
  const std::string where = "graph file '" + path.string() + "'";
  auto text = detail::graph_json::read_file(path, where);
  if (!text) return text.err();
  auto j = detail::graph_json::parse(*text, where);
  if (!j) return j.err();
  auto f = forward_dag_from_json(*j);
  if (!f) return io::detail::with_prefix(where, f.err());
  return f;
}

/// The training graph of a forward DAG held in parsed JSON, text, or a file (through build_graph).
inline result<graph> graph_from_json(const nlohmann::json& j) {
  auto f = forward_dag_from_json(j);
  if (!f) return f.err();
  return build_graph(*f);
}
inline result<graph> parse_graph(std::string_view text) {
  auto f = parse_forward_dag(text);
  if (!f) return f.err();
  return build_graph(*f);
}
inline result<graph> load_graph(const std::filesystem::path& path) {
  auto f = load_forward_dag(path);
  if (!f) return f.err();
  return build_graph(*f);
}

/// The forward DAG as JSON, every field written (overheads included), in the format above.
inline nlohmann::json to_json(const forward_dag& f) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : f.ops) {
    ops.push_back({{"name", op.name},
                   {"inputs", op.inputs},
                   {"forward_time", op.forward_time},
                   {"backward_time", op.backward_time},
                   {"output_bytes", op.output_bytes},
                   {"phantom_bytes", op.phantom_bytes},
                   {"backward_reads", op.backward_reads},
                   {"forward_overhead_bytes", op.forward_overhead_bytes},
                   {"backward_overhead_bytes", op.backward_overhead_bytes}});
    if (op.forward_save_overhead_bytes)
      ops.back()["forward_save_overhead_bytes"] = *op.forward_save_overhead_bytes;
  }
  return {{"name", f.name}, {"input_bytes", f.input_bytes}, {"ops", std::move(ops)}};
}

/// The program as an array of instruction strings ("C0", "C1_ff", "D2", ...). predicted_time and
/// predicted_peak are not written: they belong to the policy's report.
inline nlohmann::json to_json(const graph_schedule& s) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& i : s.ops) ops.push_back(to_string(i));
  return ops;
}

/// Reads a graph schedule: an array of instruction strings, or an object holding one under
/// "schedule". Node indices are checked against a graph by sim::simulate, not here.
inline result<graph_schedule> graph_schedule_from_json(const nlohmann::json& j) {
  using io::detail::describe;
  using io::detail::invalid;
  constexpr std::string_view forms =
      "\"C<c>\" (compute node c), \"C<c>_ff\" (fast-forward of forward node c) or \"D<d>\" "
      "(free data node d), with 0-based node indices, e.g. [\"C0\", \"C1_ff\", \"D0\"]";
  try {
    const nlohmann::json* arr = &j;
    if (j.is_object()) {
      const auto it = j.find("schedule");
      if (it == j.end())
        return invalid("a graph schedule must be a JSON array of instructions " +
                       std::string(forms) +
                       ", or an object with such an array under \"schedule\"; this object has "
                       "no \"schedule\" field");
      arr = &*it;
    }
    if (!arr->is_array())
      return invalid("schedule is " + describe(*arr) + "; it must be an array of instructions " +
                     std::string(forms));
    graph_schedule s;
    s.ops.reserve(arr->size());
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const auto& v = (*arr)[i];
      const std::string at = "schedule[" + std::to_string(i) + "]";
      const auto ins =
          v.is_string() ? parse_graph_instruction(v.get_ref<const std::string&>()) : std::nullopt;
      if (!ins)
        return invalid(at + " is " + describe(v) + ", not an instruction; write " +
                       std::string(forms));
      s.ops.push_back(*ins);
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return invalid(std::string("graph schedule JSON could not be read: ") + e.what());
  }
}

}  // namespace remat::io
