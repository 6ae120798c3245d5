// Chrome traces of plans (io/trace.hpp): the file parses as JSON, has one complete event per
// instruction on its lane at the simulated times, the memory counter is the timeline's, names
// are escaped, and planned and measured timelines share one file as two processes.
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <remat/io/trace.hpp>
#include <remat/remat.hpp>

using namespace remat;
using nlohmann::json;

namespace {

bool has_substr(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// A name as the trace writes it: the byte 0xff, not UTF-8, becomes U+FFFD.
std::string as_written(std::string s) {
  for (auto at = s.find('\xff'); at != std::string::npos; at = s.find('\xff'))
    s.replace(at, 1, "\xef\xbf\xbd");
  return s;
}

/// A 3-stage chain (the last the loss) whose names need escaping.
chain odd_names() {
  chain c{"odd", 100, {}};
  c.stages.push_back({"conv \"1\"\\", 1.0, 2.0, 400, 900});
  c.stages.push_back({"tab\there\x01", 0.5, 1.5, 300, 700});
  c.stages.push_back({"loss \xff\xe2\x86\x92", 0.25, 0.25, 8, 8});
  return c;
}

/// A time of the trace (microseconds) in whole nanoseconds.
long long ns(const json& microseconds) { return std::llround(microseconds.get<double>() * 1000); }

/// The events of one kind ("X", "C", "M") of process pid.
std::vector<json> events(const json& trace, const std::string& ph, int pid) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == ph && e["pid"] == pid) out.push_back(e);
  return out;
}

}  // namespace

TEST_CASE(
    "trace: one event per instruction at the simulated times, the memory counter, escaped names") {
  const chain c = odd_names();
  // An offloading program, on a link slow enough that the copies take time.
  const auto s = parse_chain_program(3, "F1_ck F2_all O1 W1 F3_all B3 P1 W1 B2 F1_all B1");
  REQUIRE_MESSAGE(s.ok(), s.message());
  const bytes budget = 4000;
  const auto r = sim::simulate(c, *s, {.budget = budget, .hw = machine::with_bandwidth(200)});
  REQUIRE_MESSAGE(r.valid, r.first_violation->message);
  REQUIRE(r.timeline.size() == s->ops.size());

  const auto text = io::chrome_trace(io::trace_of(c, *s, r, "planned: \"hand\"\n", budget));
  REQUIRE_MESSAGE(text.ok(), text.message());
  const json t = json::parse(*text, nullptr, false);
  REQUIRE(t.is_object());
  CHECK(t["displayTimeUnit"] == "ms");
  REQUIRE(t["traceEvents"].is_array());

  // Process and lane names.
  const auto meta = events(t, "M", 1);
  auto named = [&](const std::string& what, int tid) {
    for (const auto& e : meta)
      if (e["name"] == what && e["tid"] == tid) return e["args"]["name"].get<std::string>();
    return std::string("(none)");
  };
  CHECK(named("process_name", 0) == "planned: \"hand\"\n");
  CHECK(named("thread_name", io::trace_thread(sim::lane::compute)) == "compute");
  CHECK(named("thread_name", io::trace_thread(sim::lane::device_to_host)) == "device\u2192host");
  CHECK(named("thread_name", io::trace_thread(sim::lane::host_to_device)) == "host\u2192device");

  // One complete event per instruction, on its lane, at the simulator's times, named as printed.
  const auto xs = events(t, "X", 1);
  REQUIRE(xs.size() == s->ops.size());
  const auto labels = io::instruction_labels(c, *s);
  int transfers = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const json& e = xs[i];
    const sim::memory_point& p = r.timeline[i];
    CAPTURE(i);
    CHECK(e["args"]["op"] == i);
    CHECK(e["args"]["instruction"] == to_string(s->ops[i]));
    CHECK(e["tid"] == io::trace_thread(p.lane));
    // To the nanosecond, and ts + dur is the end exactly.
    CHECK(ns(e["ts"]) == std::llround(p.start * 1e9));
    CHECK(ns(e["ts"]) + ns(e["dur"]) == std::llround(p.end * 1e9));
    CHECK(e["args"]["before_bytes"] == p.before);
    CHECK(e["args"]["peak_bytes"] == p.peak);
    CHECK(e["args"]["after_bytes"] == p.after);
    CHECK(e["name"] == as_written(labels[i]));
    transfers += p.lane != sim::lane::compute;
    if (p.lane != sim::lane::compute) CHECK(e["dur"].get<double>() > 0);
  }
  CHECK(transfers == 2);
  CHECK(xs[0]["name"] == "F1_ck");
  CHECK(xs[0]["cat"] == "compute");
  CHECK(xs[2]["name"] == "O1");
  // B3 lowers to the loss, bwd 3 and frees: the loss and the frees carry the chain op's word and
  // their graph names, escaped.
  bool escaped = false;
  for (const auto& e : xs) escaped |= e["name"] == "B3: free grad loss \xef\xbf\xbd\xe2\x86\x92";
  CHECK(escaped);
  CHECK(has_substr(*text, "tab\\there\\u0001"));

  // The memory counter: the first point's memory at 0, then each compute-lane point's peak at
  // its start and its after at its end.
  std::vector<std::pair<long long, bytes>> want{{0, r.timeline.front().before}};
  for (const auto& p : r.timeline)
    if (p.lane == sim::lane::compute) {
      want.emplace_back(std::llround(p.start * 1e9), p.peak);
      want.emplace_back(std::llround(p.end * 1e9), p.after);
    }
  std::vector<std::pair<long long, bytes>> got, budget_line;
  for (const auto& e : events(t, "C", 1))
    (e["name"] == "device memory" ? got : budget_line)
        .emplace_back(ns(e["ts"]), e["args"]["bytes"].get<bytes>());
  CHECK(got == want);
  REQUIRE(budget_line.size() == 2);
  CHECK(budget_line[0] == std::pair{0LL, budget});
  CHECK(budget_line[1].second == budget);
  CHECK(budget_line[1].first == std::llround(r.makespan * 1e9));

  // Times are microseconds with at most three decimals (whole nanoseconds).
  CHECK(has_substr(*text, "\"ts\":1000000,"));  // F2_all starts at 1 s
  CHECK(!has_substr(*text, "0000000001"));
}

