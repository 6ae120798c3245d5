#pragma once
// JSON reading and writing of forward DAGs, the input of the graph policies (problem/builder.hpp).
// Opt-in like io/json.hpp: needs nlohmann_json 3 (CMake target remat::json). The format:
// docs/json-format.md; the decisions: docs/io.md.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/core/result.hpp>
#include <remat/io/json.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>

namespace remat::io {

namespace detail::graph_json {

using io::detail::field_spec;
using io::detail::invalid;
using json = nlohmann::json;

inline constexpr field_spec dag_fields[] = {
    {"name", "a string"},
    {"input_bytes", "the size of the graph input in bytes, an integer >= 0"},
    {"ops", "an array of op objects, the last one being the loss function"},
    {"cost_model",
     "an object {\"device\", \"peak_flops\", \"memory_bandwidth\", \"rule\"} saying how the "
     "times were derived (optional)"},
    {"parameters",
     "an array of parameter objects {\"name\", \"bytes\", \"trainable\", \"dtype\"}, the "
     "model's weights that ops read by name (optional)"},
};

inline constexpr field_spec parameter_fields[] = {
    {"name", "a string, unique among the parameters"},
    {"bytes", "the parameter's size in bytes, an integer >= 0"},
    {"trainable", "whether the optimizer trains it, true or false (default true)"},
    {"dtype", "its element type, a string such as \"fp32\" or \"bf16\" (default \"fp32\")"},
};

inline constexpr field_spec cost_model_fields[] = {
    {"device", "the device's name, a string"},
    {"peak_flops", "the device's peak compute in FLOP/s, a number > 0"},
    {"memory_bandwidth", "the device's memory bandwidth in bytes/s, a number > 0"},
    {"rule", "how a time follows from FLOPs and bytes moved, a string (default empty)"},
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
    {"forward_flops", "the forward's floating-point operations, a number >= 0 (optional)"},
    {"backward_flops", "the backward's floating-point operations, a number >= 0 (optional)"},
    {"forward_bytes_moved",
     "the forward's device-memory traffic in bytes, an integer >= 0 (optional)"},
    {"backward_bytes_moved",
     "the backward's device-memory traffic in bytes, an integer >= 0 (optional)"},
    {"parameters",
     "an array of the names of the parameters the op reads (the DAG's \"parameters\"; default "
     "none)"},
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
        "backward_overhead_bytes, forward_save_overhead_bytes, forward_flops, backward_flops, "
        "forward_bytes_moved, backward_bytes_moved)");
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
  for (auto [out, field] : {std::pair{&op.forward_flops, "forward_flops"},
                            std::pair{&op.backward_flops, "backward_flops"}})
    if (j.contains(field)) {
      seconds v = 0;  // read_seconds reads any JSON number; range is left to validate()
      if (auto e = time(v, field)) return *e;
      *out = v;
    }
  for (auto [out, field] : {std::pair{&op.forward_bytes_moved, "forward_bytes_moved"},
                            std::pair{&op.backward_bytes_moved, "backward_bytes_moved"}})
    if (j.contains(field)) {
      bytes v = 0;
      if (auto e = size(v, field, true)) return *e;
      *out = v;
    }
  if (j.contains("parameters"))
    if (auto e = names(op.parameters, "parameters")) return *e;
  return op;
}

/// The optional top-level "parameters" array; names and sizes are left to validate().
inline std::optional<error> parameters_from_json(const json& j, forward_dag& f) {
  const auto it = j.find("parameters");
  if (it == j.end()) return std::nullopt;
  if (!it->is_array())
    return invalid("\"parameters\" is " + io::detail::describe(*it) + "; it must be " +
                   std::string(io::detail::spec_of(dag_fields, "parameters").expect));
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& pj = (*it)[i];
    const std::string where = "parameters[" + std::to_string(i) + "]";
    if (!pj.is_object())
      return invalid(where + " is " + io::detail::describe(pj) +
                     "; each parameter is an object {\"name\", \"bytes\", \"trainable\", "
                     "\"dtype\"}");
    if (auto e = io::detail::check_unknown_fields(pj, where, parameter_fields, "a parameter"))
      return *e;
    parameter w;
    for (auto [out, field] : {std::pair{&w.name, "name"}, std::pair{&w.dtype, "dtype"}}) {
      const auto v = pj.find(field);
      if (v == pj.end()) {
        if (std::string_view(field) == "dtype") continue;
        return invalid(where + ": missing field \"name\" (" +
                       std::string(parameter_fields[0].expect) + ")");
      }
      if (!v->is_string())
        return invalid(where + ": \"" + field + "\" is " + io::detail::describe(*v) +
                       "; it must be a string");
      *out = v->get<std::string>();
    }
    auto size = io::detail::read_bytes(pj, where, parameter_fields[1], true);
    if (!size) return size.err();
    w.size = *size;
    if (const auto t = pj.find("trainable"); t != pj.end()) {
      if (!t->is_boolean())
        return invalid(where + ": \"trainable\" is " + io::detail::describe(*t) +
                       "; it must be true or false");
      w.trainable = t->get<bool>();
    }
    f.parameters.push_back(std::move(w));
  }
  return std::nullopt;
}

