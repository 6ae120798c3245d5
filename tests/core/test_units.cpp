// core/units.hpp: bytes and seconds as people read them, the one int-to-index cast; and
// core/machine.hpp's one meaning of a bandwidth (0: no link, infinity: instantaneous).

#include <cmath>
#include <limits>
#include <string>

#include <doctest/doctest.h>

#include <remat/core/closest_name.hpp>
#include <remat/core/machine.hpp>
#include <remat/core/units.hpp>

using namespace remat;
using namespace remat::literals;

TEST_CASE("units: format_bytes, format_size and format_seconds") {
  CHECK(format_bytes(512) == "512 bytes");
  CHECK(format_bytes(123456789) == "123456789 bytes (117.7 MiB)");
  CHECK(format_bytes(1_GiB) == "1073741824 bytes (1.0 GiB)");
  CHECK(format_bytes(-2048) == "-2048 bytes (-2.0 KiB)");
  CHECK(format_size(1023) == "1023 bytes");
  CHECK(format_size(1024) == "1.0 KiB");
  CHECK(format_size(3_MiB / 2) == "1.5 MiB");
  CHECK(format_seconds(0.02718) == "0.02718 s");
  CHECK(format_seconds(1234.5) == "1234 s");
  CHECK(detail::ix(7) == std::size_t{7});
}

TEST_CASE("machine: bandwidth 0 is no link, infinity instantaneous, NaN or negative refused") {
  CHECK(machine{}.transfers());
  CHECK(machine::with_bandwidth(12e9).transfers());
  CHECK_FALSE(machine::without_transfers().transfers());
  CHECK_FALSE((machine{1e9, 0, unlimited_bytes}.transfers()));
  CHECK_FALSE(machine_error(machine::without_transfers()).has_value());
  const auto nan = std::numeric_limits<double>::quiet_NaN();
  const auto bad = machine_error(machine{nan, 1, 0});
  REQUIRE(bad.has_value());
  CHECK(bad->find("device-to-host") != std::string::npos);
  CHECK(bad->find("0: no link") != std::string::npos);
  CHECK(machine_error(machine{1, -1, 0})->find("host-to-device") != std::string::npos);
  CHECK(machine_error(machine{1, 1, -5})->find("host memory") != std::string::npos);
}

TEST_CASE("closest_name: the name a user most likely meant") {
  const std::string_view names[] = {"--budget", "--policy", "output_bytes", "rotor"};
  CHECK(closest_name("--budgt", names) == "--budget");
  CHECK(closest_name("--polcy", names) == "--policy");
  CHECK(closest_name("output", names) == "output_bytes");  // a prefix of 4 or more characters
  CHECK(closest_name("rotr", names) == "rotor");
  CHECK_FALSE(closest_name("something else", names).has_value());
}
