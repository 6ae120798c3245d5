// remat-zoo: write the forward DAG of a standard architecture (GPT-2, Llama, ResNet) with
// roofline times, as a graph file for remat-plan --graph (docs/json-format.md).
//
//   remat-zoo gpt2 --layers 12 --width 768 --heads 12 --sequence 512 --batch 8 --dtype fp32
//             --device V100 -o gpt2_small.json
//   remat-zoo llama --layers 32 --batch 4 --sequence 512 --device RTX3060 -o llama2_7b.json
//   remat-zoo resnet --depth 50 --batch 32 --image 224 --device A100
//
// The ops, their sizes and the cost rule are stated in include/remat/zoo/gpt2.hpp, llama.hpp,
// resnet.hpp and roofline.hpp. Without -o the JSON goes to stdout; with -o a one-line summary does
// (ops, the sum of output and phantom bytes, the store-all time). Exit status: 0 written, 1 the
// file could not be written, 2 usage error (an unknown option, a value that is not a number, a
// configuration the generator refuses: the reason on stderr).

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/io/graph_json.hpp>
#include <remat/zoo/gpt2.hpp>
#include <remat/zoo/llama.hpp>
#include <remat/zoo/resnet.hpp>
#include <remat/zoo/roofline.hpp>

#include "cli.hpp"

namespace {

constexpr std::string_view help_text = R"(usage: remat-zoo gpt2 [OPTIONS]
       remat-zoo llama [OPTIONS]
       remat-zoo resnet [OPTIONS]
       remat-zoo --help

Writes the forward DAG (the graph file of remat-plan --graph) of a standard architecture, at
the op granularity of PyTorch's autograd, with times from a roofline model:
time = max(flops / peak_flops, bytes_moved / memory_bandwidth) per forward and per backward.
The file carries the device ("cost_model") and each op's FLOPs and bytes moved; llama's also
carries the weights ("parameters") and which ops read them.

gpt2 (defaults: GPT-2 small):
  --layers N            transformer blocks (default 12)
  --width N             model width d (default 768)
  --heads N             attention heads, dividing the width (default 12)
  --sequence N          tokens per sequence (default 1024)
  --batch N             sequences per batch (default 8)
  --vocab N             vocabulary size (default 50257)
  --dropout P           dropout probability in [0, 1); 0 leaves the dropout ops out
                        (default 0.1)

llama (defaults: Llama 2 7B at batch 4 of 512 tokens):
  --layers N            decoder layers (default 32)
  --width N             model width d (default 4096)
  --heads N             attention heads, dividing the width (default 32)
  --ffn N               the MLP's hidden width (default 11008)
  --sequence N          tokens per sequence (default 512)
  --batch N             sequences per batch (default 4)
  --vocab N             vocabulary size (default 32000)

resnet (defaults: ResNet-50 on ImageNet):
  --depth N             18, 34, 50, 101 or 152 (default 50)
  --batch N             images per batch (default 32)
  --image N             image height and width (default 224)
  --classes N           classes of the classifier (default 1000)

all:
  --dtype T             fp16, bf16, fp32 or fp64: the activations' (and weights') type
                        (default fp32)
  --device NAME         V100, A100, H100 (fp32 peaks), V100-tc, A100-tc, H100-tc (the
                        tensor cores' fp16/bf16 peaks) or RTX3060 (default V100)
  --peak-flops X        with --bandwidth: a custom device, X FLOP/s (e.g. 15.7e12); --device
                        then only names it (default "custom")
  --bandwidth Y         with --peak-flops: its memory bandwidth in bytes/s (e.g. 900e9)
  -o, --output FILE     write the JSON to FILE and print a summary (default: JSON on stdout)
  -h, --help            print this help and exit

Options also take the form --option=VALUE.
exit status: 0 written; 1 the file could not be written; 2 usage error (unknown option, bad
value, a configuration the generator refuses).
)";

struct usage_error {
  std::string reason;
};

struct options {
  std::string model;  ///< "gpt2", "llama" or "resnet"
  remat::zoo::gpt2_config gpt2;
  remat::zoo::llama_config llama;
  remat::zoo::resnet_config resnet;
  remat::zoo::device_model device = remat::zoo::devices::v100();
  std::string output;
  bool help = false;
};

using remat_cli::parse_int;

