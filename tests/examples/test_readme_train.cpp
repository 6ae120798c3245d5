// The guide "Train with your own layers" (docs/guide/train.md) stays true: its program is
// examples/train_example.cpp (which example.train runs) with the checks left out, and its table of
// optional members names every member the exec headers (the executor, the profiler, train.hpp and
// what they include) look for on a tensor or a layer.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#ifndef REMAT_SOURCE_DIR
#define REMAT_SOURCE_DIR "."
#endif

namespace {

std::string read(const std::string& relative) {
  std::ifstream in(std::string(REMAT_SOURCE_DIR) + "/" + relative);
  REQUIRE_MESSAGE(in.good(), "cannot read ", relative, " (REMAT_SOURCE_DIR is ", REMAT_SOURCE_DIR,
                  ")");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}
bool word_char(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }
/// The members called in a line of code on a tensor, layer or context: `x.member(` where x is
/// t, layer, ctx, acc or deref(name). (A scanner, not <regex>: GCC 12's <regex> trips
/// -Wmaybe-uninitialized in the sanitizer build.)
std::vector<std::string> member_calls(const std::string& code) {
  std::vector<std::string> out;
  for (std::size_t dot = code.find('.'); dot != std::string::npos; dot = code.find('.', dot + 1)) {
    std::size_t e = dot + 1;
    while (e < code.size() && word_char(code[e])) ++e;
    if (e == dot + 1 || e >= code.size() || code[e] != '(') continue;
    bool receiver = false;
    if (dot > 0 && code[dot - 1] == ')') {  // deref(name)
      std::size_t b = dot - 1;
      while (b > 0 && word_char(code[b - 1])) --b;
      receiver = b > 0 && b < dot - 1 && code[b - 1] == '(' && b >= 6 &&
                 code.compare(b - 6, 6, "deref(") == 0;
    } else {
      std::size_t b = dot;
      while (b > 0 && word_char(code[b - 1])) --b;
      const std::string name = code.substr(b, dot - b);
      const bool boundary =
          b == 0 || !(word_char(code[b - 1]) || (code[b - 1] >= '0' && code[b - 1] <= '9') ||
                      (code[b - 1] >= 'A' && code[b - 1] <= 'Z'));
      receiver = boundary && (name == "t" || name == "layer" || name == "ctx" || name == "acc");
    }
    if (receiver) out.push_back(code.substr(dot + 1, e - dot - 1));
  }
  return out;
}
/// A line of code without its string literals' text (a static_assert's message shows a call).
std::string without_strings(const std::string& code) {
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (in_string && code[i] == '\\') {
      ++i;
      continue;
    }
    if (code[i] == '"')
      in_string = !in_string;
    else if (!in_string)
      out += code[i];
  }
  return out;
}

/// Every header under include/remat/exec/ (relative paths, sorted) but the CUDA backend's
/// (cuda/), which calls no member of the user's types.
std::vector<std::string> exec_headers() {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(REMAT_SOURCE_DIR) / "include/remat/exec";
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const fs::path rel = e.path().lexically_relative(root);
    if (e.is_regular_file() && e.path().extension() == ".hpp" && *rel.begin() != "cuda")
      out.push_back("include/remat/exec/" + rel.generic_string());
  }
  std::sort(out.begin(), out.end());
  REQUIRE(out.size() >= 4);
  return out;
}

/// The guide's section that starts with `heading`, up to the next "## ".
std::string section(const std::string& page, const std::string& heading) {
  const auto at = page.find("\n" + heading + "\n");
  REQUIRE_MESSAGE(at != std::string::npos, "no section \"", heading, "\"");
  const auto end = page.find("\n## ", at + 1);
  return page.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

/// The guide the checks read.
constexpr const char* guide = "docs/guide/train.md";

}  // namespace

TEST_CASE("docs/guide/train.md: the program is examples/train_example.cpp without its checks") {
  const std::string sec = section(read(guide), "## The complete program");
  const auto begin = sec.find("```cpp\n");
  REQUIRE(begin != std::string::npos);
  const auto end = sec.find("\n```", begin + 7);
  const std::vector<std::string> shown = lines(sec.substr(begin + 7, end - begin - 7));
  const std::vector<std::string> file = lines(read("examples/train_example.cpp"));
  CHECK(shown.size() > 100);
  // Every line of the guide's program is a line of the example, in the same order.
  std::size_t at = 0;
  for (const auto& l : shown) {
    while (at < file.size() && file[at] != l) ++at;
    INFO("docs/guide/train.md line not in examples/train_example.cpp (or out of order): ", l);
    REQUIRE(at < file.size());
    ++at;
  }
}

TEST_CASE("docs/guide/train.md: the table of optional members names every member looked for") {
  // Members the library calls: required ones, and the optional ones the table must name.
  const std::set<std::string> required = {"forward", "forward_save", "backward", "bytes"};
  const std::set<std::string> optional = {"item",           "storage",          "zero_grad",
                                          "random_state",   "set_random_state", "name",
                                          "backward_reads", "parameters"};
  // Member calls on a tensor, layer or context in the exec headers (code lines, not comments).
  std::set<std::string> called;
  for (const auto& h : exec_headers())
    for (const auto& l : lines(read(h))) {
      const auto code = without_strings(l.substr(0, l.find("//")));
      for (const auto& m : member_calls(code)) called.insert(m);
    }
  for (const auto& c : called) {
    INFO("the library calls the member ", c,
         "(): add it to this test's lists and, if optional, to the table of docs/guide/train.md");
    CHECK((required.count(c) + optional.count(c)) == 1);
  }
  for (const auto& m : required) CHECK(called.count(m) == 1);  // the scan sees every call
  for (const auto& m : optional) CHECK(called.count(m) == 1);
  // Each optional member is in a row of the guide's table.
  std::string rows;
  for (const auto& l : lines(section(read(guide), "## What your types provide")))
    if (l.rfind("| ", 0) == 0) rows += l + "\n";
  for (const auto& o : optional) {
    INFO("the table of optional members of docs/guide/train.md lacks ", o);
    CHECK(rows.find(" " + o + "(") != std::string::npos);
  }
  // And the members that are operators or overloads: += (as_graph_layer) and the loss's targets.
  CHECK(rows.find("operator+=") != std::string::npos);
  CHECK(rows.find("forward(x, targets, b)") != std::string::npos);
}
