#pragma once
// Pictures of plans as SVG 1.1, written as text (no plotting or XML library): memory_timeline_svg
// draws one replayed program's device memory against the budget, its transfers on a band of their
// own; overhead_curve_svg the budget -> overhead curve of every policy of a sweep. docs/io.md.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/io/file.hpp>
#include <remat/io/labels.hpp>
#include <remat/sim/report.hpp>
#include <remat/sweep_result.hpp>

namespace remat::io {

/// What the memory timeline's title says besides the report's peak and makespan.
struct timeline_labels {
  std::string problem;             ///< the chain's or graph's name
  std::string policy;              ///< or "measured", "program", ...
  bytes budget = unlimited_bytes;  ///< drawn as a line unless unlimited (or <= 0)
  /// Per instruction of the program, when given (with_program): its name and phase, drawn as a
  /// band of forwards, recomputed forwards and backwards under the plot, each with its name as
  /// a hover title, and the two phases named over the plot.
  std::vector<std::string> instructions = {};
  std::vector<instruction_phase> phases = {};

  /// These labels with the names and phases of program s over p (a chain or a graph).
  template <class Problem>
  [[nodiscard]] timeline_labels with_program(const Problem& p, const schedule& s) const {
    timeline_labels out = *this;
    out.instructions = instruction_labels(p, s);
    out.phases = instruction_phases(p, s);
    return out;
  }
};

namespace detail::svg {

/// Text and attribute values: the five characters XML reserves, and control characters other
/// than tab and newline (not allowed in XML 1.0) as U+FFFD. Invalid UTF-8 is left to the reader.
inline std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n')
          out += "\xEF\xBF\xBD";
        else
          out += ch;
    }
  }
  return out;
}

/// A coordinate: 3 decimals, trailing zeros trimmed ("12.5", "-3", "0").
inline std::string num(double v) {
  if (!std::isfinite(v)) v = 0;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

/// A value in a data-* attribute: doubles round-trip (%.17g).
inline std::string exact(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// A tick label: up to 4 significant digits ("1.5", "0.25", "1024").
inline std::string short_num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

/// A linear axis [lo, hi] with ticks every `step`, lo and hi multiples of it, about `ticks` of
/// them.
struct axis {
  double lo = 0, hi = 1, step = 1;
};
inline axis nice_axis(double lo, double hi, int ticks = 6) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}
/// nice_axis in a unit (bytes in MiB, ...), so that the ticks are round numbers of that unit.
inline axis nice_axis_in(double lo, double hi, double unit_size, int ticks = 6) {
  const axis a = nice_axis(lo / unit_size, hi / unit_size, ticks);
  return {a.lo * unit_size, a.hi * unit_size, a.step * unit_size};
}
/// The ticks of an axis (the values k * step from lo to hi).
inline std::vector<double> ticks_of(const axis& a) {
  std::vector<double> t;
  const auto n = static_cast<long>(std::llround((a.hi - a.lo) / a.step));
  for (long k = 0; k <= n; ++k) t.push_back(a.lo + static_cast<double>(k) * a.step);
  return t;
}

/// A binary unit for byte values up to `largest`: its name and size (B, KiB, MiB, GiB, TiB).
struct unit {
  const char* name;
  double size;
};
inline unit byte_unit(double largest) {
  static constexpr const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && largest >= std::ldexp(1.0, 10 * (u + 1))) ++u;
  return {names[u], std::ldexp(1.0, 10 * u)};
}
/// A time unit for values up to `largest`: s, ms or µs.
inline unit time_unit(double largest) {
  if (largest >= 1) return {"s", 1};
  if (largest >= 1e-3) return {"ms", 1e-3};
  return {"\xC2\xB5s", 1e-6};
}
/// "1.5 GiB" (format_bytes' readable part, also below 1 KiB).
inline std::string size_text(bytes b) {
  const unit u = byte_unit(static_cast<double>(b));
  return short_num(static_cast<double>(b) / u.size) + " " + u.name;
}
inline std::string time_text(seconds t) {
  const unit u = time_unit(t);
  return short_num(t / u.size) + " " + u.name;
}

