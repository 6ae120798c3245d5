#pragma once
// The simulator: the referee for every chain schedule (DESIGN.md §5).
//
// It replays a schedule with exactly the operation semantics of shilova-spec §2.1 (thesis
// Table 2.1, S:1126-1162):
//   * memory starts with a_0 (and the zero-size delta_N) and must end holding only delta_0;
//   * every op needs its inputs in memory (F_l: a_{l-1} or abar_{l-1}; F_l^∅ only a plain
//     a_{l-1}, which it consumes; B_l: delta_l, abar_l and a_{l-1} or abar_{l-1});
//   * the peak while an op runs is the stored data + the op's output + the op's overhead
//     (F^all's own overhead when the chain gives one, see chain.hpp);
//   * there is no explicit delete: inputs are consumed only by F^∅ and B (a plain a_{l-1} is
//     consumed by B_l, an abar_{l-1} input is kept for B_{l-1});
//   * the makespan is the sum of the op durations.
// A tensor is stored at most once: computing an activation that is already in memory is a
// violation (the thesis' memory is a set of tensors).
//
// Transfers (shilova-spec §3.1, Assumptions 1; DESIGN.md §5). Offload O_k and prefetch P_k of a
// plain activation a_k run on their own lanes, device-to-host and host-to-device, one transfer
// at a time per lane, overlapping compute:
//   * a transfer is issued when the compute lane reaches it in the program (it starts after the
//     compute issued before it, as a copy stream ordered after the compute stream does) and
//     starts once its lane is free; n bytes take n / options::bandwidth seconds (an infinite
//     bandwidth, the default, makes transfers instantaneous);
//   * a tensor occupies its full size during its whole transfer: an offload frees the device
//     memory at the END of the copy and holds host memory from its start; a prefetch reserves the
//     device memory at its START and frees the host copy at its end. Device memory is a step
//     function of time: the peak of a compute op is the highest value while it runs (output and
//     overhead included), and an offload ending or a prefetch starting in the middle of an op
//     counts there;
//   * W_k blocks the compute lane until the transfer of a_k ends. Compute may use a_k only while
//     it is resident: after O_k it must be prefetched and waited (P_k, W_k) first; P_k needs a_k
//     on the host, its offload waited (W_k after O_k, which costs nothing once the copy is done);
//   * only a plain a_k moves: abar_k holds the layer's own context type, which the executor
//     cannot copy; delta is never transferred (O.5);
//   * host memory is unbounded and reported (host_peak); the schedule must end with nothing on
//     the host; the makespan is the end of the last compute or transfer.
// A schedule without transfers simulates exactly as before: the compute ops back to back.
//
// Structural violations (missing input, duplicate, unknown stage, a tensor used while not
// resident, an invalid transfer, wrong final state) stop the replay; exceeding the budget is
// recorded as the first violation but the replay goes on, so that the reported peak is the
// schedule's true peak.

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/problem/chain.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::sim {

enum class violation_kind {
  unknown_stage,
  missing_input,
  already_present,
  over_budget,
  wrong_final_state,
  not_resident,      ///< a compute op uses an activation that is offloaded or in transfer
  invalid_transfer,  ///< an offload, prefetch or wait that cannot be (twice, of nothing, ...)
};

struct violation {
  violation_kind kind = violation_kind::missing_input;
  std::size_t op = 0;  ///< index of the offending instruction (ops.size() for the final state)
  std::string message;
};

/// Where an instruction runs: compute (forwards, backwards, and waits, which block it) or a
/// transfer lane.
enum class lane : unsigned char { compute, device_to_host, host_to_device };

/// One instruction's effect on device memory. For a transfer, start and end are those of the
/// copy on its lane, and the memory is the device memory when it is issued (before), the highest
/// until the next instruction (peak) and after it (after); its own effect may come later.
struct memory_point {
  std::size_t op = 0;
  seconds start = 0;
  seconds end = 0;
  bytes before = 0;  ///< stored data when the op starts
  bytes peak = 0;    ///< stored data + output + overhead while it runs
  bytes after = 0;   ///< stored data when it ends
  sim::lane lane = lane::compute;
};

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
  /// Bytes per second of each transfer lane; infinite: transfers take no time.
  double bandwidth = std::numeric_limits<double>::infinity();
};

namespace detail {
enum class held : unsigned char { none, plain, full };  // nothing, a_k, abar_k
/// Where a stored activation is: resident on the device, being offloaded, on the host (its
/// offload waited), being prefetched.
enum class place : unsigned char { device, offloading, host, prefetching };
inline std::string tensor_name(const char* sym, int k) { return std::string(sym) + "_" + std::to_string(k); }

/// Device and host memory as step functions of time: the changes transfers make in the future
/// wait in `pending` until the compute lane's clock passes them.
class memory {
 public:
  explicit memory(bytes initial) : device_(initial), peak_(initial) {}
  [[nodiscard]] bytes device() const noexcept { return device_; }
  [[nodiscard]] bytes peak() const noexcept { return peak_; }
  [[nodiscard]] bytes host_peak() const noexcept { return host_peak_; }
  /// A change of the device memory now (a compute op's effect).
  void change(bytes d) { device_ += d; }
  /// A change at time t (a transfer's start or end).
  void schedule(seconds t, bytes device, bytes host) {
    pending_.push_back({t, seq_++, device, host});
    std::sort(pending_.begin(), pending_.end(), [](const event& x, const event& y) {
      return x.at != y.at ? x.at < y.at : x.seq < y.seq;
    });
  }
  /// Applies the changes up to t (inclusive, or strictly before t), with `extra` bytes held on
  /// top of the stored data (a running op's output and overhead); returns the highest device
  /// memory plus extra seen, the current value included.
  bytes advance(seconds t, bool inclusive, bytes extra = 0) {
    bytes high = device_ + extra;
    std::size_t i = 0;
    for (; i < pending_.size() && (pending_[i].at < t || (inclusive && pending_[i].at == t)); ++i) {
      device_ += pending_[i].device;
      host_ += pending_[i].host;
      high = std::max(high, device_ + extra);
      host_peak_ = std::max(host_peak_, host_);
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(i));
    peak_ = std::max(peak_, high);
    return high;
  }