/// The optional top-level "cost_model" object; its rates' range is left to validate().
inline std::optional<error> cost_model_from_json(const json& j, forward_dag& f) {
  const auto it = j.find("cost_model");
  if (it == j.end()) return std::nullopt;
  const std::string where = "forward DAG: cost_model";
  if (!it->is_object())
    return invalid(where + " is " + io::detail::describe(*it) + "; it must be " +
                   std::string(io::detail::spec_of(dag_fields, "cost_model").expect));
  if (auto e = io::detail::check_unknown_fields(*it, where, cost_model_fields, "cost_model"))
    return *e;
  cost_model m;
  for (auto [out, field, required] :
       {std::tuple{&m.device, "device", true}, std::tuple{&m.rule, "rule", false}}) {
    const auto v = it->find(field);
    if (v == it->end()) {
      if (!required) continue;
      return invalid(where + ": missing field \"" + field + "\" (" +
                     std::string(io::detail::spec_of(cost_model_fields, field).expect) + ")");
    }
    if (!v->is_string())
      return invalid(where + ": \"" + field + "\" is " + io::detail::describe(*v) +
                     "; it must be a string");
    *out = v->get<std::string>();
  }
  for (auto [out, field] : {std::pair{&m.peak_flops, "peak_flops"},
                            std::pair{&m.memory_bandwidth, "memory_bandwidth"}}) {
    auto v = io::detail::read_seconds(*it, where, io::detail::spec_of(cost_model_fields, field));
    if (!v) return v.err();
    *out = *v;
  }
  f.costs = std::move(m);
  return std::nullopt;
}

}  // namespace detail::graph_json

namespace detail {
template <>
struct format<forward_dag> {
  static constexpr std::string_view noun = "forward DAG", article = "a forward DAG", items = "ops",
                                    item = "op", last = "the loss function", file = "graph file",
                                    file_kind = "a graph";
  static constexpr const auto& fields = graph_json::dag_fields;
  static auto& items_of(forward_dag& f) { return f.ops; }
  static auto item_from_json(const json& j, std::size_t i) {
    return graph_json::op_from_json(j, i);
  }
  static std::optional<error> extra_from_json(const json& j, forward_dag& f) {
    if (auto e = graph_json::cost_model_from_json(j, f)) return e;
    return graph_json::parameters_from_json(j, f);
  }
};
}  // namespace detail

/// Reads a forward DAG from parsed JSON, then checks it with remat::validate(forward_dag).
inline result<forward_dag> forward_dag_from_json(const nlohmann::json& j) {
  return detail::problem_from_json<forward_dag>(j);
}

/// Parses JSON text holding a forward DAG.
inline result<forward_dag> parse_forward_dag(std::string_view text) {
  return detail::parse_problem<forward_dag>(text);
}

/// Reads a forward DAG file; every error message starts with the path.
inline result<forward_dag> load_forward_dag(const std::filesystem::path& path) {
  return detail::load_problem<forward_dag>(path);
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

/// The forward DAG as JSON, every field written (overheads included; the cost model, the
/// parameters and the ops' FLOPs, bytes moved and parameters when present), in the format above.
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
    if (op.forward_flops) ops.back()["forward_flops"] = *op.forward_flops;
    if (op.backward_flops) ops.back()["backward_flops"] = *op.backward_flops;
    if (op.forward_bytes_moved) ops.back()["forward_bytes_moved"] = *op.forward_bytes_moved;
    if (op.backward_bytes_moved) ops.back()["backward_bytes_moved"] = *op.backward_bytes_moved;
    if (!op.parameters.empty()) ops.back()["parameters"] = op.parameters;
  }
  nlohmann::json out = {{"name", f.name}, {"input_bytes", f.input_bytes}};
  if (f.costs)
    out["cost_model"] = {{"device", f.costs->device},
                         {"peak_flops", f.costs->peak_flops},
                         {"memory_bandwidth", f.costs->memory_bandwidth},
                         {"rule", f.costs->rule}};
  if (!f.parameters.empty()) {
    nlohmann::json params = nlohmann::json::array();
    for (const parameter& w : f.parameters)
      params.push_back(
          {{"name", w.name}, {"bytes", w.size}, {"trainable", w.trainable}, {"dtype", w.dtype}});
    out["parameters"] = std::move(params);
  }
  out["ops"] = std::move(ops);
  return out;
}

}  // namespace remat::io
