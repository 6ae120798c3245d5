#pragma once
// Traces of plans and runs for chrome://tracing and ui.perfetto.dev, in the Chrome Trace Event
// Format, written without a JSON library: each sim::report (a plan's, or a run measured by the
// executor) becomes a process with lanes for compute and each copy direction, and counters for
// the device memory and the budget. docs/io.md, "Traces".

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/io/labels.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/report.hpp>

namespace remat::io {

/// One timeline of a trace: a process of the viewer.
struct trace_process {
  std::string name;                 ///< "planned: rotor", "measured"
  std::vector<std::string> labels;  ///< per instruction of `program` (instruction_labels)
  schedule program;
  sim::report report;              ///< its timeline is drawn
  bytes budget = unlimited_bytes;  ///< drawn as the "budget" counter when finite
};

/// The process of a chain's schedule and its report (planned or measured).
inline trace_process trace_of(const chain& c, const schedule& s, const sim::report& r,
                              std::string name, bytes budget = unlimited_bytes) {
  return {std::move(name), instruction_labels(c, s), s, r, budget};
}
/// The process of a graph's schedule and its report (planned or measured).
inline trace_process trace_of(const graph& g, const schedule& s, const sim::report& r,
                              std::string name, bytes budget = unlimited_bytes) {
  return {std::move(name), instruction_labels(g, s), s, r, budget};
}

namespace detail {

/// Appends s as a JSON string: quoted, escaped, bytes that are not UTF-8 replaced by U+FFFD.
inline void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if (ch < 0x80) {
      switch (ch) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        default:
          if (ch < 0x20) {
            static constexpr char hex[] = "0123456789abcdef";
            out += "\\u00";
            out += hex[ch >> 4];
            out += hex[ch & 15];
          } else {
            out += static_cast<char>(ch);
          }
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, no overlong form, no surrogate, at most
    // U+10FFFF (RFC 3629).
    const std::size_t len = ch >= 0xc2 && ch <= 0xdf   ? 2
                            : ch >= 0xe0 && ch <= 0xef ? 3
                            : ch >= 0xf0 && ch <= 0xf4 ? 4
                                                       : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && len >= 3) {
      const auto next = static_cast<unsigned char>(s[i + 1]);
      ok = !(ch == 0xe0 && next < 0xa0) && !(ch == 0xed && next >= 0xa0) &&
           !(ch == 0xf0 && next < 0x90) && !(ch == 0xf4 && next >= 0x90);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
}

/// The largest time written in whole nanoseconds: 2^62 ns, about 146 years.
inline constexpr double max_nanosecond_time = 4.611686018427388e9;

/// A time as whole nanoseconds (times beyond max_nanosecond_time are not).
inline long long nanoseconds(seconds t) { return std::llround(t * 1e9); }

/// Appends a time in microseconds, the format's unit. Up to max_nanosecond_time, from whole
/// nanoseconds with three decimals ("1474.5", "0.001"): viewers keep int64 nanoseconds, and an
/// event's ts + dur must be exactly the next event's ts on its lane (ts and dur rounded apart
/// could overlap by a nanosecond, and the viewer would nest the next event in this one). Beyond,
/// the shortest text of the double (JSON has no NaN or infinity: they become 0, which a report's
/// finite times never need).
inline void append_microseconds(std::string& out, seconds t) {
  if (!std::isfinite(t)) t = 0;
  if (std::abs(t) <= max_nanosecond_time) {
    const long long ns = nanoseconds(t);
    const long long whole = (ns < 0 ? -ns : ns) / 1000, frac = (ns < 0 ? -ns : ns) % 1000;
    if (ns < 0) out += '-';
    out += std::to_string(whole);
    if (frac != 0) {
      char digits[5];
      std::snprintf(digits, sizeof digits, ".%03lld", frac);
      std::string_view d(digits);
      while (d.back() == '0') d.remove_suffix(1);
      out += d;
    }
    return;
  }
  std::array<char, 32> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), t * 1e6);
  out.append(buf.data(), ec == std::errc() ? static_cast<std::size_t>(end - buf.data()) : 0);
}

inline std::string_view lane_name(sim::lane l) {
  switch (l) {
    case sim::lane::compute:
      return "compute";
    case sim::lane::device_to_host:
      return "device\u2192host";
    case sim::lane::host_to_device:
      return "host\u2192device";
    case sim::lane::cpu:
      return "CPU";
  }
  return "?";
}

inline std::string_view category(op_kind k) {
  switch (k) {
    case op_kind::compute:
    case op_kind::fast_forward:
      return "compute";
    case op_kind::free:
      return "free";
    case op_kind::offload:
    case op_kind::prefetch:
      return "transfer";
    case op_kind::wait:
      return "wait";
    case op_kind::update:
    case op_kind::cpu_update:
      return "optimizer";
    case op_kind::sync:
      return "sync";
  }
  return "?";
}

}  // namespace detail

