#pragma once
// The machine a schedule runs on, as the simulator and the policies see it: the transfer lanes
// between device and host (bytes per second each way) and the host memory that offloaded data
// may take. Every policy describes the machine it plans for (policy/concepts.hpp), and the shared
// finishing step re-simulates its schedule on that machine, so an offloading policy's claimed
// time is checked at its real bandwidth. The default machine has instantaneous transfers and
// unbounded host memory (transfers then cost nothing, as in a model without offloading).

#include <cmath>
#include <limits>
#include <optional>
#include <remat/core/units.hpp>
#include <string>

namespace remat {

struct machine {
  double device_to_host = std::numeric_limits<double>::infinity();  ///< bytes/s of offloads
  double host_to_device = std::numeric_limits<double>::infinity();  ///< bytes/s of prefetches
  bytes host_memory = unlimited_bytes;  ///< what offloaded data may hold

  /// The same bandwidth both ways.
  static constexpr machine with_bandwidth(double bytes_per_second) {
    return {bytes_per_second, bytes_per_second, unlimited_bytes};
  }
  friend constexpr bool operator==(const machine&, const machine&) = default;
};

/// Why a machine description is not usable; nullopt when it is.
inline std::optional<std::string> machine_error(const machine& m) {
  auto bad_rate = [](double v) { return std::isnan(v) || !(v > 0); };
  if (bad_rate(m.device_to_host))
    return "the device-to-host bandwidth must be > 0 bytes/s (infinity: instantaneous), not " +
           std::to_string(m.device_to_host);
  if (bad_rate(m.host_to_device))
    return "the host-to-device bandwidth must be > 0 bytes/s (infinity: instantaneous), not " +
           std::to_string(m.host_to_device);
  if (m.host_memory < 0)
    return "the host memory must be a byte count >= 0, not " + std::to_string(m.host_memory);
  return std::nullopt;
}

}  // namespace remat
