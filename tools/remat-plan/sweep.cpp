// remat-plan --sweep: every chain policy of the catalogue at evenly spaced budgets
// (remat::sweep), printed as the budget -> overhead table or as JSON (io/solution_json.hpp),
// with the curve as SVG on request.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/io/solution_json.hpp>
#include <remat/io/svg.hpp>
#include <remat/sweep.hpp>

#include "remat_plan.hpp"

namespace remat_plan {

int run_sweep(const options& o) {
  const auto loaded = load_chain(o);
  if (!loaded) return fail(o, nullptr, loaded.err());
  const remat::chain& c = *loaded;
  remat::sweep_options so;
  if (o.budgets) so.budgets = *o.budgets;
  so.hw = o.machine_from(so.hw);
  if (o.time_limit) so.time_limit = *o.time_limit;
  const auto t0 = std::chrono::steady_clock::now();
  const auto swept = remat::sweep(c, so);
  const double solve_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!swept) return fail(o, &c, swept.err());
  const remat::sweep_result& sw = *swept;
  std::string picture;
  if (!o.svg.empty()) {
    const auto w = remat::io::write_text_file(o.svg, remat::io::overhead_curve_svg(sw));
    if (!w) return fail(o, &c, w.err());
    picture = "svg       " + o.svg + ": the budget -> overhead curve of every policy (" +
              std::to_string(*w) + " bytes)";
  }
  if (o.json) {
    nlohmann::ordered_json j;
    j["status"] = "ok";
    const nlohmann::ordered_json points = remat::io::to_json(sw);
    for (const auto& [key, value] : points.items()) j[key] = value;
    j["solve_seconds"] = solve_seconds;
    if (!o.svg.empty()) j["svg"] = o.svg;
    print_json_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return exit_ok;
  }
  std::cout << "chain     " << c.name << " (" << c.length() << " stages, input "
            << remat::format_size(c.input_bytes) << ")\n"
            << "store-all " << remat::format_seconds(sw.store_all_time) << ", peak "
            << remat::format_bytes(sw.store_all_peak) << '\n'
            << "transfers "
            << (sw.hw.transfers() ? describe_rates(sw.hw.device_to_host, sw.hw.host_to_device) +
                                        " (the offloading policies)"
                                  : std::string("none (--bandwidth 0: no offloading policies)"))
            << '\n'
            << "swept     " << sw.policies.size() << " policies at " << sw.budgets.size()
            << " budgets in " << remat::format_seconds(solve_seconds)
            << "; each cell: the simulated makespan's overhead over store-all,\n"
            << "          - : no plan at that budget (--json gives each status and message)\n";
  for (const auto& n : sw.notes) std::cout << "note      " << n << '\n';
  if (!picture.empty()) std::cout << picture << '\n';
  std::cout << '\n';
  std::vector<std::size_t> widths;
  std::printf("%10s %6s", "budget", "%peak");
  for (const auto& name : sw.policies) {
    widths.push_back(std::max<std::size_t>(name.size(), 7));
    std::printf(" %*s", static_cast<int>(widths.back()), name.c_str());
  }
  std::printf("\n");
  for (std::size_t b = 0; b < sw.budgets.size(); ++b) {
    const std::string budget = remat::format_size(sw.budgets[b]);
    std::printf(
        "%10s %5.0f%%", budget.c_str(),
        100.0 * static_cast<double>(sw.budgets[b]) / static_cast<double>(sw.store_all_peak));
    for (std::size_t k = 0; k < sw.policies.size(); ++k) {
      const auto& p = sw.at(k, b);
      char cell[32];
      if (p.ok())
        std::snprintf(cell, sizeof cell, "%+.1f%%", 100.0 * p.overhead);
      else
        std::snprintf(cell, sizeof cell, "-");
      std::printf(" %*s", static_cast<int>(widths[k]), cell);
    }
    std::printf("\n");
  }
  std::fflush(stdout);
  return exit_ok;
}

}  // namespace remat_plan
