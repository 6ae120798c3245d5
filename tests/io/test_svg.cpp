// The SVG pictures (<remat/io/svg.hpp>): well-formed XML (a strict reader,
// tests/support/xml_check.hpp), and what they draw maps back to the sweep's and the simulator's
// values.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <remat/io/svg.hpp>
#include <remat/remat.hpp>
#include <remat/sweep.hpp>

#include "support/io_checks.hpp"
#include "support/small_chain.hpp"
#include "support/xml_check.hpp"

using namespace remat;
using remat::testing::parse_xml;
using remat::testing::small_chain;
using remat::testing::xml_element;

namespace {

double attr(const xml_element& e, const std::string& key) {
  const std::string* v = e.attribute(key);
  REQUIRE_MESSAGE(v, "<" << e.name << "> lacks " << key);
  return std::strtod(v->c_str(), nullptr);
}

/// The plot's map from values to coordinates, read from its data-* attributes.
struct plot_map {
  double x0, x1, y0, y1, left, top, width, height;
  explicit plot_map(const xml_element& g)
      : x0(attr(g, "data-x-min")),
        x1(attr(g, "data-x-max")),
        y0(attr(g, "data-y-min")),
        y1(attr(g, "data-y-max")),
        left(attr(g, "data-left")),
        top(attr(g, "data-top")),
        width(attr(g, "data-width")),
        height(attr(g, "data-height")) {}
  [[nodiscard]] double x_value(double px) const { return x0 + (px - left) / width * (x1 - x0); }
  [[nodiscard]] double y_value(double py) const {
    return y0 + (top + height - py) / height * (y1 - y0);
  }
  /// A coordinate is written with 3 decimals: half a thousandth of a pixel, in values.
  [[nodiscard]] double x_tol() const { return (x1 - x0) / width * 1e-3; }
  [[nodiscard]] double y_tol() const { return (y1 - y0) / height * 1e-3; }
};

std::vector<std::pair<double, double>> points_of(const std::string& s) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(s);
  std::string pair;
  while (in >> pair) {
    const auto comma = pair.find(',');
    REQUIRE(comma != std::string::npos);
    out.emplace_back(std::strtod(pair.substr(0, comma).c_str(), nullptr),
                     std::strtod(pair.substr(comma + 1).c_str(), nullptr));
  }
  return out;
}

}  // namespace

TEST_CASE("overhead_curve_svg: well-formed, and its points are the sweep's") {
  const chain c = small_chain(9, "a <chain> & \"its\" 'name'\x01");
  const auto sw = sweep(c, {.budgets = 5, .hw = machine::with_bandwidth(1e6)});
  REQUIRE(sw.ok());
  const std::string svg = io::overhead_curve_svg(*sw);
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  CHECK(doc.root->name == "svg");
  CHECK(*doc.root->attribute("xmlns") == "http://www.w3.org/2000/svg");
  // The name, escaped, comes back whole in the <title> (the control character as U+FFFD).
  REQUIRE(!doc.root->children.empty());
  CHECK(doc.root->children[0]->name == "title");
  CHECK(doc.root->children[0]->text.find("a <chain> & \"its\" 'name'\xEF\xBF\xBD") == 0);

  const auto plots = doc.root->all("g", "plot");
  REQUIRE(plots.size() == 1);
  const plot_map m(*plots[0]);
  const auto drawn = doc.root->all("g", "point");
  std::size_t planned = 0;
  for (const auto& p : sw->points) planned += p.ok();
  REQUIRE(drawn.size() == planned);
  std::size_t i = 0;
  for (const auto& p : sw->points) {
    if (!p.ok()) continue;
    const xml_element& g = *drawn[i++];
    CAPTURE(p.policy);
    CAPTURE(p.budget);
    CHECK(*g.attribute("data-policy") == p.policy);
    CHECK(*g.attribute("data-budget") == std::to_string(p.budget));
    CHECK(*g.attribute("data-peak") == std::to_string(p.peak));
    CHECK(attr(g, "data-makespan") == p.makespan);
    CHECK(attr(g, "data-overhead") == p.overhead);
    // Where it is drawn: translate(x,y) maps back to (budget, overhead in percent).
    const std::string& t = *g.attribute("transform");
    REQUIRE(t.rfind("translate(", 0) == 0);
    const auto xy = points_of(t.substr(10, t.size() - 11));
    REQUIRE(xy.size() == 1);
    CHECK(std::abs(m.x_value(xy[0].first) - static_cast<double>(p.budget)) <= m.x_tol());
    CHECK(std::abs(m.y_value(xy[0].second) - 100 * p.overhead) <= m.y_tol());
  }
  // One series a policy, in the legend too.
  CHECK(doc.root->all("g", "series").size() == sw->policies.size());
}

