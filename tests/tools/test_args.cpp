// The tools' option parser and value readers (tools/common/args.hpp).

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "args.hpp"

using remat_cli::option;

namespace {
struct parsed {
  std::optional<std::string> error;
  std::string name, size;
  bool flag = false;
};

parsed parse(std::vector<std::string_view> args) {
  parsed p;
  const std::vector<option> table = {
      {"--name", true, "-n",
       [&](const std::string& v) -> std::optional<std::string> {
         if (v.empty()) return "--name needs a name";
         p.name = v;
         return std::nullopt;
       }},
      {"--size",
       true,
       {},
       [&](const std::string& v) -> std::optional<std::string> {
         p.size = v;
         return std::nullopt;
       }},
      {"--flag",
       false,
       {},
       [&](const std::string&) -> std::optional<std::string> {
         p.flag = true;
         return std::nullopt;
       }},
  };
  p.error = remat_cli::parse_options(args, table, "tool", "every argument is an option");
  return p;
}
}  // namespace

TEST_CASE("args: values, the = form, aliases and flags") {
  const auto p = parse({"--name", "a", "--size=12", "--flag"});
  CHECK_FALSE(p.error);
  CHECK(p.name == "a");
  CHECK(p.size == "12");
  CHECK(p.flag);
  CHECK(parse({"-n", "b"}).name == "b");
}

TEST_CASE("args: every usage error says what is wrong") {
  CHECK(parse({"stray"}).error == "unexpected argument 'stray'; every argument is an option");
  CHECK(parse({"--flag=1"}).error == "option --flag takes no value");
  CHECK(parse({"--name"}).error == "option --name needs a value");
  CHECK(parse({"-n"}).error == "option -n needs a value");
  CHECK(parse({"--name", "--flag"}).error == "option --name needs a value");
  CHECK(parse({"--nmae", "x"}).error ==
        "unknown option '--nmae' (did you mean --name?); run 'tool --help' for the options");
  CHECK(parse({"--zzzzzz"}).error ==
        "unknown option '--zzzzzz'; run 'tool --help' for the options");
  CHECK(parse({"--name="}).error == "--name needs a name");  // what apply refuses
}

TEST_CASE("args: byte counts with binary suffixes") {
  std::string why;
  CHECK(remat_cli::parse_bytes("1073741824", why) == 1073741824);
  CHECK(remat_cli::parse_bytes("1.5GiB", why) == (remat::bytes{3} << 29));
  CHECK(remat_cli::parse_bytes("512 MiB", why) == (remat::bytes{512} << 20));
  CHECK(remat_cli::parse_bytes("2k", why) == 2048);
  CHECK_FALSE(remat_cli::parse_bytes("1GB", why));
  CHECK(why.find("ambiguous") != std::string::npos);
  CHECK_FALSE(remat_cli::parse_bytes("1.5", why));
  CHECK(why.find("whole number") != std::string::npos);
  CHECK_FALSE(remat_cli::parse_bytes("lots", why));
  CHECK_FALSE(remat_cli::parse_bytes("99999999999TiB", why));
  CHECK(why.find("too large") != std::string::npos);
}

TEST_CASE("args: bandwidths: numbers, suffixes, 0 and inf") {
  std::string why;
  CHECK(remat_cli::parse_bandwidth("12e9", why) == 12e9);
  CHECK(remat_cli::parse_bandwidth("12GiB/s", why) == 12.0 * (1 << 30));
  CHECK(remat_cli::parse_bandwidth("0", why) == 0.0);
  CHECK(remat_cli::parse_bandwidth("-0", why) == 0.0);
  CHECK(std::isinf(*remat_cli::parse_bandwidth("inf", why)));
  CHECK_FALSE(remat_cli::parse_bandwidth("-3", why));
  CHECK(why.find("negative") != std::string::npos);
  CHECK_FALSE(remat_cli::parse_bandwidth("nan", why));
  CHECK_FALSE(remat_cli::parse_bandwidth("12 furlongs", why));
  CHECK(why.find("unknown unit") != std::string::npos);
}
