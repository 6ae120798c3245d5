// remat-zoo: write the forward DAG of a standard architecture (GPT-2, Llama, ResNet, the
// encoder-decoder Transformer, U-Net) with roofline times, as a graph file for remat-plan --graph
// (docs/json-format.md).
//
//   remat-zoo gpt2 --layers 12 --width 768 --heads 12 --sequence 512 --batch 8 --dtype fp32
//             --device V100 -o gpt2_small.json
//   remat-zoo llama --layers 32 --batch 4 --sequence 512 --device RTX3060 -o llama2_7b.json
//   remat-zoo resnet --depth 50 --batch 32 --image 224 --device A100
//   remat-zoo encoder-decoder --encoder-layers 6 --decoder-layers 6 --device V100
//   remat-zoo unet --levels 4 --image 256 --device V100
//
// The ops, their sizes and the cost rule are stated in include/remat/zoo/gpt2.hpp, llama.hpp,
// resnet.hpp, transformer.hpp, unet.hpp and roofline.hpp. Without -o the JSON goes to stdout;
// with -o a one-line summary does (ops, the sum of output and phantom bytes, the store-all time).
// Exit status: 0 written, 1 the file could not be written, 2 usage error (an unknown option, a
// value that is not a number, a configuration the generator refuses: the reason on stderr).

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/io/graph_json.hpp>
#include <remat/zoo/gpt2.hpp>
#include <remat/zoo/llama.hpp>
#include <remat/zoo/resnet.hpp>
#include <remat/zoo/roofline.hpp>
#include <remat/zoo/transformer.hpp>
#include <remat/zoo/unet.hpp>

#include "cli.hpp"

