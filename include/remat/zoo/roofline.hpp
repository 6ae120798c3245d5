#pragma once
// The roofline cost model of the model zoo (zoo/gpt2.hpp, resnet.hpp, ...), after Williams,
// Waterman and Patterson (CACM 52(4), 2009): an op's forward and backward each take
// max(flops / peak_flops, bytes_moved / memory_bandwidth) on a device described by those two
// numbers; presets for V100, A100, H100 (fp32 and tensor-core peaks) and the RTX 3060.
// docs/zoo.md.

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
/// The consumer card of [Offmate24]'s experiments (12 GB): fp32 peak and GDDR6 bandwidth.
inline device_model rtx3060() { return {"RTX3060", 12.7e12, 360e9}; }
}  // namespace devices

/// The presets above, in that order.
inline std::vector<device_model> device_presets() {
  return {devices::v100(),
          devices::a100(),
          devices::h100(),
          devices::v100_tensor_cores(),
          devices::a100_tensor_cores(),
          devices::h100_tensor_cores(),
          devices::rtx3060()};
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