TEST_CASE(
    "memory_timeline_svg: the step line is the simulator's timeline, transfers on their band") {
  const chain c = small_chain(11, "offloaded");
  // pofo's own DP below rotor's minimum: it must offload.
  // static: GCC 12 at -O1 (the sanitizer build) falsely says the optional rates of a local pofo
  // may be used uninitialized (-Wmaybe-uninitialized in std::optional::value_or).
  static const pofo p{.hw = machine::with_bandwidth(1e6), .portfolio = false};
  const bytes lo = p.minimum_budget(c), hi = rotor{}.minimum_budget(c);
  REQUIRE(lo < hi);
  const bytes budget = lo + (hi - lo) / 2;
  const auto s = p.solve(c, budget);
  REQUIRE_MESSAGE(s.ok(), s.message());
  const auto r = sim::simulate(c, *s, {.budget = budget, .hw = machine_of(p)});
  REQUIRE(r.valid);
  const std::string svg = io::memory_timeline_svg(r, {c.name, "pofo", budget});
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  const auto plots = doc.root->all("g", "plot");
  REQUIRE(plots.size() == 1);
  const plot_map m(*plots[0]);

  // Four points an instruction of the compute lane, frees (no time) included.
  std::vector<const sim::memory_point*> compute, transfers;
  for (const auto& pt : r.timeline)
    (pt.lane == sim::lane::compute ? compute : transfers).push_back(&pt);
  std::size_t instant = 0;
  for (const auto* pt : compute) instant += pt->start == pt->end;
  CHECK(instant > 0);  // the frees
  REQUIRE(!transfers.empty());
  const auto lines = doc.root->all("polyline", "memory");
  REQUIRE(lines.size() == 1);
  CHECK(*lines[0]->attribute("data-instructions") == std::to_string(compute.size()));
  const auto xy = points_of(*lines[0]->attribute("points"));
  REQUIRE(xy.size() == 4 * compute.size());
  for (std::size_t k = 0; k < compute.size(); ++k) {
    const sim::memory_point& pt = *compute[k];
    CAPTURE(pt.op);
    const double want[4][2] = {{pt.start, static_cast<double>(pt.before)},
                               {pt.start, static_cast<double>(pt.peak)},
                               {pt.end, static_cast<double>(pt.peak)},
                               {pt.end, static_cast<double>(pt.after)}};
    for (int j = 0; j < 4; ++j) {
      CHECK(std::abs(m.x_value(xy[4 * k + static_cast<std::size_t>(j)].first) - want[j][0]) <=
            m.x_tol());
      CHECK(std::abs(m.y_value(xy[4 * k + static_cast<std::size_t>(j)].second) - want[j][1]) <=
            m.y_tol());
    }
  }
  // The transfers: one bar each, with their times.
  const auto bars = doc.root->all("rect", "transfer");
  REQUIRE(bars.size() == transfers.size());
  for (std::size_t k = 0; k < bars.size(); ++k) {
    CHECK(attr(*bars[k], "data-start") == transfers[k]->start);
    CHECK(attr(*bars[k], "data-end") == transfers[k]->end);
    CHECK(attr(*bars[k], "width") >= 1.0);
  }
  // The budget line and the peak.
  const auto budgets = doc.root->all("g", "budget");
  REQUIRE(budgets.size() == 1);
  CHECK(*budgets[0]->attribute("data-bytes") == std::to_string(budget));
  const auto peaks = doc.root->all("circle", "peak");
  REQUIRE(!peaks.empty());
  for (const auto* e : peaks) CHECK(*e->attribute("data-bytes") == std::to_string(r.peak));
  CHECK(doc.root->children[0]->text.find("pofo: budget ") != std::string::npos);
}

TEST_CASE("memory_timeline_svg: without a timeline, unlimited budget, an invalid program") {
  const chain c = small_chain(12);
  const auto s = rotor{}.solve(c, unlimited_bytes);
  REQUIRE(s.ok());
  const auto bare = sim::simulate(c, *s, {.record_timeline = false});
  const auto doc = parse_xml(io::memory_timeline_svg(bare));
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  CHECK(doc.root->all("polyline", "memory").empty());
  CHECK(doc.root->all("g", "budget").empty());
  // Over the budget: the replay goes on, the picture says it is invalid and names the violation.
  const auto over = sim::simulate(c, *s, {.budget = 1});
  const auto bad = parse_xml(io::memory_timeline_svg(over, {"<x>", "rotor", 1}));
  REQUIRE_MESSAGE(bad.error.empty(), bad.error);
  CHECK(bad.root->children[0]->text.find("(invalid)") != std::string::npos);
  CHECK(bad.root->all("polyline", "memory").size() == 1);
}