TEST_CASE(
    "trace: two timelines as two processes; graph names; a report of another schedule is refused") {
  const chain c = odd_names();
  const auto g = build_graph(c);
  REQUIRE(g.ok());
  const auto s = store_all{}.solve(*g, unlimited_bytes);
  REQUIRE(s.ok());
  const auto r = sim::simulate(*g, *s);
  REQUIRE(r.valid);
  const std::vector<io::trace_process> both{io::trace_of(*g, *s, r, "planned: store_all"),
                                            io::trace_of(*g, *s, r, "measured")};
  const auto text = io::chrome_trace(both);
  REQUIRE_MESSAGE(text.ok(), text.message());
  const json t = json::parse(*text, nullptr, false);
  REQUIRE(t.is_object());
  for (int pid : {1, 2}) {
    const auto xs = events(t, "X", pid);
    REQUIRE(xs.size() == s->ops.size());
    for (std::size_t i = 0; i < xs.size(); ++i)
      CHECK(xs[i]["name"] == as_written(to_string(*g, s->ops[i])));
    CHECK(events(t, "C", pid).size() == 1 + 2 * s->ops.size());  // no budget counter: unlimited
  }

  // A timeline longer than the program: another schedule's report.
  const schedule shorter{{s->ops.begin(), s->ops.begin() + 2}, 0, 0};
  const auto bad = io::chrome_trace(io::trace_of(*g, shorter, r, "x"));
  CHECK(bad.code() == status::invalid_problem);
  CHECK(has_substr(bad.message(), "another schedule"));
  // A timeline that is empty (record_timeline = false) is an empty trace, still valid JSON.
  const auto empty = sim::simulate(*g, *s, {.record_timeline = false});
  const auto none = io::chrome_trace(io::trace_of(*g, *s, empty, "no timeline"));
  REQUIRE(none.ok());
  CHECK(json::parse(*none, nullptr, false).is_object());
}

TEST_CASE("trace: the JSON text of names and times") {
  auto str = [](std::string_view s) {
    std::string out;
    io::detail::append_json_string(out, s);
    return out;
  };
  CHECK(str("a\"b\\c\n\x1f") == "\"a\\\"b\\\\c\\n\\u001f\"");
  CHECK(str("\xe2\x86\x92 \xc3\xa9") == "\"\xe2\x86\x92 \xc3\xa9\"");  // UTF-8 kept
  CHECK(str("\xff\xc3\x28\xed\xa0\x80") ==
        "\"\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffd\"");  // not UTF-8
  auto us = [](seconds t) {
    std::string out;
    io::detail::append_microseconds(out, t);
    return out;
  };
  CHECK(us(0) == "0");
  CHECK(us(1.5) == "1500000");
  CHECK(us(0.0012347) == "1234.7");
  CHECK(us(1.5e-9) == "0.002");
  CHECK(us(1e10) == "1e+16");  // past 2^62 ns: the double
  CHECK(json::parse(us(1e10)).get<double>() == 1e16);
}