/// The thread id of a lane in a trace: compute 1, device→host 2, host→device 3, CPU 4.
inline constexpr int trace_thread(sim::lane l) { return static_cast<int>(l) + 1; }

/// The Chrome trace of the timelines, one process each (pid 1, 2, ... in order). Fails
/// (status::invalid_problem) when a timeline point names an instruction its program does not
/// have, or a process has fewer labels than instructions.
inline result<std::string> chrome_trace(std::span<const trace_process> processes) {
  for (const auto& p : processes) {
    if (p.labels.size() < p.program.ops.size())
      return error{status::invalid_problem,
                   "trace '" + p.name + "': " + std::to_string(p.labels.size()) + " labels for " +
                       std::to_string(p.program.ops.size()) +
                       " instructions (use instruction_labels)",
                   {}};
    for (const auto& pt : p.report.timeline)
      if (pt.op >= p.program.ops.size())
        return error{status::invalid_problem,
                     "trace '" + p.name + "': the report's timeline names instruction " +
                         std::to_string(pt.op) + ", but the schedule has " +
                         std::to_string(p.program.ops.size()) + " (a report of another schedule?)",
                     {}};
  }
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  // Starts an event object: the separator, then the fields common to every event.
  auto begin = [&](std::string_view ph, int pid, int tid, std::string_view name) {
    out += first ? "{\"ph\":\"" : ",\n{\"ph\":\"";
    first = false;
    out += ph;
    out += "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"name\":";
    detail::append_json_string(out, name);
  };
  auto time_field = [&](std::string_view key, seconds t) {
    out += ",\"";
    out += key;
    out += "\":";
    detail::append_microseconds(out, t);
  };
  auto metadata = [&](int pid, int tid, std::string_view name, std::string_view value, int sort) {
    begin("M", pid, tid, name);
    out += ",\"args\":{\"name\":";
    detail::append_json_string(out, value);
    out += "}}";
    begin("M", pid, tid, name == "process_name" ? "process_sort_index" : "thread_sort_index");
    out += ",\"args\":{\"sort_index\":" + std::to_string(sort) + "}}";
  };
  auto counter = [&](int pid, std::string_view name, seconds t, bytes v) {
    begin("C", pid, 0, name);
    time_field("ts", t);
    out += ",\"args\":{\"bytes\":" + std::to_string(v) + "}}";
  };
  for (std::size_t k = 0; k < processes.size(); ++k) {
    const trace_process& p = processes[k];
    const int pid = static_cast<int>(k) + 1;
    metadata(pid, 0, "process_name", p.name, pid);
    const auto& tl = p.report.timeline;
    const bool cpu =
        std::ranges::any_of(tl, [](const auto& pt) { return pt.lane == sim::lane::cpu; });
    for (const auto l :
         {sim::lane::compute, sim::lane::device_to_host, sim::lane::host_to_device, sim::lane::cpu})
      if (l != sim::lane::cpu || cpu)
        metadata(pid, trace_thread(l), "thread_name", detail::lane_name(l), trace_thread(l));
    seconds last = 0;
    for (const auto& pt : tl) {
      const instruction& ins = p.program.ops[pt.op];
      begin("X", pid, trace_thread(pt.lane), p.labels[pt.op]);
      out += ",\"cat\":\"";
      out += detail::category(ins.op);
      out += '"';
      time_field("ts", pt.start);
      // dur = end - start in whole nanoseconds, so that ts + dur is the end's own time.
      const bool exact = std::abs(pt.end) <= detail::max_nanosecond_time &&
                         std::abs(pt.start) <= detail::max_nanosecond_time;
      time_field("dur",
                 exact ? static_cast<double>(std::max(
                             0LL, detail::nanoseconds(pt.end) - detail::nanoseconds(pt.start))) /
                             1e9
                       : std::max(0.0, pt.end - pt.start));
      out += ",\"args\":{\"op\":" + std::to_string(pt.op) + ",\"instruction\":";
      detail::append_json_string(out, to_string(ins));
      out += ",\"before_bytes\":" + std::to_string(pt.before) +
             ",\"peak_bytes\":" + std::to_string(pt.peak) +
             ",\"after_bytes\":" + std::to_string(pt.after) + "}}";
      last = std::max(last, pt.end);
    }
    if (!tl.empty()) counter(pid, "device memory", 0, tl.front().before);
    for (const auto& pt : tl) {
      if (pt.lane != sim::lane::compute) continue;
      counter(pid, "device memory", pt.start, pt.peak);
      counter(pid, "device memory", pt.end, pt.after);
    }
    if (p.budget < unlimited_bytes) {
      counter(pid, "budget", 0, p.budget);
      counter(pid, "budget", std::max(last, p.report.makespan), p.budget);
    }
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

/// The Chrome trace of one timeline.
inline result<std::string> chrome_trace(const trace_process& p) {
  return chrome_trace(std::span(&p, 1));
}

}  // namespace remat::io