namespace {

constexpr std::string_view help_text = R"(usage: remat-zoo gpt2 [OPTIONS]
       remat-zoo llama [OPTIONS]
       remat-zoo resnet [OPTIONS]
       remat-zoo encoder-decoder [OPTIONS]
       remat-zoo unet [OPTIONS]
       remat-zoo --help

Writes the forward DAG (the graph file of remat-plan --graph) of a standard architecture, at
the op granularity of PyTorch's autograd, with times from a roofline model:
time = max(flops / peak_flops, bytes_moved / memory_bandwidth) per forward and per backward.
The file carries the device ("cost_model") and each op's FLOPs and bytes moved; those of llama,
encoder-decoder and unet also carry the weights ("parameters") and which ops read them.

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

encoder-decoder (defaults: the Transformer base model of Vaswani et al.):
  --encoder-layers N    encoder layers (default 6)
  --decoder-layers N    decoder layers (default 6)
  --width N             model width d (default 512)
  --heads N             attention heads, dividing the width (default 8)
  --ffn N               the FFN's hidden width (default 2048)
  --source-sequence N   source tokens per sequence (default 512)
  --target-sequence N   target tokens per sequence (default 512)
  --batch N             sequence pairs per batch (default 8)
  --vocab N             the shared vocabulary's size (default 32000)
  --dropout P           dropout probability in [0, 1); 0 leaves the dropout ops out
                        (default 0.1)

unet (defaults: the U-Net of Ronneberger et al. on 256x256 RGB images):
  --levels N            max-pools on the way down, up-convolutions on the way up (default 4)
  --base-channels N     the first level's channels, doubled at each level (default 64)
  --image N             image height and width, divisible by 2^levels (default 256)
  --in-channels N       channels of the input images (default 3)
  --classes N           classes of each pixel (default 2)
  --batch N             images per batch (default 8)

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
  std::string model;  ///< one of `models`
  remat::zoo::gpt2_config gpt2;
  remat::zoo::llama_config llama;
  remat::zoo::resnet_config resnet;
  remat::zoo::encoder_decoder_config encoder_decoder;
  remat::zoo::unet_config unet;
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

constexpr std::array<std::string_view, 5> models = {"gpt2", "llama", "resnet", "encoder-decoder",
                                                    "unet"};

/// Each model's own options; the common ones (common_options) are every model's.
std::vector<std::string_view> own_options(std::string_view model) {
  if (model == "gpt2")
    return {"--layers", "--width", "--heads", "--sequence", "--vocab", "--dropout"};
  if (model == "llama") return {"--layers", "--width", "--heads", "--ffn", "--sequence", "--vocab"};
  if (model == "resnet") return {"--depth", "--image", "--classes"};
  if (model == "encoder-decoder")
    return {"--encoder-layers",  "--decoder-layers",  "--width", "--heads",  "--ffn",
            "--source-sequence", "--target-sequence", "--vocab", "--dropout"};
  return {"--levels", "--base-channels", "--image", "--in-channels", "--classes"};
}
constexpr std::array<std::string_view, 6> common_options = {
    "--batch", "--dtype", "--device", "--peak-flops", "--bandwidth", "--output"};

/// The integer field of the chosen model's configuration that option `name` sets (--batch and
/// --dtype, whose value is the bytes, included), or nullptr.
int* integer_field(options& o, std::string_view name) {
  auto find = [&](std::initializer_list<std::pair<std::string_view, int*>> fields) -> int* {
    for (const auto& [option, field] : fields)
      if (option == name) return field;
    return nullptr;
  };
  if (o.model == "gpt2") {
    auto& c = o.gpt2;
    return find({{"--layers", &c.layers},
                 {"--width", &c.width},
                 {"--heads", &c.heads},
                 {"--sequence", &c.sequence},
                 {"--vocab", &c.vocab},
                 {"--batch", &c.batch},
                 {"--dtype", &c.dtype_bytes}});
  }
  if (o.model == "llama") {
    auto& c = o.llama;
    return find({{"--layers", &c.layers},
                 {"--width", &c.width},
                 {"--heads", &c.heads},
                 {"--ffn", &c.ffn},
                 {"--sequence", &c.sequence},
                 {"--vocab", &c.vocab},
                 {"--batch", &c.batch},
                 {"--dtype", &c.dtype_bytes}});
  }
  if (o.model == "resnet") {
    auto& c = o.resnet;
    return find({{"--depth", &c.depth},
                 {"--image", &c.image},
                 {"--classes", &c.classes},
                 {"--batch", &c.batch},
                 {"--dtype", &c.dtype_bytes}});
  }
  if (o.model == "encoder-decoder") {
    auto& c = o.encoder_decoder;
    return find({{"--encoder-layers", &c.encoder_layers},
                 {"--decoder-layers", &c.decoder_layers},
                 {"--width", &c.width},
                 {"--heads", &c.heads},
                 {"--ffn", &c.ffn},
                 {"--source-sequence", &c.source_sequence},
                 {"--target-sequence", &c.target_sequence},
                 {"--vocab", &c.vocab},
                 {"--batch", &c.batch},
                 {"--dtype", &c.dtype_bytes}});
  }
  auto& c = o.unet;
  return find({{"--levels", &c.levels},
               {"--base-channels", &c.base_channels},
               {"--image", &c.image},
               {"--in-channels", &c.in_channels},
               {"--classes", &c.classes},
               {"--batch", &c.batch},
               {"--dtype", &c.dtype_bytes}});
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
        "give a model: 'remat-zoo gpt2 ...', 'remat-zoo llama ...', 'remat-zoo resnet ...', "
        "'remat-zoo encoder-decoder ...' or 'remat-zoo unet ...' (run 'remat-zoo --help')"};
  o.model = std::string(args[0]);
  if (std::find(models.begin(), models.end(), o.model) == models.end())
    return usage_error{"unknown model '" + o.model +
                       "'; the models are gpt2, llama, resnet, encoder-decoder and unet"};
  const std::vector<std::string_view> own = own_options(o.model);
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
    if (!listed(own) && !listed(common_options)) {
      // Another model's option ("gpt2 and llama"), or no model's.
      std::vector<std::string_view> owners;
      for (std::string_view m : models)
        if (const auto theirs = own_options(m); listed(theirs)) owners.push_back(m);
      if (owners.empty())
        return usage_error{"unknown option '" + std::string(name) +
                           "' (run 'remat-zoo --help' for the options)"};
      std::string list;
      for (std::size_t k = 0; k < owners.size(); ++k)
        list += (k == 0 ? "" : k + 1 == owners.size() ? " and " : ", ") + std::string(owners[k]);
      return usage_error{std::string(name) + " is an option of " + list + ", not of " + o.model};
    }
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
    std::optional<usage_error> e;
    if (name == "--dtype") {
      const int bytes = v == "fp16" || v == "bf16" ? 2 : v == "fp32" ? 4 : v == "fp64" ? 8 : 0;
      if (bytes == 0)
        return usage_error{"--dtype '" + v +
                           "' is not a type; the types are fp16, bf16, fp32, fp64"};
      *integer_field(o, name) = bytes;
    } else if (name == "--dropout") {
      e = number(o.model == "gpt2" ? o.gpt2.dropout : o.encoder_decoder.dropout);
    } else if (name == "--device") {
      device_name = v;
    } else if (name == "--peak-flops") {
      e = number(peak.emplace());
    } else if (name == "--bandwidth") {
      e = number(bandwidth.emplace());
    } else if (name == "--output") {
      if (v.empty()) return usage_error{"--output needs a file name"};
      o.output = v;
    } else {
      e = integer(*integer_field(o, name));
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
  const auto f = o.model == "gpt2"     ? remat::zoo::gpt2(o.gpt2, o.device)
                 : o.model == "llama"  ? remat::zoo::llama(o.llama, o.device)
                 : o.model == "resnet" ? remat::zoo::resnet(o.resnet, o.device)
                 : o.model == "encoder-decoder"
                     ? remat::zoo::encoder_decoder(o.encoder_decoder, o.device)
                     : remat::zoo::unet(o.unet, o.device);
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