TEST_CASE(
    "memory_timeline_svg: with the program, the forwards, recomputations and backwards are "
    "named") {
  const chain c = small_chain(13, "phases");
  const bytes budget =
      (rotor{}.minimum_budget(c) + store_all{}.solve(c, unlimited_bytes)->predicted_peak) / 2;
  const auto s = rotor{.slots = 0}.solve(c, budget);
  REQUIRE(s.ok());
  const auto r = sim::simulate(c, *s, {.budget = budget});
  const auto labels = io::timeline_labels{c.name, "rotor", budget}.with_program(c, *s);
  REQUIRE(labels.instructions.size() == s->ops.size());
  const auto doc = parse_xml(io::memory_timeline_svg(r, labels));
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  // One rectangle per forward, recomputation and backward, named by its title.
  const auto ops = doc.root->all("rect", "op");
  const auto phases = io::instruction_phases(c, *s);
  std::size_t computes = 0, recomputed = 0;
  for (const auto ph : phases) {
    computes += ph != io::instruction_phase::other;
    recomputed += ph == io::instruction_phase::recomputed;
  }
  REQUIRE(ops.size() == computes);
  CHECK(recomputed > 0);  // halfway between the minimum and store-all: something is recomputed
  std::size_t drawn_recomputed = 0;
  for (const auto* e : ops) {
    const auto op = static_cast<std::size_t>(attr(*e, "data-op"));
    REQUIRE(op < phases.size());
    REQUIRE(!e->children.empty());
    const std::string& title = e->children[0]->text;
    CHECK(title.find(labels.instructions[op]) != std::string::npos);
    if (*e->attribute("data-phase") == std::string("recomputed")) {
      ++drawn_recomputed;
      CHECK(title.find("(recomputed)") != std::string::npos);
    }
  }
  CHECK(drawn_recomputed == recomputed);
  // The two phases are named over the plot.
  const auto named = doc.root->all("g", "phases");
  REQUIRE(named.size() == 1);
  std::string texts;
  for (const auto& t : named[0]->children) texts += t->text + " ";
  CHECK(texts.find("forward") != std::string::npos);
  CHECK(texts.find("backward") != std::string::npos);
  // Without the program, no band: the picture of a bare report is as before.
  CHECK(parse_xml(io::memory_timeline_svg(r, {c.name, "rotor", budget}))
            .root->all("rect", "op")
            .empty());
}

TEST_CASE("overhead_curve_svg: curves that coincide all stay visible") {
  const chain c = small_chain(9, "coinciding");
  const auto sw = sweep(c, {.budgets = 5, .hw = machine::with_bandwidth(1e6)});
  REQUIRE(sw.ok());
  const auto doc = parse_xml(io::overhead_curve_svg(*sw));
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  // Each series' line is thinner than the ones drawn before it.
  double last = 1e9;
  for (const auto* g : doc.root->all("g", "series"))
    for (const auto& child : g->children)
      if (child->name == "polyline") {
        const double w = attr(*child, "stroke-width");
        CHECK(w < last);
        last = w;
        break;
      }
  // Points at one budget and (nearly) one overhead: their markers side by side (each at its own
  // offset; the middle one of an odd group stays at 0), the points at their true place.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> offsets;
  for (const auto* g : doc.root->all("g", "point")) {
    std::string dx = "0";
    for (const auto& child : g->children)
      if (child->name == "g" && child->attribute("transform")) dx = *child->attribute("transform");
    offsets[{*g->attribute("data-budget"), *g->attribute("data-overhead")}].push_back(dx);
  }
  std::size_t coinciding = 0;
  for (auto& [where, dx] : offsets) {
    if (dx.size() < 2) continue;
    coinciding += dx.size();
    std::sort(dx.begin(), dx.end());
    CHECK(std::adjacent_find(dx.begin(), dx.end()) == dx.end());
  }
  CHECK(coinciding > 0);  // rotor and rotor_floating, the offloading policies at store-all
}

TEST_CASE("the XML checker refuses what is not well-formed") {
  for (const char* bad :
       {"<a>", "<a></b>", "<a x='1' x='2'/>", "<a x=1/>", "<a>&nbsp;</a>", "<a>x & y</a>",
        "<a b='<'/>", "<a/><b/>", "text<a/>", "<a>\x01</a>", "<a>&#1;</a>", "<a><!-- x</a>"})
    CHECK_MESSAGE(!parse_xml(bad).error.empty(), bad);
  CHECK(
      parse_xml("<?xml version=\"1.0\"?>\n<a x=\"&lt;&amp;&#x41;\"><b/>t&gt;</a>\n").error.empty());
  CHECK(*parse_xml("<a x=\"&lt;&amp;&#x41;\"/>").root->attribute("x") == "<&A");
}

TEST_CASE("write_text_file: the file, or which file and why not") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto file = dir / "remat_test_svg_write.svg";
  const auto w = io::write_text_file(file, "<svg/>");
  REQUIRE(w.ok());
  CHECK(*w == 6);
  CHECK(remat::testing::slurp(file) == "<svg/>");
  std::filesystem::remove(file);
  CHECK(remat::testing::says(io::write_text_file(dir, "x"), {"is a directory"}));
  CHECK(remat::testing::says(io::write_text_file(dir / "no_such_folder_remat" / "x.svg", "x"),
                             {"no_such_folder_remat", "does not exist"}));
}