/// The plot area and its map from values to coordinates (y grows downwards).
struct frame {
  double left, top, width, height;
  axis x, y;
  [[nodiscard]] double px(double v) const { return left + (v - x.lo) / (x.hi - x.lo) * width; }
  [[nodiscard]] double py(double v) const {
    return top + height - (v - y.lo) / (y.hi - y.lo) * height;
  }
  [[nodiscard]] double bottom() const { return top + height; }
  [[nodiscard]] double right() const { return left + width; }
  /// The opening tag of the plot group, with the map in data-* attributes.
  [[nodiscard]] std::string open_group() const {
    return "<g class=\"plot\" data-x-min=\"" + exact(x.lo) + "\" data-x-max=\"" + exact(x.hi) +
           "\" data-y-min=\"" + exact(y.lo) + "\" data-y-max=\"" + exact(y.hi) + "\" data-left=\"" +
           num(left) + "\" data-top=\"" + num(top) + "\" data-width=\"" + num(width) +
           "\" data-height=\"" + num(height) + "\">\n";
  }
};

inline std::string header(int width, int height, std::string_view title) {
  const std::string w = std::to_string(width), h = std::to_string(height);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h +
         "\" font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"12\">\n"
         "<title>" +
         escape(title) + "</title>\n<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h +
         "\" fill=\"#ffffff\"/>\n";
}

inline std::string text(double x, double y, std::string_view s, std::string_view attrs = {}) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"" + (attrs.empty() ? "" : " ") +
         std::string(attrs) + ">" + escape(s) + "</text>\n";
}

/// The picture's heading: a bold line, and a smaller one under it (the problem's name; long
/// names are cut, the <title> keeps them whole).
inline std::string titles(int width, std::string_view head, std::string_view sub) {
  std::string s =
      text(width / 2.0, 24, head, "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
  if (!sub.empty()) {
    constexpr std::size_t room = 150;  // characters of 11px text across 960px
    std::string cut(sub.substr(0, room));
    if (sub.size() > room) {
      while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0xC0) == 0x80)
        cut.pop_back();
      if (!cut.empty()) cut.pop_back();  // a UTF-8 lead byte, or the last character
      cut += "\xE2\x80\xA6";
    }
    s += text(width / 2.0, 42, cut, "text-anchor=\"middle\" font-size=\"11\" fill=\"#555555\"");
  }
  return s;
}

inline std::string line(double x1, double y1, double x2, double y2, std::string_view attrs) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
         num(y2) + "\" " + std::string(attrs) + "/>\n";
}

/// Grid lines, ticks and tick labels of both axes, and the axes' titles. `xlabel(v)` and
/// `ylabel(v)` write a tick's label.
template <class XLabel, class YLabel>
std::string axes(const frame& f, XLabel xlabel, YLabel ylabel, std::string_view xtitle,
                 std::string_view ytitle) {
  std::string s = "<g class=\"axes\">\n";
  for (const double v : ticks_of(f.y)) {
    const double y = f.py(v);
    s += line(f.left, y, f.right(), y, "stroke=\"#e4e4e4\" stroke-width=\"1\"");
    s += text(f.left - 6, y + 4, ylabel(v), "text-anchor=\"end\"");
  }
  for (const double v : ticks_of(f.x)) {
    const double x = f.px(v);
    s += line(x, f.top, x, f.bottom(), "stroke=\"#f0f0f0\" stroke-width=\"1\"");
    s += line(x, f.bottom(), x, f.bottom() + 5, "stroke=\"#333333\" stroke-width=\"1\"");
    s += text(x, f.bottom() + 18, xlabel(v), "text-anchor=\"middle\"");
  }
  s += "<rect x=\"" + num(f.left) + "\" y=\"" + num(f.top) + "\" width=\"" + num(f.width) +
       "\" height=\"" + num(f.height) +
       "\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
  s += text(f.left + f.width / 2, f.bottom() + 36, xtitle, "text-anchor=\"middle\"");
  s += "<text x=\"0\" y=\"0\" transform=\"translate(" + num(18) + "," + num(f.top + f.height / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + escape(ytitle) + "</text>\n";
  return s + "</g>\n";
}

}  // namespace detail::svg