std::optional<double> parse_double(const std::string& s) {
  // strtod accepts what users type (1e12, 0.1); the whole text must be the number.
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

std::variant<options, usage_error> parse_args(int argc, char** argv) {
  options o;
  std::vector<std::string_view> args(argv + 1, argv + argc);
  if (std::any_of(args.begin(), args.end(),
                  [](std::string_view a) { return a == "-h" || a == "--help"; })) {
    o.help = true;
    return o;
  }
  if (args.empty())
    return usage_error{
        "give a model: 'remat-zoo gpt2 ...', 'remat-zoo llama ...' or 'remat-zoo resnet ...' "
        "(run 'remat-zoo --help')"};
  o.model = std::string(args[0]);
  if (o.model != "gpt2" && o.model != "llama" && o.model != "resnet")
    return usage_error{"unknown model '" + o.model + "'; the models are gpt2, llama and resnet"};
  // Which models take an option (the common ones: every model).
  static constexpr std::array<std::string_view, 5> transformer = {"--layers", "--width", "--heads",
                                                                  "--sequence", "--vocab"};
  static constexpr std::array<std::string_view, 1> gpt2_only = {"--dropout"};
  static constexpr std::array<std::string_view, 1> llama_only = {"--ffn"};
  static constexpr std::array<std::string_view, 3> resnet_only = {"--depth", "--image",
                                                                  "--classes"};
  static constexpr std::array<std::string_view, 6> common = {
      "--batch", "--dtype", "--device", "--peak-flops", "--bandwidth", "--output"};
  std::optional<double> peak, bandwidth;
  std::optional<std::string> device_name;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string_view name = args[i];
    std::optional<std::string_view> value;
    if (name == "-o") {
      if (i + 1 >= args.size()) return usage_error{"option -o needs a file name"};
      name = "--output";
    }
    if (name.size() < 3 || name.substr(0, 2) != "--")
      return usage_error{"unexpected argument '" + std::string(name) +
                         "'; after the model, every argument is an option (run 'remat-zoo "
                         "--help')"};
    if (const auto eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto listed = [&](const auto& names) {
      return std::find(names.begin(), names.end(), name) != names.end();
    };
    const char* owner = listed(transformer)   ? (o.model == "resnet" ? "gpt2 and llama" : nullptr)
                        : listed(gpt2_only)   ? (o.model == "gpt2" ? nullptr : "gpt2")
                        : listed(llama_only)  ? (o.model == "llama" ? nullptr : "llama")
                        : listed(resnet_only) ? (o.model == "resnet" ? nullptr : "resnet")
                                              : nullptr;
    if (!listed(transformer) && !listed(gpt2_only) && !listed(llama_only) && !listed(resnet_only) &&
        !listed(common))
      return usage_error{"unknown option '" + std::string(name) +
                         "' (run 'remat-zoo --help' for the options)"};
    if (owner)
      return usage_error{std::string(name) + " is an option of " + owner + ", not of " + o.model};
    if (!value) {
      if (i + 1 >= args.size() || args[i + 1].substr(0, 2) == "--")
        return usage_error{"option " + std::string(name) + " needs a value"};
      value = args[++i];
    }
    const std::string v(*value);
    auto integer = [&](int& out) -> std::optional<usage_error> {
      const auto n = parse_int<long long>(v);
      if (!n)
        return usage_error{std::string(name) + " '" + v + "' is not an integer (e.g. " +
                           std::string(name) + " 12)"};
      if (*n < std::numeric_limits<int>::min() || *n > std::numeric_limits<int>::max())
        return usage_error{std::string(name) + " " + v + " is out of range (far above what " +
                           o.model + " accepts; run 'remat-zoo --help')"};
      out = static_cast<int>(*n);
      return std::nullopt;
    };
    auto number = [&](double& out) -> std::optional<usage_error> {
      const auto n = parse_double(v);
      if (!n) return usage_error{std::string(name) + " '" + v + "' is not a number (e.g. 15.7e12)"};
      out = *n;
      return std::nullopt;
    };
    // A transformer's option: gpt2's field or llama's, by the model.
    auto shape = [&](int remat::zoo::gpt2_config::*g, int remat::zoo::llama_config::*l) {
      return integer(o.model == "gpt2" ? o.gpt2.*g : o.llama.*l);
    };
    using gpt2_t = remat::zoo::gpt2_config;
    using llama_t = remat::zoo::llama_config;
    std::optional<usage_error> e;
    if (name == "--layers")
      e = shape(&gpt2_t::layers, &llama_t::layers);
    else if (name == "--width")
      e = shape(&gpt2_t::width, &llama_t::width);
    else if (name == "--heads")
      e = shape(&gpt2_t::heads, &llama_t::heads);
    else if (name == "--sequence")
      e = shape(&gpt2_t::sequence, &llama_t::sequence);
    else if (name == "--vocab")
      e = shape(&gpt2_t::vocab, &llama_t::vocab);
    else if (name == "--ffn")
      e = integer(o.llama.ffn);
    else if (name == "--dropout")
      e = number(o.gpt2.dropout);
    else if (name == "--depth")
      e = integer(o.resnet.depth);
    else if (name == "--image")
      e = integer(o.resnet.image);
    else if (name == "--classes")
      e = integer(o.resnet.classes);
    else if (name == "--batch") {
      e = integer(o.gpt2.batch);
      o.resnet.batch = o.llama.batch = o.gpt2.batch;
    } else if (name == "--dtype") {
      const int bytes = v == "fp16" || v == "bf16" ? 2 : v == "fp32" ? 4 : v == "fp64" ? 8 : 0;
      if (bytes == 0)
        return usage_error{"--dtype '" + v +
                           "' is not a type; the types are fp16, bf16, fp32, fp64"};
      o.gpt2.dtype_bytes = o.resnet.dtype_bytes = o.llama.dtype_bytes = bytes;
    } else if (name == "--device") {
      device_name = v;
    } else if (name == "--peak-flops") {
      e = number(peak.emplace());
    } else if (name == "--bandwidth") {
      e = number(bandwidth.emplace());
    } else if (name == "--output") {
      if (v.empty()) return usage_error{"--output needs a file name"};
      o.output = v;
    }
    if (e) return *e;
  }
  if (peak.has_value() != bandwidth.has_value())
    return usage_error{
        "a custom device needs both --peak-flops and --bandwidth (e.g. "
        "--peak-flops 15.7e12 --bandwidth 900e9)"};
  if (peak) {
    o.device = {device_name.value_or("custom"), *peak, *bandwidth};
  } else if (device_name) {
    auto d = remat::zoo::find_device(*device_name);
    if (!d) {
      std::string names;
      for (const auto& p : remat::zoo::device_presets())
        names += (names.empty() ? "" : ", ") + p.name;
      return usage_error{"unknown device '" + *device_name + "'; the devices are " + names +
                         ", or give --peak-flops and --bandwidth"};
    }
    o.device = *d;
  }
  return o;
}

/// The forward DAG's JSON with the top-level fields first and one op a line, fields in the
/// format's order: a file that reads well and diffs by op.
std::string dag_text(const remat::forward_dag& f) {
  const nlohmann::json j = remat::io::to_json(f);
  static constexpr std::array<std::string_view, 15> op_keys = {"name",
                                                               "inputs",
                                                               "forward_time",
                                                               "backward_time",
                                                               "output_bytes",
                                                               "phantom_bytes",
                                                               "backward_reads",
                                                               "forward_overhead_bytes",
                                                               "backward_overhead_bytes",
                                                               "forward_save_overhead_bytes",
                                                               "forward_flops",
                                                               "backward_flops",
                                                               "forward_bytes_moved",
                                                               "backward_bytes_moved",
                                                               "parameters"};
  static constexpr std::array<std::string_view, 4> parameter_keys = {"name", "bytes", "trainable",
                                                                     "dtype"};
  static constexpr std::array<std::string_view, 4> cost_keys = {"device", "peak_flops",
                                                                "memory_bandwidth", "rule"};
  auto fields = [](const nlohmann::json& obj, const auto& keys) {
    std::string s = "{";
    for (std::string_view k : keys) {
      const auto it = obj.find(std::string(k));
      if (it == obj.end()) continue;
      s += (s.size() > 1 ? ", " : "") + nlohmann::json(std::string(k)).dump() + ": " + it->dump();
    }
    return s + "}";
  };
  std::string out = "{\n  \"name\": " + j["name"].dump() +
                    ",\n  \"input_bytes\": " + j["input_bytes"].dump() + ",\n";
  if (j.contains("cost_model"))
    out += "  \"cost_model\": " + fields(j["cost_model"], cost_keys) + ",\n";
  if (j.contains("parameters")) {
    out += "  \"parameters\": [\n";
    const auto& ps = j["parameters"];
    for (std::size_t i = 0; i < ps.size(); ++i)
      out += "    " + fields(ps[i], parameter_keys) + (i + 1 < ps.size() ? ",\n" : "\n");
    out += "  ],\n";
  }
  out += "  \"ops\": [\n";
  const auto& ops = j["ops"];
  for (std::size_t i = 0; i < ops.size(); ++i)
    out += "    " + fields(ops[i], op_keys) + (i + 1 < ops.size() ? ",\n" : "\n");
  return out + "  ]\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_args(argc, argv);
  if (auto* u = std::get_if<usage_error>(&parsed)) {
    std::cerr << "remat-zoo: " << u->reason << "\n";
    return 2;
  }
  const options& o = std::get<options>(parsed);
  if (o.help) {
    std::cout << help_text;
    return 0;
  }
  const auto f = o.model == "gpt2"    ? remat::zoo::gpt2(o.gpt2, o.device)
                 : o.model == "llama" ? remat::zoo::llama(o.llama, o.device)
                                      : remat::zoo::resnet(o.resnet, o.device);
  if (!f) {
    std::cerr << "remat-zoo: " << f.message() << "\n";
    return 2;
  }
  const std::string text = dag_text(*f);
  if (o.output.empty()) {
    std::cout << text;
    return 0;
  }
  if (const auto why = remat_cli::write_file(o.output, text)) {
    std::cerr << "remat-zoo: " << *why << "\n";
    return 1;
  }
  remat::bytes activations = 0;
  double time = 0;
  for (const auto& op : f->ops) {
    activations += op.output_bytes + op.phantom_bytes;
    time += op.forward_time + op.backward_time;
  }
  char t[32];
  std::snprintf(t, sizeof t, "%.4g", time);
  remat::bytes weights = 0;
  for (const auto& w : f->parameters) weights += w.size;
  std::cout << "wrote " << o.output << ": " << f->name << "; " << f->ops.size()
            << " ops, outputs and phantoms " << remat::format_bytes(activations)
            << (f->parameters.empty() ? std::string()
                                      : ", parameters " + remat::format_bytes(weights))
            << ", store-all time " << t << " s\n";
  return 0;
}
