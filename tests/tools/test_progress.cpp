// remat-plan's progress display (examples/progress.hpp): the line for each kind of report, and
// what it writes on a terminal, on a log and when off (a temporary file stands for stderr).
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include "progress.hpp"

using remat_cli::progress_display;
using remat_cli::progress_line;
using remat_cli::progress_state;

namespace {

/// Everything written to f.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int ch; (ch = std::fgetc(f)) != EOF;) s += static_cast<char>(ch);
  return s;
}

}  // namespace

TEST_CASE("progress: the line of a DP, a MILP and rockmate") {
  CHECK(progress_line("rotor", {.elapsed = 1.25, .fraction = 0.421}) ==
        "remat-plan: rotor 1.2 s: 42%");
  CHECK(progress_line("rotor", {.elapsed = 0, .fraction = 1.7}) == "remat-plan: rotor 0.0 s: 100%");
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(progress_line("checkmate", {.elapsed = 12.3, .incumbent = 1.25, .bound = 1.0}) ==
        "remat-plan: checkmate 12.3 s: best 1.25 s, bound 1 s, gap 20.00%");
  CHECK(progress_line("checkmate", {.elapsed = 0.4, .incumbent = inf, .bound = 1.1}) ==
        "remat-plan: checkmate 0.4 s: no schedule yet, bound 1.1 s");
  CHECK(progress_line("checkmate", {.elapsed = 0.1, .incumbent = inf, .bound = -inf}) ==
        "remat-plan: checkmate 0.1 s: no schedule yet");
  CHECK(progress_line("rockmate",
                      {.elapsed = 3.1, .blocks = std::pair{2, 5}, .solves = std::pair{130, 500}}) ==
        "remat-plan: rockmate 3.1 s: blocks 2 of 5 kinds, solves 130 of 500");
}

TEST_CASE(
    "progress: a terminal line overwrites itself and is erased; a log has a line per step; off "
    "writes nothing") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    progress_display d("rotor", progress_display::mode::terminal, f);
    d.percent(0.5);
    d.percent(1.0);  // the last report is always drawn
    d.done(true);
  }
  const std::string term = contents(f);
  CHECK(term.rfind("\rremat-plan: rotor ", 0) == 0);
  CHECK(term.find("50%\x1b[K") != std::string::npos);
  CHECK(term.find("100%\x1b[K") != std::string::npos);
  CHECK(term.find('\n') == std::string::npos);
  CHECK(term.substr(term.size() - 4) == "\r\x1b[K");  // erased for what follows
  std::fclose(f);

  f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    progress_display d("rotor", progress_display::mode::log, f);
    for (int i = 0; i <= 95; i += 5) d.percent(i / 100.0);
    d.done(true);  // a DP that finished says 100% once
  }
  const std::string log = contents(f);
  int lines = 0;
  for (char ch : log) lines += ch == '\n';
  CHECK(lines == 11);  // 0%, 10%, ..., 90%, 100%
  CHECK(log.find("\r") == std::string::npos);
  CHECK(log.find(": 100%\n") != std::string::npos);
  std::fclose(f);

  f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    // A MILP on a log: a line every 5 s, and its last report at the end.
    progress_display d("checkmate", progress_display::mode::log, f);
    d.report({.incumbent = 2.0, .bound = 0.5});
    d.report({.incumbent = 1.0, .bound = 0.5});
    d.done(true);
  }
  const std::string milp = contents(f);
  CHECK(milp.find("best 2 s, bound 0.5 s, gap 75.00%\n") != std::string::npos);
  CHECK(milp.find("best 1 s, bound 0.5 s, gap 50.00%\n") != std::string::npos);
  std::fclose(f);

  f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    progress_display d("checkmate", progress_display::mode::off, f);
    CHECK_FALSE(d.on());
    d.report({.incumbent = 1.0, .bound = 0.5});
    d.done(true);
  }
  CHECK(contents(f).empty());
  std::fclose(f);
}
