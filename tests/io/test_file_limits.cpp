// Files that are not chain or graph files: endless streams, huge files, directories, missing and
// unreadable files (`remat-plan --chain /dev/zero` once read the whole stream).

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include <remat/io/graph_json.hpp>
#include <remat/io/json.hpp>

#include "support/io_checks.hpp"

#ifndef _WIN32
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

using namespace remat;
using remat::testing::says;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

static_assert(io::max_file_bytes == 256u * 1024u * 1024u);

#ifndef _WIN32
// Reading the 256 MiB cap takes a fraction of a second on an idle machine and up to about 2 s
// when the test suite's other programs share its two cores: 5 s still shows that the stream is
// not read to its end.
TEST_CASE("load_chain, load_graph: an endless stream is refused at the cap, within seconds") {
  if (!std::filesystem::exists("/dev/zero")) return;
  auto t0 = std::chrono::steady_clock::now();
  CHECK(
      says(io::load_chain("/dev/zero"), {"cannot read chain file '/dev/zero'", "not a regular file",
                                         "more than the 256 MiB a chain file may have"}));
  CHECK(seconds_since(t0) < 5.0);
  t0 = std::chrono::steady_clock::now();
  CHECK(
      says(io::load_graph("/dev/zero"), {"cannot read graph file '/dev/zero'", "not a regular file",
                                         "more than the 256 MiB a graph file may have"}));
  CHECK(seconds_since(t0) < 5.0);
  // An empty stream is an empty text, not a read error.
  if (std::filesystem::exists("/dev/null"))
    CHECK(says(io::load_chain("/dev/null"), {"'/dev/null'", "the text is empty"}));
}

TEST_CASE("load_chain, load_graph: a file over the cap is refused before it is read") {
  const auto big = remat::testing::scratch("limits_", "big.json");
  {
    std::ofstream out(big);
    out << "{}";
  }
  // Sparse: no disk space, no reading.
  std::filesystem::resize_file(big, io::max_file_bytes + 1);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(says(io::load_chain(big), {big.string(), "it has 268435457 bytes",
                                   "larger than the 256 MiB a chain file may have"}));
  CHECK(says(io::load_graph(big), {big.string(), "larger than the 256 MiB a graph file may have"}));
  CHECK(seconds_since(t0) < 1.0);
  std::filesystem::remove(big);
}

TEST_CASE("read_text_file: the cap counts bytes, streams and regular files alike") {
  const auto f = remat::testing::scratch("limits_", "ten.txt");
  {
    std::ofstream out(f, std::ios::binary);
    out << "0123456789";
  }
  auto r = io::detail::read_text_file(f, "file 'ten'", "a chain", 10);
  REQUIRE(r.ok());
  CHECK(*r == "0123456789");
  CHECK(says(io::detail::read_text_file(f, "file 'ten'", "a chain", 9),
             {"cannot read file 'ten': it has 10 bytes, larger than the 9 bytes a chain file"}));
  CHECK(says(io::detail::read_text_file("/dev/zero", "file 'zero'", "a chain", 1000),
             {"not a regular file and gave more than the 1000 bytes"}));
  std::filesystem::remove(f);
}

TEST_CASE("load_chain, load_graph: missing files, directories, unreadable files") {
  const auto missing = remat::testing::scratch("limits_", "missing.json");
  std::filesystem::remove(missing);
  CHECK(
      says(io::load_chain(missing), {"cannot read chain file", missing.string(), "no such file"}));
  CHECK(
      says(io::load_graph(missing), {"cannot read graph file", missing.string(), "no such file"}));
  const auto dir = std::filesystem::temp_directory_path();
  CHECK(says(io::load_chain(dir), {"cannot read chain file", "it is a directory"}));
  CHECK(says(io::load_graph(dir), {"cannot read graph file", "it is a directory"}));
  // A path through a file ("file.json/x"): not a directory.
  const auto file = remat::testing::scratch("limits_", "plain.json");
  {
    std::ofstream out(file);
    out << "{}";
  }
  CHECK(says(io::load_chain(file / "x"), {"cannot read chain file"}));
  // Unreadable: root reads it anyway, so only as another user.
  if (::geteuid() != 0) {
    std::filesystem::permissions(file, std::filesystem::perms::none);
    CHECK(
        says(io::load_chain(file), {"cannot read chain file", file.string(), "Permission denied"}));
    CHECK(says(io::load_graph(file), {"cannot read graph file", "Permission denied"}));
    std::filesystem::permissions(file, std::filesystem::perms::owner_all);
  }
  std::filesystem::remove(file);
}

#if defined(REMAT_PLAN_EXE)
TEST_CASE("remat-plan --chain /dev/zero fails with the cap's message, quickly") {
  if (!std::filesystem::exists("/dev/zero")) return;
  const auto err = remat::testing::scratch("limits_", "plan.err");
  const std::string cmd = std::string("'") + REMAT_PLAN_EXE +
                          "' --chain /dev/zero --budget 1GiB --policy rotor >/dev/null 2>'" +
                          err.string() + "'";
  const auto t0 = std::chrono::steady_clock::now();
  const int raw = std::system(cmd.c_str());
  CHECK(seconds_since(t0) < 5.0);
  REQUIRE(WIFEXITED(raw));
  CHECK(WEXITSTATUS(raw) == 1);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_MESSAGE(text.find("more than the 256 MiB a chain file may have") != std::string::npos,
                text);
  CHECK(text.find("bad_alloc") == std::string::npos);
  std::filesystem::remove(err);
}
#endif
#endif