 private:
  struct event {
    seconds at;
    std::size_t seq;
    bytes device, host;
  };
  std::vector<event> pending_;
  std::size_t seq_ = 0;
  bytes device_, host_ = 0, peak_, host_peak_ = 0;
};
}  // namespace detail

inline report simulate(const chain& c, const schedule& s, options opt = {}) {
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
      case place::device: return {};
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
    const instruction& ins = s.ops[i];
    const std::string name = to_string(ins);
    const int l = ins.index;
    // Changes up to now (transfers that ended or started while the previous op ran).
    const bytes settled = mem.advance(now, true);
    const bytes before = mem.device();
    bytes peak = settled;
    memory_point point{i, now, now, before, 0, 0, lane::compute};

    if (!ins.is_compute()) {
      if (l < 0 || l > n) {
        fail(violation_kind::unknown_stage, i,
             name + ": activation a_" + std::to_string(l) + " does not exist (the chain has a_0..a_" +
                 std::to_string(n) + ")");
        return stop();
      }
      const auto k = static_cast<std::size_t>(l);
      const std::string a = name_of(l);
      auto bad = [&](const std::string& why) { fail(violation_kind::invalid_transfer, i, name + ": " + why); };
      if (ins.kind == op_kind::offload) {
        if (act[k] == held::none) {
          bad(a + " is not in memory");
          return stop();
        }
        if (where[k] != place::device)
          {
          bad(a + " is already offloaded or in transfer (" + op_at(moved_by[k]) + ")");
          return stop();
        }
        if (act[k] == held::full)
          {
          bad(a + " (the output and the context F" + std::to_string(l) +
                     "_all saved) is stored; only a plain a_k can be offloaded, since a layer's "
                     "context is its own type, which the executor cannot copy (store a_" +
                     std::to_string(l) + " with F" + std::to_string(l) + "_ck instead)");
          return stop();
        }
      } else if (ins.kind == op_kind::prefetch) {
        if (act[k] == held::none || where[k] == place::device)
          {
          bad(a + " is not on the host" +
                     (act[k] == held::none ? std::string(" (it is not stored at all)")
                                           : " (it is on the device; offload it first: O" + std::to_string(l) + ")"));
          return stop();
        }
        if (where[k] == place::offloading)
          {
          bad("the offload of " + a + " (" + op_at(moved_by[k]) + ") was not waited for; insert W" +
                     std::to_string(l) + " before " + name);
          return stop();
        }
        if (where[k] == place::prefetching) {
          bad(a + " is already being prefetched (" + op_at(moved_by[k]) + ")");
          return stop();
        }
      } else {  // wait
        if (act[k] == held::none || where[k] == place::device || where[k] == place::host)
          {
          bad("no transfer of " + a + " is in flight" +
                     (act[k] != held::none && where[k] == place::host ? " (its offload was already waited for)" : ""));
          return stop();
        }
        point.end = now = std::max(now, moved_until[k]);
        where[k] = where[k] == place::offloading ? place::host : place::device;
      }
      if (ins.is_transfer()) {
        // An offload holds host memory from its start and frees the device at its end; a
        // prefetch holds device memory from its start and frees the host copy at its end.
        const bool off = ins.kind == op_kind::offload;
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
        fail(violation_kind::unknown_stage, i,
             name + ": stage " + std::to_string(l) + " does not exist (the chain has stages 1.." +
                 std::to_string(n) + ")");
        return stop();
      }
      const auto in = static_cast<std::size_t>(l - 1);
      const auto out = static_cast<std::size_t>(l);
      // Inputs must be stored and resident.
      auto resident = [&](int k) {
        const std::string why = not_resident(k);
        if (!why.empty()) fail(violation_kind::not_resident, i, name + ": its input " + name_of(k) + why);
        return why.empty();
      };
      bytes held_extra = 0;  // the op's output and overhead while it runs
      bytes effect = 0;      // its change of the stored data when it ends
      seconds dt = 0;
      if (ins.kind == op_kind::forward) {
        if (act[in] == held::none) {
          fail(violation_kind::missing_input, i, name + ": its input a_" + std::to_string(l - 1) + " is not in memory");
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
                   (where[out] == place::device ? "in memory" : "stored (" + op_at(moved_by[out]) + ")"));
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
          fail(violation_kind::missing_input, i, name + ": its input delta_" + std::to_string(l) + " is not in memory");
          return stop();
        }
        if (act[out] != held::full) {
          fail(violation_kind::missing_input, i,
               name + ": it needs abar_" + std::to_string(l) + " (run F" + std::to_string(l) +
                   "_all first)" + (act[out] == held::plain ? ", but only a_" + std::to_string(l) + " is stored" : ""));
          return stop();
        }
        if (act[in] == held::none) {
          fail(violation_kind::missing_input, i, name + ": its input a_" + std::to_string(l - 1) + " is not in memory");
          return stop();
        }
        if (!resident(l - 1)) return stop();
        if (grad[in]) {
          fail(violation_kind::already_present, i, name + ": delta_" + std::to_string(l - 1) + " is already in memory");
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
  if (const bytes tail = mem.advance(std::numeric_limits<seconds>::infinity(), true); tail > opt.budget)
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

}  // namespace remat::sim
