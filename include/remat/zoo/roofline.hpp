#pragma once
// The roofline cost model of the model zoo (zoo/gpt2.hpp, zoo/resnet.hpp): an op's time from its
// work, on a device described by two numbers.
//
// Rule (Williams, Waterman, Patterson, "Roofline: an insightful visual performance model for
// multicore architectures", CACM 52(4), 2009): a kernel is bound either by compute or by memory
// traffic, so
//     time = max(flops / peak_flops, bytes_moved / memory_bandwidth)
// applied once to an op's forward and once to its backward, each taken as a whole: the FLOPs of
// all its kernels summed, and the bytes they read and write in device memory summed. (Applying
// the max per kernel would give a little more time to an op that fuses a matmul with
// elementwise passes, such as GPT-2's attention scores; per op is what the forward DAG can
// carry and what a reader can check: every time in a generated file is this rule applied to the
// op's forward_flops / forward_bytes_moved and backward_flops / backward_bytes_moved.)
//
// Derivation of the work, the same for every generator (each op's comment in gpt2.hpp and
// resnet.hpp gives its numbers):
//   * FLOPs: a multiply-add is 2 FLOPs. A matmul or convolution's backward is 2x its forward
//     FLOPs (one product for the input's gradient, one for the weight's); an op that reads the
//     graph input directly computes only the weight's (the input needs no gradient), 1x.
//     Elementwise ops and reductions are given a nominal count per element, stated where they
//     are made; they are memory-bound on every device here, so the count does not set their time.
//   * Bytes moved: every tensor a kernel reads or writes, counted once per kernel that touches
//     it (no cache reuse across kernels, perfect reuse within one): weights, the input and the
//     output of a forward; for a backward, the output's gradient (dy) once per kernel that reads
//     it, what the backward reads (the saved tensors), and the gradients it writes (inputs' and
//     weights'). An elementwise backward reads dy and what it saved and writes dx: 3 tensors
//     when it saved one (ReLU, GELU, softmax), 2 and a mask for dropout.
//   * Not modelled: kernel launch latency (a few microseconds an op, which makes small ops
//     slower than this), the optimizer step, communication, tensor-core efficiency below peak.
//
// Devices: a name, the peak FLOP/s and the memory bandwidth (bytes/s), from the vendors' data
// sheets (dense math, no structured sparsity; boost clocks):
//   V100     NVIDIA Tesla V100 SXM2: 15.7 TFLOP/s fp32, HBM2 900 GB/s (V100 data sheet, 2020)
//   A100     NVIDIA A100 SXM4 40 GB: 19.5 TFLOP/s fp32, HBM2 1555 GB/s (A100 data sheet, 2021)
//   H100     NVIDIA H100 SXM5 80 GB: 67 TFLOP/s fp32, HBM3 3.35 TB/s (H100 data sheet, 2023)
//   V100-tc, A100-tc, H100-tc: the same memories with the tensor cores' fp16/bf16 dense peak
//            (125, 312 and 989 TFLOP/s), for dtype_bytes = 2 with tensor-core matmuls.
// The peak is the device's, not the dtype's: a generator does not change it with dtype_bytes, so
// pick the preset that matches the math you model (fp32 CUDA cores, or fp16/bf16 tensor cores).
// Real kernels reach 60-90% of either peak; the times here are a lower bound with the right
// proportions between ops, which is what a planner's trade-offs depend on.

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/builder.hpp>

namespace remat::zoo {

/// A device as the roofline sees it.
struct device_model {
  std::string name;
  double peak_flops = 0;        ///< FLOP/s
  double memory_bandwidth = 0;  ///< bytes/s

  friend bool operator==(const device_model&, const device_model&) = default;
};

/// The rule, in the words that generated files carry (forward_dag::costs->rule).
inline constexpr std::string_view roofline_rule =
    "time = max(flops / peak_flops, bytes_moved / memory_bandwidth), per forward and per backward";

namespace devices {
inline device_model v100() { return {"V100", 15.7e12, 900e9}; }
inline device_model a100() { return {"A100", 19.5e12, 1555e9}; }
inline device_model h100() { return {"H100", 67e12, 3.35e12}; }
inline device_model v100_tensor_cores() { return {"V100-tc", 125e12, 900e9}; }
inline device_model a100_tensor_cores() { return {"A100-tc", 312e12, 1555e9}; }
inline device_model h100_tensor_cores() { return {"H100-tc", 989e12, 3.35e12}; }
}  // namespace devices

/// The presets above, in that order.
inline std::vector<device_model> device_presets() {
  return {devices::v100(),
          devices::a100(),
          devices::h100(),
          devices::v100_tensor_cores(),
          devices::a100_tensor_cores(),
          devices::h100_tensor_cores()};
}

/// The preset with this name (case-insensitive: "v100" finds "V100"), or nullopt.
inline std::optional<device_model> find_device(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  for (device_model& d : device_presets())
    if (lower(d.name) == lower(name)) return d;
  return std::nullopt;
}

/// Checks a device: both rates finite and > 0 (a time divides by them).
inline result<void> validate(const device_model& d) {
  for (auto [v, field, unit] :
       {std::tuple{d.peak_flops, "peak_flops", "FLOP/s, e.g. 15.7e12"},
        std::tuple{d.memory_bandwidth, "memory_bandwidth", "bytes/s, e.g. 900e9"}})
    if (!std::isfinite(v) || v <= 0)
      return error{status::invalid_problem,
                   "device_model '" + d.name + "': " + field + " is " + detail::time_text(v) +
                       "; it must be a finite number > 0 (" + unit + ")",
                   {}};
  return {};
}

/// The work of an op's forward or backward: FLOPs, and bytes read and written in device memory.
struct work {
  double flops = 0;
  double bytes = 0;
};

/// The roofline: the time of `w` on `d`.
inline seconds roofline_time(const work& w, const device_model& d) {
  return std::max(w.flops / d.peak_flops, w.bytes / d.memory_bandwidth);
}

/// What a forward DAG carries of the device: forward_dag::costs.
inline cost_model to_cost_model(const device_model& d) {
  return {d.name, d.peak_flops, d.memory_bandwidth, std::string(roofline_rule)};
}

}  // namespace remat::zoo
