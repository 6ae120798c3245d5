#pragma once
// The machine a schedule runs on, as the simulator and the policies see it: the transfer links
// between device and host (bytes per second each way), the host memory that offloaded data
// may take, and for the planners of parameters (offmate) the optimizer's speed on the device and
// on the host and the host's management time per step. A policy that plans transfers has a
// `machine hw` knob (policy/concepts.hpp, machine_of) and the finishing step replays its
// schedule on that machine.
//
// One meaning for every bandwidth, wherever it is given: infinity is an instantaneous copy, a
// positive number a copy at that speed, and 0 no link at all (no transfer in that direction:
// a policy then plans without transfers, and the simulator refuses a program that has one).

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include <remat/core/units.hpp>

namespace remat {

/// PCIe 3.0 x16, about 12 GB/s each way in practice: the offloading policies' default link.
inline constexpr double pcie3_x16_bandwidth = 12e9;

struct machine {
  double device_to_host = std::numeric_limits<double>::infinity();  ///< bytes/s of offloads
  double host_to_device = std::numeric_limits<double>::infinity();  ///< bytes/s of prefetches
  bytes host_memory = unlimited_bytes;  ///< what offloaded data may hold
  /// Bytes of trainable parameters the optimizer updates per second on the device and on the
  /// host (OFFMATE's alpha_G, alpha_C; infinity: instantaneous).
  double gpu_optimizer_speed = std::numeric_limits<double>::infinity();
  double cpu_optimizer_speed = std::numeric_limits<double>::infinity();
  /// The host's management time per step of an OFFMATE plan (its H: launching the step's work).
  seconds step_overhead = 0;

  /// The same bandwidth both ways (0: no link).
  static constexpr machine with_bandwidth(double bytes_per_second) {
    machine m;
    m.device_to_host = m.host_to_device = bytes_per_second;
    return m;
  }
  /// No link between device and host: nothing can be offloaded.
  static constexpr machine without_transfers() { return with_bandwidth(0); }
  /// Data can go to the host and come back (both links exist).
  [[nodiscard]] constexpr bool transfers() const {
    return device_to_host > 0 && host_to_device > 0;
  }
  friend constexpr bool operator==(const machine&, const machine&) = default;
};

/// Why a machine description is not usable; nullopt when it is.
inline std::optional<std::string> machine_error(const machine& m) {
  auto bad_rate = [](double v) { return std::isnan(v) || v < 0; };
  auto text = [](double v) { return std::isnan(v) ? std::string("NaN") : std::to_string(v); };
  if (bad_rate(m.device_to_host))
    return "the device-to-host bandwidth must be >= 0 bytes/s (0: no link, infinity: "
           "instantaneous), not " +
           text(m.device_to_host);
  if (bad_rate(m.host_to_device))
    return "the host-to-device bandwidth must be >= 0 bytes/s (0: no link, infinity: "
           "instantaneous), not " +
           text(m.host_to_device);
  if (m.host_memory < 0)
    return "the host memory must be a byte count >= 0, not " + std::to_string(m.host_memory);
  return std::nullopt;
}

}  // namespace remat
