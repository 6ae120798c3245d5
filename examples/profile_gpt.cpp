// Measured costs next to modelled ones: the Eigen GPT-like DAG model (eg::make_gpt_dag, the
// layers of examples/eigen) profiled on this host with profile_dag, beside the zoo's GPT-2 model
// of the same configuration (include/remat/zoo/gpt2.hpp, roofline times on a named device), op by
// op for the transformer layers the two share (17 ops each: ln_1, q, k, v, scores, softmax,
// dropout, context, projection, dropout, add, ln_2, fc, gelu, fc2, dropout, add).
//
//   profile-gpt [--layers 2] [--width 64] [--heads 4] [--sequence 32] [--batch 4]
//               [--device V100] [--repetitions 5] [-o measured.json]
//
// Sizes must agree (both are fp32 and count the same tensors; the table marks any that do not);
// times differ by the host against the modelled device. With -o the measured forward DAG is
// written in the graph format, to plan with remat-plan --graph.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <eigen/models.hpp>

#include <remat/exec/profiler.hpp>
#include <remat/io/graph_json.hpp>
#include <remat/zoo/gpt2.hpp>

#include "cli.hpp"  // tools/common

int main(int argc, char** argv) {
  int layers = 2, width = 64, heads = 4, sequence = 32, batch = 4, repetitions = 5;
  std::string device = "V100", output;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) {
        std::cerr << "profile-gpt: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    auto integer = [&](int& x) {
      const auto v = remat_cli::parse_int<int>(value());
      if (!v || *v <= 0) {
        std::cerr << "profile-gpt: " << a << " needs an integer > 0\n";
        std::exit(2);
      }
      x = *v;
    };
    if (a == "--layers")
      integer(layers);
    else if (a == "--width")
      integer(width);
    else if (a == "--heads")
      integer(heads);
    else if (a == "--sequence")
      integer(sequence);
    else if (a == "--batch")
      integer(batch);
    else if (a == "--repetitions")
      integer(repetitions);
    else if (a == "--device")
      device = value();
    else if (a == "-o")
      output = value();
    else {
      std::cerr << "profile-gpt: unknown option '" << a
                << "' (--layers --width --heads --sequence --batch --device --repetitions -o)\n";
      return 2;
    }
  }
  if (width % heads != 0) {
    std::cerr << "profile-gpt: --heads must divide --width\n";
    return 2;
  }
  const auto dev = remat::zoo::find_device(device);
  if (!dev) {
    std::cerr << "profile-gpt: unknown device '" << device << "'\n";
    return 2;
  }
  remat::zoo::gpt2_config cfg;
  cfg.layers = layers;
  cfg.width = width;
  cfg.heads = heads;
  cfg.sequence = sequence;
  cfg.batch = batch;
  const auto modelled = remat::zoo::gpt2(cfg, *dev);
  if (!modelled) {
    std::cerr << "profile-gpt: " << modelled.message() << '\n';
    return 1;
  }

  eg::dag d = eg::make_gpt_dag(layers, width, heads, sequence, batch, 0.1f, 1);
  remat::exec::host_backend b;
  const auto tokens = static_cast<eg::index>(batch) * sequence;
  auto measured = remat::exec::profile_dag(
      d, eg::make_input(b, tokens, width, 2), b,
      {.repetitions = repetitions, .warmup = 1, .name = "eg GPT (measured)"});
  if (!measured) {
    std::cerr << "profile-gpt: " << measured.message() << '\n';
    return 1;
  }

  // The transformer layers' ops, in order, in both (the zoo's names differ: h0.attn.q, ...).
  auto layer_ops = [](const remat::forward_dag& f) {
    std::vector<const remat::forward_op*> v;
    for (const auto& op : f.ops)
      if (op.name.size() > 1 && op.name[0] == 'h' && op.name.find('.') != std::string::npos &&
          std::isdigit(static_cast<unsigned char>(op.name[1])))
        v.push_back(&op);
    return v;
  };
  const auto m = layer_ops(*measured), z = layer_ops(*modelled);
  std::printf(
      "GPT, %d layers, width %d, %d heads, sequence %d, batch %d, fp32: %zu layer ops measured on "
      "this host, "
      "%zu modelled on %s\n\n",
      layers, width, heads, sequence, batch, m.size(), z.size(), device.c_str());
  std::printf("%-16s %-22s %12s %12s %12s %12s %12s %12s\n", "op (measured)", "op (modelled)",
              "out B", "out B (m)", "phantom B", "phantom (m)", "fwd us", "fwd us (m)");
  int size_mismatches = 0;
  for (std::size_t i = 0; i < m.size() && i < z.size(); ++i) {
    const bool same = m[i]->output_bytes == z[i]->output_bytes;
    size_mismatches += !same;
    std::printf("%-16s %-22s %12lld %12lld %12lld %12lld %12.1f %12.3f%s\n", m[i]->name.c_str(),
                z[i]->name.c_str(), static_cast<long long>(m[i]->output_bytes),
                static_cast<long long>(z[i]->output_bytes),
                static_cast<long long>(m[i]->phantom_bytes),
                static_cast<long long>(z[i]->phantom_bytes), m[i]->forward_time * 1e6,
                z[i]->forward_time * 1e6, same ? "" : "  <- output sizes differ");
  }
  if (m.size() != z.size())
    std::printf("\nthe two have different numbers of layer ops (%zu, %zu)\n", m.size(), z.size());
  std::printf("\n%d of %zu output sizes differ\n", size_mismatches, std::min(m.size(), z.size()));
  if (!output.empty()) {
    std::ofstream(output) << remat::io::to_json(*measured).dump(1) << '\n';
    std::printf("measured forward DAG written to %s\n", output.c_str());
  }
  return 0;
}