/// The device memory of a replayed program against its budget (header comment). The title names
/// the problem, the policy, the budget, the peak and the makespan. A report without a timeline
/// (options::record_timeline false) gives a picture that says so.
inline std::string memory_timeline_svg(const sim::report& r, const timeline_labels& labels = {}) {
  namespace d = detail::svg;
  const bool has_budget = labels.budget > 0 && labels.budget < unlimited_bytes;
  bool transfers = false;
  seconds end = r.makespan;
  bytes high = std::max<bytes>(r.peak, 1);
  for (const auto& p : r.timeline) {
    transfers =
        transfers || p.lane == sim::lane::device_to_host || p.lane == sim::lane::host_to_device;
    end = std::max(end, p.end);
    high = std::max(high, p.peak);
  }
  if (has_budget) high = std::max(high, labels.budget);
  const d::unit bu = d::byte_unit(static_cast<double>(high));
  const d::unit tu = d::time_unit(end);
  const int width = 960, height = transfers ? 560 : 500;
  const d::frame f{84,
                   66,
                   846,
                   350,
                   d::nice_axis_in(0, end > 0 ? end : 1, tu.size),
                   d::nice_axis_in(0, static_cast<double>(high) * 1.05, bu.size)};

  std::string head = (labels.policy.empty() ? std::string("memory") : labels.policy) + ": budget " +
                     (has_budget ? d::size_text(labels.budget) : std::string("none")) + ", peak " +
                     d::size_text(r.peak) + ", makespan " + d::time_text(r.makespan);
  if (!r.valid) head += " (invalid)";
  std::string sub = labels.problem;
  if (!r.valid && r.first_violation) sub += (sub.empty() ? "" : "; ") + r.first_violation->message;

  std::string s =
      d::header(width, height, labels.problem.empty() ? head : labels.problem + ", " + head);
  s += d::titles(width, head, sub);
  s += d::axes(
      f, [&](double v) { return d::short_num(v / tu.size); },
      [&](double v) { return d::short_num(v / bu.size); }, std::string("time (") + tu.name + ")",
      std::string("device memory (") + bu.name + ")");
  s += f.open_group();
  if (has_budget) {
    const double y = f.py(static_cast<double>(labels.budget));
    s += "<g class=\"budget\" data-bytes=\"" + std::to_string(labels.budget) + "\">\n" +
         d::line(f.left, y, f.right(), y,
                 "stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"") +
         d::text(f.right() - 4, y - 5, "budget " + d::size_text(labels.budget),
                 "text-anchor=\"end\" fill=\"#d62728\"") +
         "</g>\n";
  }
  // The step line: four points per compute-lane instruction, in program order.
  std::string points;
  std::size_t drawn = 0;
  for (const auto& p : r.timeline) {
    if (p.lane != sim::lane::compute) continue;
    const double x0 = f.px(p.start), x1 = f.px(p.end);
    for (const auto& [x, b] : {std::pair{x0, p.before}, std::pair{x0, p.peak},
                               std::pair{x1, p.peak}, std::pair{x1, p.after}})
      points +=
          (points.empty() ? "" : " ") + d::num(x) + "," + d::num(f.py(static_cast<double>(b)));
    ++drawn;
  }
  if (drawn > 0)
    s += "<polyline class=\"memory\" data-instructions=\"" + std::to_string(drawn) +
         "\" points=\"" + points +
         "\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" stroke-linejoin=\"miter\"/>\n";
  else
    s += d::text(f.left + f.width / 2, f.top + f.height / 2,
                 r.timeline.empty() ? "no timeline recorded (simulate with record_timeline = true)"
                                    : "no compute instruction",
                 "text-anchor=\"middle\" fill=\"#777777\"");
  // The peak: a marker on every instruction that reaches it.
  for (const auto& p : r.timeline) {
    if (p.lane != sim::lane::compute || p.peak != r.peak || drawn == 0) continue;
    const double x = f.px((p.start + p.end) / 2), y = f.py(static_cast<double>(p.peak));
    s += "<circle class=\"peak\" data-op=\"" + std::to_string(p.op) + "\" data-bytes=\"" +
         std::to_string(p.peak) + "\" cx=\"" + d::num(x) + "\" cy=\"" + d::num(y) +
         "\" r=\"4\" fill=\"#ff7f0e\" stroke=\"#ffffff\" stroke-width=\"1\"><title>" +
         d::escape("peak " + d::size_text(p.peak) + " at instruction " + std::to_string(p.op)) +
         "</title></circle>\n";
  }
  // The phases, when the labels have the program: "forward" and "backward" over the plot,
  // split where the first backward starts.
  const bool phased = !labels.phases.empty() && drawn > 0;
  if (phased) {
    std::optional<seconds> first_backward;
    for (const auto& p : r.timeline)
      if (p.op < labels.phases.size() && labels.phases[p.op] == instruction_phase::backward) {
        first_backward = p.start;
        break;
      }
    const double split = first_backward ? f.px(*first_backward) : f.right();
    s += "<g class=\"phases\">\n";
    if (first_backward)
      s += d::line(split, f.top, split, f.bottom(),
                   "stroke=\"#999999\" stroke-width=\"1\" stroke-dasharray=\"3,3\"");
    if (split - f.left > 60)
      s += d::text((f.left + split) / 2, f.top + 14, "forward",
                   "text-anchor=\"middle\" fill=\"#777777\"");
    if (first_backward && f.right() - split > 60)
      s += d::text((split + f.right()) / 2, f.top + 14, "backward",
                   "text-anchor=\"middle\" fill=\"#777777\"");
    s += "</g>\n";
  }
  s += "</g>\n";
  // The band of compute ops above the plot, one rectangle per forward, recomputed forward and
  // backward, each named by its hover title.
  if (phased) {
    const double y = f.top - 14;
    s += "<g class=\"ops\">\n";
    for (const auto& p : r.timeline) {
      if (p.lane != sim::lane::compute || p.op >= labels.phases.size()) continue;
      const instruction_phase ph = labels.phases[p.op];
      if (ph == instruction_phase::other) continue;
      const char* color = ph == instruction_phase::forward      ? "#9ecae1"
                          : ph == instruction_phase::recomputed ? "#d62728"
                                                                : "#fdae6b";
      const char* what = ph == instruction_phase::forward      ? "forward"
                         : ph == instruction_phase::recomputed ? "recomputed"
                                                               : "backward";
      const double x0 = f.px(p.start), w = std::max(1.0, f.px(p.end) - x0);
      std::string name = "instruction " + std::to_string(p.op);
      if (p.op < labels.instructions.size()) name += ": " + labels.instructions[p.op];
      if (ph == instruction_phase::recomputed) name += " (recomputed)";
      s += "<rect class=\"op\" data-op=\"" + std::to_string(p.op) + "\" data-phase=\"" + what +
           "\" x=\"" + d::num(x0) + "\" y=\"" + d::num(y) + "\" width=\"" + d::num(w) +
           "\" height=\"10\" fill=\"" + color + "\"><title>" + d::escape(name) +
           "</title></rect>\n";
    }
    s += "</g>\n";
  }
  // Legend, under the plot at the left of the x axis' title.
  const double lx = f.left, ly = f.bottom() + 32;
  s += "<g class=\"legend\">\n" +
       d::line(lx, ly, lx + 22, ly, "stroke=\"#1f77b4\" stroke-width=\"1.5\"") +
       d::text(lx + 28, ly + 4, "device memory") + "<circle cx=\"" + d::num(lx + 135) + "\" cy=\"" +
       d::num(ly) + "\" r=\"4\" fill=\"#ff7f0e\"/>\n" + d::text(lx + 145, ly + 4, "peak");
  if (phased) {
    double x = f.right() - 335;  // right of the x axis' title
    for (const auto& [color, what] :
         {std::pair{"#9ecae1", "forward"}, std::pair{"#d62728", "recomputed forward"},
          std::pair{"#fdae6b", "backward"}}) {
      s += "<rect x=\"" + d::num(x) + "\" y=\"" + d::num(ly - 5) +
           "\" width=\"14\" height=\"10\" fill=\"" + color + "\"/>\n" +
           d::text(x + 19, ly + 4, what);
      x += 34 + 7.0 * static_cast<double>(std::string_view(what).size());
    }
  }
  s += "</g>\n";
  if (transfers) {
    // Two rows under the x axis' labels: offloads, then prefetches.
    const double band = f.bottom() + 56;
    s += "<g class=\"transfers\">\n";
    for (int row = 0; row < 2; ++row) {
      const double y = band + row * 22;
      s += "<rect x=\"" + d::num(f.left) + "\" y=\"" + d::num(y) + "\" width=\"" + d::num(f.width) +
           "\" height=\"16\" fill=\"#f7f7f7\" stroke=\"#cccccc\" stroke-width=\"0.5\"/>\n";
      s += d::text(f.left - 6, y + 12, row == 0 ? "to host" : "to device", "text-anchor=\"end\"");
    }
    for (const auto& p : r.timeline) {
      if (p.lane == sim::lane::compute || p.lane == sim::lane::cpu) continue;
      const bool off = p.lane == sim::lane::device_to_host;
      const double x0 = f.px(p.start), w = std::max(1.0, f.px(p.end) - x0);
      s += "<rect class=\"transfer\" data-op=\"" + std::to_string(p.op) + "\" data-lane=\"" +
           (off ? "device_to_host" : "host_to_device") + "\" data-start=\"" + d::exact(p.start) +
           "\" data-end=\"" + d::exact(p.end) + "\" x=\"" + d::num(x0) + "\" y=\"" +
           d::num(band + (off ? 0 : 22) + 2) + "\" width=\"" + d::num(w) +
           "\" height=\"12\" fill=\"" + (off ? "#9467bd" : "#2ca02c") + "\"/>\n";
    }
    s += "</g>\n";
  }
  return s + "</svg>\n";
}

namespace detail::svg {
/// Each policy's colour, marker and dashes, by its place in the sweep (cycling past 10).
struct series_style {
  const char* color;
  const char* marker;  ///< circle, square, triangle, diamond, cross
  const char* dash;    ///< "" for a solid line
};
inline series_style style_of(std::size_t i) {
  static constexpr series_style styles[] = {
      {"#1f77b4", "circle", ""},      {"#ff7f0e", "square", "5,3"}, {"#2ca02c", "triangle", ""},
      {"#d62728", "diamond", "2,2"},  {"#9467bd", "circle", "8,3"}, {"#8c564b", "square", ""},
      {"#e377c2", "triangle", "5,3"}, {"#7f7f7f", "diamond", ""},   {"#bcbd22", "cross", "2,2"},
      {"#17becf", "cross", ""}};
  return styles[i % (sizeof styles / sizeof styles[0])];
}
/// A marker centred on (0, 0), for a group translated to the point.
inline std::string marker(const series_style& st) {
  const std::string fill =
      std::string("fill=\"") + st.color + "\" stroke=\"#ffffff\" stroke-width=\"0.8\"";
  const std::string_view m = st.marker;
  if (m == "square") return "<rect x=\"-3.5\" y=\"-3.5\" width=\"7\" height=\"7\" " + fill + "/>";
  if (m == "triangle") return "<path d=\"M0,-4.5 L4,3 L-4,3 Z\" " + fill + "/>";
  if (m == "diamond") return "<path d=\"M0,-5 L4,0 L0,5 L-4,0 Z\" " + fill + "/>";
  if (m == "cross")
    return std::string(
               "<path d=\"M-3.5,-3.5 L3.5,3.5 M-3.5,3.5 L3.5,-3.5\" fill=\"none\" stroke=\"") +
           st.color + "\" stroke-width=\"2\"/>";
  return "<circle cx=\"0\" cy=\"0\" r=\"3.5\" " + fill + "/>";
}
}  // namespace detail::svg

/// The budget -> overhead curve of every policy of a sweep (header comment): x the budget (bytes,
/// binary units; the top axis as a fraction of store-all's peak), y the simulated makespan's
/// overhead over store-all's, in percent. A policy's points that planned are joined in budget
/// order; a budget it cannot plan leaves a gap. Each point is a <g class="point"> translated to
/// where it is drawn, with data-policy, data-budget, data-peak, data-makespan, data-overhead.
inline std::string overhead_curve_svg(const sweep_result& sw) {
  namespace d = detail::svg;
  const int width = 960, height = 560;
  double lo = 0, hi = 1, top_overhead = 0, low_overhead = 0;
  if (!sw.budgets.empty()) {
    lo = static_cast<double>(sw.budgets.front());
    hi = static_cast<double>(sw.budgets.back());
  }
  for (const auto& p : sw.points)
    if (p.ok()) {
      top_overhead = std::max(top_overhead, 100 * p.overhead);
      // A makespan a rounding below store-all's (sums in another order) is no reason for a
      // negative axis.
      if (p.overhead < -1e-9) low_overhead = std::min(low_overhead, 100 * p.overhead);
    }
  const d::unit bu = d::byte_unit(hi);
  const d::frame f{84,
                   96,
                   600,
                   374,
                   d::nice_axis_in(lo, hi, bu.size),
                   d::nice_axis(low_overhead, std::max(top_overhead * 1.05, 1.0))};
  const std::string head = "overhead of each policy by budget (store-all " +
                           d::time_text(sw.store_all_time) + ", peak " +
                           d::size_text(sw.store_all_peak) + ")";

  std::string s = d::header(width, height, sw.problem.empty() ? head : sw.problem + ": " + head);
  s += d::titles(width, head, sw.problem);
  s += d::axes(
      f, [&](double v) { return d::short_num(v / bu.size); },
      [&](double v) { return d::short_num(v) + "%"; }, std::string("budget (") + bu.name + ")",
      "time overhead over store-all (%)");
  // The top axis: the budget as a fraction of store-all's peak, every 10%.
  if (sw.store_all_peak > 0) {
    const double peak = static_cast<double>(sw.store_all_peak);
    s += "<g class=\"fraction-axis\">\n";
    for (int pct = 0; pct <= 200; pct += 10) {
      const double v = peak * pct / 100.0;
      if (v < f.x.lo || v > f.x.hi) continue;
      const double x = f.px(v);
      s += d::line(x, f.top - 5, x, f.top, "stroke=\"#333333\" stroke-width=\"1\"");
      s += d::text(x, f.top - 9, std::to_string(pct) + "%",
                   "text-anchor=\"middle\" font-size=\"10\"");
    }
    s += d::text(f.left + f.width / 2, f.top - 24, "budget as a fraction of store-all's peak",
                 "text-anchor=\"middle\" font-size=\"11\" fill=\"#555555\"") +
         "</g>\n";
  }
  s += f.open_group();
  const std::size_t nb = sw.budgets.size(), np = sw.policies.size();
  // Curves that coincide must all stay visible: each series is drawn thinner than the ones
  // before it, on top of them, so that a shared stretch shows every colour as a band; markers
  // within 3 pixels of each other at one budget are spread sideways 6 pixels apart (each point's
  // group stays at its true place, with its marker moved inside it).
  std::vector<double> dodge(np * nb, 0.0);
  for (std::size_t b = 0; b < nb; ++b) {
    std::vector<std::pair<double, std::size_t>> at;  // (y, series) of the points planned at b
    for (std::size_t k = 0; k < np; ++k)
      if (k * nb + b < sw.points.size() && sw.at(k, b).ok())
        at.emplace_back(f.py(100 * sw.at(k, b).overhead), k);
    std::sort(at.begin(), at.end());
    for (std::size_t i = 0; i < at.size();) {
      std::size_t j = i + 1;
      while (j < at.size() && at[j].first - at[j - 1].first < 3) ++j;
      std::vector<std::size_t> group;
      for (std::size_t q = i; q < j; ++q) group.push_back(at[q].second);
      std::sort(group.begin(), group.end());
      for (std::size_t q = 0; q < group.size(); ++q)
        dodge[group[q] * nb + b] =
            6.0 * (static_cast<double>(q) - static_cast<double>(group.size() - 1) / 2);
      i = j;
    }
  }
  auto stroke_of = [&](std::size_t k) {
    return np > 1 ? 1.6 + 2.4 * static_cast<double>(np - 1 - k) / static_cast<double>(np - 1) : 1.6;
  };
  for (std::size_t k = 0; k < np; ++k) {
    const d::series_style st = d::style_of(k);
    const double stroke = stroke_of(k);
    s += "<g class=\"series\" data-policy=\"" + d::escape(sw.policies[k]) + "\">\n";
    // Lines through the runs of planned points.
    std::string run;
    std::size_t in_run = 0;
    auto flush = [&] {
      if (in_run > 1)
        s += std::string("<polyline points=\"") + run + "\" fill=\"none\" stroke=\"" + st.color +
             "\" stroke-width=\"" + d::num(stroke) + "\"" +
             (*st.dash ? std::string(" stroke-dasharray=\"") + st.dash + "\"" : "") + "/>\n";
      run.clear();
      in_run = 0;
    };
    for (std::size_t b = 0; b < nb && k * nb + b < sw.points.size(); ++b) {
      const sweep_point& p = sw.at(k, b);
      if (!p.ok()) {
        flush();
        continue;
      }
      run += (run.empty() ? "" : " ") + d::num(f.px(static_cast<double>(p.budget))) + "," +
             d::num(f.py(100 * p.overhead));
      ++in_run;
    }
    flush();
    for (std::size_t b = 0; b < nb && k * nb + b < sw.points.size(); ++b) {
      const sweep_point& p = sw.at(k, b);
      if (!p.ok()) continue;
      char pct[32];
      std::snprintf(pct, sizeof pct, "%+.1f%%", 100 * p.overhead);
      const double dx = dodge[k * nb + b];
      s += "<g class=\"point\" data-policy=\"" + d::escape(p.policy) + "\" data-budget=\"" +
           std::to_string(p.budget) + "\" data-peak=\"" + std::to_string(p.peak) +
           "\" data-makespan=\"" + d::exact(p.makespan) + "\" data-overhead=\"" +
           d::exact(p.overhead) + "\" transform=\"translate(" +
           d::num(f.px(static_cast<double>(p.budget))) + "," + d::num(f.py(100 * p.overhead)) +
           ")\"><title>" +
           d::escape(p.policy + " at " + d::size_text(p.budget) + ": " + pct + ", peak " +
                     d::size_text(p.peak) + ", " + d::time_text(p.makespan)) +
           "</title>" +
           (dx != 0 ? "<g transform=\"translate(" + d::num(dx) + ",0)\">" + d::marker(st) + "</g>"
                    : d::marker(st)) +
           "</g>\n";
    }
    s += "</g>\n";
  }
  s += "</g>\n";
  // Legend, right of the plot.
  const double lx = f.right() + 24;
  s += "<g class=\"legend\">\n" + d::text(lx, f.top + 4, "policy", "font-weight=\"bold\"");
  for (std::size_t k = 0; k < sw.policies.size(); ++k) {
    const d::series_style st = d::style_of(k);
    const double y = f.top + 24 + 20 * static_cast<double>(k);
    bool any = false;
    for (std::size_t b = 0; b < nb && k * nb + b < sw.points.size(); ++b)
      any = any || sw.at(k, b).ok();
    s += d::line(lx, y, lx + 28, y,
                 std::string("stroke=\"") + st.color + "\" stroke-width=\"" + d::num(stroke_of(k)) +
                     "\"" + (*st.dash ? std::string(" stroke-dasharray=\"") + st.dash + "\"" : ""));
    s += "<g transform=\"translate(" + d::num(lx + 14) + "," + d::num(y) + ")\">" + d::marker(st) +
         "</g>\n";
    s += d::text(lx + 36, y + 4, sw.policies[k] + (any ? "" : " (no plan)"));
  }
  double y = f.top + 24 + 20 * static_cast<double>(sw.policies.size()) + 10;
  for (const std::string& line : {std::string("a gap: no plan at that budget"),
                                  std::string("every point: a plan replayed by the simulator"),
                                  std::string("equal curves: bands, markers side by side")}) {
    s += d::text(lx, y, line, "font-size=\"10\" fill=\"#555555\"");
    y += 14;
  }
  s += "</g>\n";
  for (std::size_t k = 0; k < sw.notes.size(); ++k)
    s += d::text(f.left, height - 34 + 14 * static_cast<double>(k), "note: " + sw.notes[k],
                 "font-size=\"10\" fill=\"#555555\"");
  return s + "</svg>\n";
}

}  // namespace remat::io
