#pragma once
// The chain simulator of the thesis ([Shilova21, Table 2.1]; transfers: Part II), as remat had
// it before the pipeline was unified: a direct replay of chain ops over a_k / abar_k /
// delta_k. It is kept here, in the tests only, as the reference that the one pipeline (chain ops
// lowered onto the chain's graph, replayed by sim::simulate) must agree with, on validity, peak
// and makespan (tests/sim/test_chain_notation.cpp). Not part of the library.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

namespace remat::reference {

using sim::lane;
using sim::memory_point;
using sim::violation_kind;

using sim::violation;

struct report {
  bool valid = false;  ///< no violation at all, budget included
  seconds makespan = 0;
  bytes peak = 0;       ///< device memory
  bytes host_peak = 0;  ///< host memory held by offloaded activations
  std::vector<memory_point> timeline;
  std::optional<violation> first_violation;
};

struct options {
  bytes budget = unlimited_bytes;
  bool record_timeline = true;
  double bandwidth = std::numeric_limits<double>::infinity();
};

namespace detail {
enum class held : unsigned char { none, plain, full };  // nothing, a_k, abar_k
/// Where a stored activation is: resident on the device, being offloaded, on the host (its
/// offload waited), being prefetched.
enum class place : unsigned char { device, offloading, host, prefetching };
inline std::string tensor_name(const char* sym, int k) {
  return std::string(sym) + "_" + std::to_string(k);
}

using memory = sim::detail::memory;
}  // namespace detail

inline report simulate(const chain& c, std::span<const chain_op> ops, options opt = {}) {
  struct {
    std::span<const chain_op> ops;
  } s{ops};
  using detail::held;
  using detail::place;
  if (!(opt.bandwidth > 0))
    throw std::invalid_argument("remat::sim::simulate: the bandwidth must be > 0 bytes/s, not " +
                                std::to_string(opt.bandwidth));
  const int n = c.length();
  const auto count = static_cast<std::size_t>(n + 1);
  report r;
  std::vector<held> act(count, held::none);
  std::vector<char> grad(count, 0);
  std::vector<place> where(count, place::device);
  std::vector<std::size_t> moved_by(count, 0);  // the last transfer of a_k
  std::vector<seconds> moved_until(count, 0);   // ... and its end
  act[0] = held::plain;
  grad[static_cast<std::size_t>(n)] = 1;
  detail::memory mem(c.a(0) + c.delta(n));
  seconds now = 0;                     // the compute lane's clock
  seconds d2h_free = 0, h2d_free = 0;  // when each transfer lane is free
  if (opt.record_timeline) r.timeline.reserve(s.ops.size());

  auto fail = [&](violation_kind k, std::size_t op, std::string msg) {
    if (!r.first_violation) r.first_violation = violation{k, op, std::move(msg)};
  };
  // The report of a replay stopped by a structural violation: what ran until then.
  auto stop = [&] {
    r.makespan = now;
    r.peak = mem.peak();
    r.host_peak = mem.host_peak();
    return r;
  };
  auto name_of = [&](int k) {
    return detail::tensor_name(act[static_cast<std::size_t>(k)] == held::full ? "abar" : "a", k);
  };
  auto op_at = [&](std::size_t i) { return to_string(s.ops[i]) + " at op " + std::to_string(i); };
  // Why a stored a_k cannot be used by compute now; empty when it is resident.
  auto not_resident = [&](int k) -> std::string {
    const auto kk = static_cast<std::size_t>(k);
    const std::string p = "P" + std::to_string(k), w = "W" + std::to_string(k);
    switch (where[kk]) {
      case place::device:
        return {};
      case place::offloading:
        return " is being offloaded (" + op_at(moved_by[kk]) + "); wait for it (" + w +
               "), prefetch it (" + p + ") and wait again (" + w + ") first";
      case place::host:
        return " is on the host (" + op_at(moved_by[kk]) + "); prefetch it (" + p +
               ") and wait for it (" + w + ") first";
      case place::prefetching:
        return " is being prefetched (" + op_at(moved_by[kk]) + "); wait for it (" + w + ") first";
    }
    return {};
  };

  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const chain_op& ins = s.ops[i];
    const std::string name = to_string(ins);
    const int l = ins.index;
    // Changes up to now (transfers that ended or started while the previous op ran).
    const bytes settled = mem.advance(now, true);
    const bytes before = mem.device();
    bytes peak = settled;
    memory_point point{i, now, now, before, 0, 0, lane::compute};

    if (!ins.is_compute()) {
      if (l < 0 || l > n) {
        fail(violation_kind::unknown_node, i,
             name + ": activation a_" + std::to_string(l) +
                 " does not exist (the chain has a_0..a_" + std::to_string(n) + ")");
        return stop();
      }
      const auto k = static_cast<std::size_t>(l);
      const std::string a = name_of(l);
      auto bad = [&](const std::string& why) {
        fail(violation_kind::invalid_transfer, i, name + ": " + why);
      };
      if (ins.kind == chain_op_kind::offload) {
        if (act[k] == held::none) {
          bad(a + " is not in memory");
          return stop();
        }
        if (where[k] != place::device) {
          bad(a + " is already offloaded or in transfer (" + op_at(moved_by[k]) + ")");
          return stop();
        }
      } else if (ins.kind == chain_op_kind::prefetch) {
        if (act[k] == held::none || where[k] == place::device) {
          bad(a + " is not on the host" +
              (act[k] == held::none
                   ? std::string(" (it is not stored at all)")
                   : " (it is on the device; offload it first: O" + std::to_string(l) + ")"));
          return stop();
        }
        if (where[k] == place::offloading) {
          bad("the offload of " + a + " (" + op_at(moved_by[k]) + ") was not waited for; insert W" +
              std::to_string(l) + " before " + name);
          return stop();
        }
        if (where[k] == place::prefetching) {
          bad(a + " is already being prefetched (" + op_at(moved_by[k]) + ")");
          return stop();
        }
      } else {  // wait
        if (act[k] == held::none || where[k] == place::device || where[k] == place::host) {
          bad("no transfer of " + a + " is in flight" +
              (act[k] != held::none && where[k] == place::host
                   ? " (its offload was already waited for)"
                   : ""));
          return stop();
        }
        point.end = now = std::max(now, moved_until[k]);
        where[k] = where[k] == place::offloading ? place::host : place::device;
      }
      if (ins.kind == chain_op_kind::offload || ins.kind == chain_op_kind::prefetch) {
        // An offload holds host memory from its start and frees the device at its end; a
        // prefetch holds device memory from its start and frees the host copy at its end.
        const bool off = ins.kind == chain_op_kind::offload;
        seconds& lane_free = off ? d2h_free : h2d_free;
        const bytes size = c.a(l);
        point.start = std::max(now, lane_free);
        point.end = lane_free = point.start + static_cast<double>(size) / opt.bandwidth;
        point.lane = off ? lane::device_to_host : lane::host_to_device;
        mem.schedule(point.start, off ? 0 : size, off ? size : 0);
        mem.schedule(point.end, off ? -size : 0, off ? 0 : -size);
        where[k] = off ? place::offloading : place::prefetching;
        moved_by[k] = i;
        moved_until[k] = point.end;
      }
      // An instantaneous transfer, or the end of a wait, takes effect now.
      peak = std::max(peak, mem.advance(now, true));
    } else {
      if (l < 1 || l > n) {
        fail(violation_kind::unknown_node, i,
             name + ": stage " + std::to_string(l) + " does not exist (the chain has stages 1.." +
                 std::to_string(n) + ")");
        return stop();
      }
      const auto in = static_cast<std::size_t>(l - 1);
      const auto out = static_cast<std::size_t>(l);
      // Inputs must be stored and resident.
      auto resident = [&](int k) {
        const std::string why = not_resident(k);
        if (!why.empty())
          fail(violation_kind::not_resident, i, name + ": its input " + name_of(k) + why);
        return why.empty();
      };
      bytes held_extra = 0;  // the op's output and overhead while it runs
      bytes effect = 0;      // its change of the stored data when it ends
      seconds dt = 0;
      if (ins.kind == chain_op_kind::forward) {
        if (act[in] == held::none) {
          fail(violation_kind::missing_input, i,
               name + ": its input a_" + std::to_string(l - 1) + " is not in memory");
          return stop();
        }
        if (!resident(l - 1)) return stop();
        if (ins.mode == forward_mode::no_save && act[in] == held::full) {
          fail(violation_kind::missing_input, i,
               name + ": F_none consumes a plain a_" + std::to_string(l - 1) + ", but abar_" +
                   std::to_string(l - 1) + " is stored (run it with _ck or _all instead)");
          return stop();
        }
        if (act[out] != held::none) {
          fail(violation_kind::already_present, i,
               name + ": " + name_of(l) + " is already " +
                   (where[out] == place::device ? "in memory"
                                                : "stored (" + op_at(moved_by[out]) + ")"));
          return stop();
        }
        const bool all = ins.mode == forward_mode::save_all;
        const bytes produced = all ? c.abar(l) : c.a(l);
        held_extra = produced + (all ? c.of_all(l) : c.of(l));
        effect = produced;
        act[out] = all ? held::full : held::plain;
        where[out] = place::device;
        if (ins.mode == forward_mode::no_save) {
          effect -= c.a(l - 1);
          act[in] = held::none;
        }
        dt = c.uf(l);
      } else {
        if (!grad[out]) {
          fail(violation_kind::missing_input, i,
               name + ": its input delta_" + std::to_string(l) + " is not in memory");
          return stop();
        }
        if (act[out] != held::full) {
          fail(violation_kind::missing_input, i,
               name + ": it needs abar_" + std::to_string(l) + " (run F" + std::to_string(l) +
                   "_all first)" +
                   (act[out] == held::plain ? ", but only a_" + std::to_string(l) + " is stored"
                                            : ""));
          return stop();
        }
        if (!resident(l)) return stop();  // an offloaded a_l (the rest of abar_l stays)
        if (act[in] == held::none) {
          fail(violation_kind::missing_input, i,
               name + ": its input a_" + std::to_string(l - 1) + " is not in memory");
          return stop();
        }
        if (!resident(l - 1)) return stop();
        if (grad[in]) {
          fail(violation_kind::already_present, i,
               name + ": delta_" + std::to_string(l - 1) + " is already in memory");
          return stop();
        }
        held_extra = c.delta(l - 1) + c.ob(l);
        effect = c.delta(l - 1) - c.delta(l) - c.abar(l);
        grad[out] = 0;
        act[out] = held::none;
        if (act[in] == held::plain) {
          effect -= c.a(l - 1);
          act[in] = held::none;
        }
        grad[in] = 1;
        dt = c.ub(l);
      }
      // The op's peak: the stored data plus what it holds, through the transfers' changes
      // while it runs.
      peak = std::max(peak, mem.advance(now + dt, false, held_extra));
      mem.change(effect);
      now += dt;
      point.end = now;
    }
    if (peak > opt.budget)
      fail(violation_kind::over_budget, i,
           name + ": needs " + std::to_string(peak) + " bytes while it runs, over the budget of " +
               std::to_string(opt.budget) + " bytes");
    point.peak = peak;
    point.after = mem.device();
    if (opt.record_timeline) r.timeline.push_back(point);
  }
  // The transfers still in flight end.
  if (const bytes tail = mem.advance(std::numeric_limits<seconds>::infinity(), true);
      tail > opt.budget)
    fail(violation_kind::over_budget, s.ops.size(),
         "prefetches still in flight after the last op need " + std::to_string(tail) +
             " bytes, over the budget of " + std::to_string(opt.budget) + " bytes");
  r.makespan = std::max({now, d2h_free, h2d_free});
  r.peak = mem.peak();
  r.host_peak = mem.host_peak();

  // Final state: only delta_0, nothing on the host.
  std::string extra;
  for (int k = 0; k <= n; ++k) {
    const auto kk = static_cast<std::size_t>(k);
    if (act[kk] != held::none)
      extra += (extra.empty() ? "" : ", ") + name_of(k) +
               (where[kk] == place::offloading || where[kk] == place::host ? " (on the host)" : "");
    if (k > 0 && grad[kk]) extra += (extra.empty() ? "" : ", ") + detail::tensor_name("delta", k);
  }
  if (!grad[0]) {
    fail(violation_kind::wrong_final_state, s.ops.size(),
         "the schedule ends without delta_0 (the input gradient): B1 never ran" +
             (extra.empty() ? std::string() : "; memory still holds " + extra));
  } else if (!extra.empty()) {
    fail(violation_kind::wrong_final_state, s.ops.size(),
         "the schedule ends with " + extra + " still in memory; it must end holding only delta_0");
  }
  r.valid = !r.first_violation.has_value();
  return r;
}

}  // namespace remat::reference
