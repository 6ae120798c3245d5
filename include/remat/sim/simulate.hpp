#pragma once
// The simulator: the referee of every schedule, chain or graph. It replays a program over a
// training graph (a chain through build_graph) with the memory rules of [Zhao24, Eq. 2.18], the
// validity rules of [Zhao24, Def. 3.2.3] and the transfer model of [Shilova21, Part II,
// Assumptions 1] (one copy at a time per link, at the machine's bandwidth, overlapping compute;
// no link: no transfer), and reports validity, makespan, peak, host peak, a timeline and the
// first violation. Going over the budget is recorded but the replay goes on, so that the peak is
// the true one. Every rule: docs/training-graph.md, "The simulator's rules".

#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <remat/core/machine.hpp>
#include <remat/core/units.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/parameters.hpp>
#include <remat/sim/report.hpp>

namespace remat::sim {

struct options {
  bytes budget = unlimited_bytes;
  bool record_timeline = true;
  machine hw{};  ///< the transfer lanes and the host memory
};

namespace detail {
/// Where a data node is: resident on the device, being offloaded, on the host (its offload
/// waited), being prefetched.
enum class place : unsigned char { device, offloading, host, prefetching };

/// Device and host memory as step functions of time: the changes transfers make in the future
/// wait in `pending` until the compute lane's clock passes them.
class memory {
 public:
  explicit memory(bytes initial) : device_(initial), peak_(initial) {}
  [[nodiscard]] bytes device() const noexcept { return device_; }
  [[nodiscard]] bytes peak() const noexcept { return peak_; }
  [[nodiscard]] bytes host() const noexcept { return host_; }
  [[nodiscard]] bytes host_peak() const noexcept { return host_peak_; }
  /// A change of the device memory now (a compute op's effect, a free).
  void change(bytes device, bytes host = 0) {
    device_ += device;
    host_ += host;
    host_peak_ = std::max(host_peak_, host_);
  }
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

inline std::string quoted_name(const graph& g, int d) {
  const auto& n = g.data(d).name;
  return "'" + (n.empty() ? "d" + std::to_string(d) : n) + "'";
}
inline std::string quoted_compute(const graph& g, int c) {
  const auto& n = g.compute(c).name;
  return "'" + (n.empty() ? "c" + std::to_string(c) : n) + "'";
}
}  // namespace detail

inline report simulate(const graph& g, const schedule& s, options opt = {}) {
  using detail::place;
  using detail::quoted_compute;
  using detail::quoted_name;
  if (auto e = machine_error(opt.hw)) throw std::invalid_argument("remat::sim::simulate: " + *e);
  report r;
  auto fail = [&](violation_kind k, std::size_t op, std::string msg) {
    if (!r.first_violation) r.first_violation = violation{k, op, std::move(msg)};
  };
  if (auto v = validate(g); !v) {
    fail(violation_kind::invalid_graph, 0, v.message());
    return r;
  }
  const auto nd = static_cast<std::size_t>(g.data_count());
  const auto nc = static_cast<std::size_t>(g.compute_count());
  auto at = [](auto& v, int i) -> decltype(auto) { return v[static_cast<std::size_t>(i)]; };

  // done[d][k]: producer k of d (its k-th in producers(d)) has contributed since d was created.
  std::vector<char> alive(nd, 0);
  std::vector<std::vector<char>> done(nd);
  std::vector<int> missing(nd, 0);  // contributions still to come while alive
  std::vector<int> runs(nc, 0);
  std::vector<place> where(nd, place::device);
  std::vector<std::size_t> moved_by(nd, 0);  // the last transfer of d
  std::vector<seconds> moved_until(nd, 0);   // ... and its end
  bytes initial = 0;
  for (int d = 0; d < g.data_count(); ++d) {
    at(done, d).assign(g.producers(d).size(), 0);
    if (g.is_source(d)) {
      at(alive, d) = 1;
      initial += g.data(d).size;
    }
  }
  // The parameters, where the program manages them (sim/parameters.hpp).
  std::optional<detail::parameter_model> params;
  if (s.parameters.managed) {
    params.emplace(g, s.parameters, opt.hw);
    if (auto why = params->mismatch()) {
      fail(violation_kind::invalid_instruction, 0, *why);
      return r;
    }
    initial += params->device_at_start();
  }
  detail::memory mem(initial);
  seconds now = 0;                     // the compute lane's clock
  seconds d2h_free = 0, h2d_free = 0;  // when each transfer lane is free
  seconds cpu_free = 0;                // the CPU's lane (parameters' updates, a step's management)
  seconds step_start = 0;              // when the current step began (sync ends one)
  if (params) mem.change(0, params->host_at_start());
  if (opt.record_timeline) r.timeline.reserve(s.ops.size());

  // The report of a replay stopped by a structural violation: what ran until then.
  auto stop = [&] {
    r.makespan = now;
    r.peak = mem.peak();
    r.host_peak = mem.host_peak();
    return r;
  };
  auto position = [&](int d, int c) {
    const auto pr = g.producers(d);
    return static_cast<std::size_t>(std::find(pr.begin(), pr.end(), c) - pr.begin());
  };
  auto waiting_for = [&](int d) {
    std::vector<int> w;
    const auto pr = g.producers(d);
    for (std::size_t k = 0; k < pr.size(); ++k)
      if (!at(done, d)[k]) w.push_back(pr[k]);
    return ::remat::detail::compute_list(g, w);
  };
  auto op_at = [&](std::size_t i) {
    return "instruction " + std::to_string(i) + " (" + to_string(s.ops[i]) + ")";
  };
  // Why an alive d cannot be used by compute now; empty when it is resident.
  auto not_resident = [&](int d) -> std::string {
    switch (at(where, d)) {
      case place::device:
        return {};
      case place::offloading:
        return " is being offloaded (" + op_at(at(moved_by, d)) +
               "); wait for it, prefetch it and wait again first";
      case place::host:
        return " is on the host (" + op_at(at(moved_by, d)) +
               "); prefetch it and wait for it first";
      case place::prefetching:
        return " is being prefetched (" + op_at(at(moved_by, d)) + "); wait for it first";
    }
    return {};
  };

  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const instruction& ins = s.ops[i];
    auto name = [&] { return op_at(i); };
    // Changes up to now (transfers that ended or started while the previous op ran).
    const bytes settled = mem.advance(now, true);
    const bytes before = mem.device();
    bytes peak = settled;
    memory_point point{i, now, now, before, 0, 0, lane::compute};

    if (ins.manages_parameters()) {
      if (!params) {
        fail(violation_kind::invalid_instruction, i,
             name() +
                 " manages parameters, but the program has no parameter plan "
                 "(schedule::parameters, managed: where each parameter starts)");
        return stop();
      }
      detail::lane_clocks clocks{now, d2h_free, h2d_free, cpu_free, step_start};
      detail::parameter_effect e = params->apply(ins, i, clocks);
      if (e.broken) {
        if (!r.first_violation) r.first_violation = std::move(e.broken);
        return stop();
      }
      // The compute lane's own work (an update) holds what is stored until it ends.
      if (e.where == lane::compute && clocks.now > now)
        peak = std::max(peak, mem.advance(clocks.now, false));
      for (const detail::memory_change& c : e.changes) {
        if (c.at <= now)
          mem.change(c.device, c.host);
        else
          mem.schedule(c.at, c.device, c.host);
      }
      now = clocks.now;
      d2h_free = clocks.d2h;
      h2d_free = clocks.h2d;
      cpu_free = clocks.cpu;
      step_start = clocks.step_start;
      point.start = e.start;
      point.end = e.end;
      point.lane = e.where;
      peak = std::max(peak, mem.advance(now, true));
    } else if (!ins.is_compute()) {
      const int d = ins.node;
      if (d < 0 || d >= g.data_count()) {
        fail(violation_kind::unknown_node, i,
             name() + ": data node " + std::to_string(d) +
                 " does not exist (the graph has data nodes 0.." +
                 std::to_string(g.data_count() - 1) + ")");
        return stop();
      }
      const bytes size = g.data(d).size;
      const place here = at(where, d);
      auto what = [&] { return name() + ": " + quoted_name(g, d); };
      auto bad = [&](const std::string& why) {
        fail(violation_kind::invalid_transfer, i, what() + " " + why);
        return stop();
      };
      switch (ins.op) {
        case op_kind::free:
          if (g.data(d).is_protected) {
            fail(violation_kind::protected_free, i,
                 what() + " is protected (a graph input or output) and is never freed");
            return stop();
          }
          if (!at(alive, d)) {
            fail(violation_kind::not_in_memory, i, what() + " is not in memory");
            return stop();
          }
          if (here == place::offloading || here == place::prefetching)
            return bad("is in transfer (" + op_at(at(moved_by, d)) +
                       "); wait for it before freeing it");
          at(alive, d) = 0;
          at(missing, d) = 0;
          std::fill(at(done, d).begin(), at(done, d).end(), 0);
          if (here == place::host)
            mem.change(0, -size);
          else
            mem.change(-size);
          at(where, d) = place::device;
          break;
        case op_kind::offload:
          if (!(opt.hw.device_to_host > 0))
            return bad("cannot be offloaded: the machine has no device-to-host link (bandwidth 0)");
          if (g.data(d).kind == data_kind::phantom)
            return bad(
                "is a phantom (a layer's saved context, its own type); only tensors (activations "
                "and "
                "gradients) can be offloaded");
          if (!at(alive, d)) return bad("is not in memory");
          if (here != place::device)
            return bad("is already offloaded or in transfer (" + op_at(at(moved_by, d)) + ")");
          break;
        case op_kind::prefetch:
          if (!(opt.hw.host_to_device > 0))
            return bad(
                "cannot be prefetched: the machine has no host-to-device link (bandwidth 0)");
          if (!at(alive, d) || here == place::device)
            return bad("is not on the host" + (!at(alive, d)
                                                   ? std::string(" (it is not stored at all)")
                                                   : " (it is on the device; offload it first)"));
          if (here == place::offloading)
            return bad("was offloaded (" + op_at(at(moved_by, d)) +
                       ") but not waited for; wait for it before "
                       "prefetching it");
          if (here == place::prefetching)
            return bad("is already being prefetched (" + op_at(at(moved_by, d)) + ")");
          break;
        default:  // wait
          if (!at(alive, d) || here == place::device || here == place::host)
            return bad("has no transfer in flight" +
                       (at(alive, d) && here == place::host
                            ? std::string(" (its offload was already waited for)")
                            : ""));
          point.end = now = std::max(now, at(moved_until, d));
          at(where, d) = here == place::offloading ? place::host : place::device;
          break;
      }
      if (ins.is_transfer()) {
        // An offload holds host memory from its start and frees the device at its end; a
        // prefetch holds device memory from its start and frees the host copy at its end.
        const bool off = ins.op == op_kind::offload;
        seconds& lane_free = off ? d2h_free : h2d_free;
        point.start = std::max(now, lane_free);
        point.end = lane_free =
            point.start +
            static_cast<double>(size) / (off ? opt.hw.device_to_host : opt.hw.host_to_device);
        point.lane = off ? lane::device_to_host : lane::host_to_device;
        mem.schedule(point.start, off ? 0 : size, off ? size : 0);
        mem.schedule(point.end, off ? -size : 0, off ? 0 : -size);
        at(where, d) = off ? place::offloading : place::prefetching;
        at(moved_by, d) = i;
        at(moved_until, d) = point.end;
      }
      // An instantaneous transfer, or the end of a wait, takes effect now.
      peak = std::max(peak, mem.advance(now, true));
    } else {
      const int c = ins.node;
      if (c < 0 || c >= g.compute_count()) {
        fail(violation_kind::unknown_node, i,
             name() + ": compute node " + std::to_string(c) +
                 " does not exist (the graph has compute nodes 0.." +
                 std::to_string(g.compute_count() - 1) + ")");
        return stop();
      }
      const compute_node& node = g.compute(c);
      const bool fast = ins.op == op_kind::fast_forward;
      auto what = [&] { return name() + ": " + quoted_compute(g, c); };
      if (fast && node.kind != compute_kind::forward) {
        fail(violation_kind::invalid_instruction, i,
             what() + " is a " + std::string(to_string(node.kind)) +
                 "; only forwards have a fast-forward variant");
        return stop();
      }
      if (node.kind == compute_kind::loss && at(runs, c) > 0) {
        fail(violation_kind::loss_repeated, i,
             what() + ": the loss runs exactly once, and it already ran");
        return stop();
      }
      if (node.kind == compute_kind::backward && at(runs, c) > 0) {
        fail(violation_kind::backward_repeated, i,
             what() +
                 ": a backward runs exactly once (a second run would add to the parameter "
                 "gradients again), and "
                 "it already ran");
        return stop();
      }
      for (int d : g.inputs(c)) {
        if (!at(alive, d)) {
          fail(violation_kind::missing_input, i,
               what() + ": its input " + quoted_name(g, d) + " is not in memory");
          return stop();
        }
        if (const std::string why = not_resident(d); !why.empty()) {
          fail(violation_kind::not_resident, i, what() + ": its input " + quoted_name(g, d) + why);
          return stop();
        }
        if (at(missing, d) > 0) {
          fail(violation_kind::incomplete_input, i,
               what() + ": its input " + quoted_name(g, d) +
                   " is incomplete: the contributions of " + waiting_for(d) +
                   " have not run since it was created");
          return stop();
        }
      }
      bytes created = 0;
      if (params) {
        if (auto why = params->compute(c, created)) {
          fail(violation_kind::not_resident, i, what() + " " + *why);
          return stop();
        }
      }
      for (int d : g.outputs(c)) {
        if (fast && g.data(d).kind == data_kind::phantom) continue;
        if (!at(alive, d)) continue;
        if (at(done, d)[position(d, c)]) {
          const bool single = g.producers(d).size() == 1;
          fail(violation_kind::already_present, i,
               what() + ": " +
                   (single ? "its output " + quoted_name(g, d) +
                                 " is already in memory; free it before recomputing"
                           : "its contribution to " + quoted_name(g, d) +
                                 " is already summed in (it ran since the gradient was created); "
                                 "running it again "
                                 "would add it twice"));
          return stop();
        }
        if (const std::string why = not_resident(d); !why.empty()) {
          fail(violation_kind::not_resident, i,
               what() + ": it adds to " + quoted_name(g, d) + ", which" + why);
          return stop();
        }
      }
      for (int d : g.outputs(c)) {
        if (fast && g.data(d).kind == data_kind::phantom) continue;
        if (!at(alive, d)) {
          at(alive, d) = 1;
          at(where, d) = place::device;
          at(missing, d) = static_cast<int>(g.producers(d).size());
          created += g.data(d).size;
        }
        at(done, d)[position(d, c)] = 1;
        --at(missing, d);
      }
      const seconds dt = fast ? node.fast_time : node.time;
      // The op's peak: the stored data plus what it holds, through the transfers' changes
      // while it runs.
      peak = std::max(peak, mem.advance(now + dt, false,
                                        created + (fast ? node.fast_overhead : node.overhead)));
      mem.change(created);
      now += dt;
      point.end = now;
      ++at(runs, c);
    }
    if (peak > opt.budget)
      fail(violation_kind::over_budget, i,
           name() + ": needs " + std::to_string(peak) +
               " bytes while it runs, over the budget of " + std::to_string(opt.budget) + " bytes");
    if (mem.host_peak() > opt.hw.host_memory)
      fail(violation_kind::over_host_memory, i,
           name() + ": the host holds " + std::to_string(mem.host_peak()) +
               " bytes of offloaded data, over the " + std::to_string(opt.hw.host_memory) +
               " bytes of host memory of the machine");
    point.peak = peak;
    point.after = mem.device();
    if (opt.record_timeline) r.timeline.push_back(point);
  }
  // The transfers still in flight end.
  if (const bytes tail = mem.advance(std::numeric_limits<seconds>::infinity(), true);
      tail > opt.budget)
    fail(violation_kind::over_budget, s.ops.size(),
         "prefetches still in flight after the last instruction need " + std::to_string(tail) +
             " bytes, over the budget of " + std::to_string(opt.budget) + " bytes");
  if (mem.host_peak() > opt.hw.host_memory)
    fail(violation_kind::over_host_memory, s.ops.size(),
         "the host holds " + std::to_string(mem.host_peak()) +
             " bytes of offloaded data, over the " + std::to_string(opt.hw.host_memory) +
             " bytes of host memory of the machine");
  r.makespan = std::max({now, d2h_free, h2d_free, params ? cpu_free : 0.0});
  r.peak = mem.peak();
  r.host_peak = mem.host_peak();

  // Final state. Protected data is never freed, so once every compute node has run, every
  // protected output is alive with all its contributions: only what is left over can be wrong.
  const std::size_t end = s.ops.size();
  std::vector<int> never;
  for (int c = 0; c < g.compute_count(); ++c)
    if (at(runs, c) == 0) never.push_back(c);
  std::string leftover, away;
  for (int d = 0; d < g.data_count(); ++d) {
    if (!at(alive, d)) continue;
    const bool on_host = at(where, d) != place::device;
    if (!g.data(d).is_protected)
      leftover +=
          (leftover.empty() ? "" : ", ") + quoted_name(g, d) + (on_host ? " (on the host)" : "");
    else if (on_host)
      away += (away.empty() ? "" : ", ") + quoted_name(g, d);
  }
  if (!never.empty())
    fail(violation_kind::wrong_final_state, end,
         "the schedule ends without running " + ::remat::detail::compute_list(g, never) +
             "; every compute node runs at least once" +
             (leftover.empty() ? std::string() : "; memory still holds " + leftover));
  else if (!leftover.empty())
    fail(violation_kind::wrong_final_state, end,
         "the schedule ends with " + leftover +
             " still in memory; it must end holding only the protected data");
  else if (!away.empty())
    fail(violation_kind::wrong_final_state, end,
         "the schedule ends with " + away +
             " on the host; protected data ends on the device (prefetch it back)");
  else if (auto why = params ? params->final_state() : std::nullopt)
    fail(violation_kind::wrong_final_state, end,
         "the parameters do not end where they started (a program that manages them is one "
         "iteration of a cycle): " +
             *why);
  r.valid = !r.first_violation.has_value();
  return r;
}

/// A chain's schedule: replayed on the chain's training graph, build_graph(c) (a chain's
/// programs are usually written in the chain notation, schedule/notation.hpp). An invalid chain
/// gives an invalid_graph violation with validate(chain)'s message.
inline report simulate(const chain& c, const schedule& s, options opt = {}) {
  auto g = build_graph(c);
  if (!g) {
    report r;
    r.first_violation = violation{violation_kind::invalid_graph, 0, g.err().message};
    return r;
  }
  return simulate(*g, s, opt);
}

/// A chain program written in the chain notation (schedule/notation.hpp), replayed in its own
/// terms: it is lowered onto the chain's graph and simulated there, and the report speaks of the
/// chain ops: the timeline has one point per chain op (the span of its instructions: first start,
/// last end, highest peak), a violation's op is the chain op's index, and the graph's nodes carry
/// the thesis' names (a_k, delta_k, abar_k's phantom, F_l, B_l). A break of the notation's own
/// rules (lower()) is a violation at its op: unknown_node, missing_input, already_present or
/// invalid_transfer.
inline report simulate(const chain& c, std::span<const chain_op> ops, options opt = {}) {
  report r;
  auto built = build_graph(c);
  if (!built) {
    r.first_violation = violation{violation_kind::invalid_graph, 0, built.err().message};
    return r;
  }
  graph& g = *built;
  const int n = c.length();
  const chain_nodes at(n);
  for (int k = 0; k <= n; ++k) {
    g.data(at.a(k)).name = "a_" + std::to_string(k);
    g.data(at.delta(k)).name = "delta_" + std::to_string(k);
  }
  for (int l = 1; l <= n; ++l) {
    g.data(at.phantom(l)).name = "the rest of abar_" + std::to_string(l);
    g.compute(at.fwd(l)).name = "F" + std::to_string(l);
    g.compute(at.bwd(l)).name = "B" + std::to_string(l);
  }
  std::vector<std::size_t> origin;
  lowering_failure failure;
  auto s = lower(n, ops, &origin, &failure);
  if (!s) {
    static constexpr violation_kind kinds[] = {violation_kind::unknown_node,
                                               violation_kind::missing_input,
                                               violation_kind::already_present};
    r.first_violation =
        violation{kinds[static_cast<int>(failure.rule)], failure.op, s.err().message};
    return r;
  }
  report low = simulate(g, *s, opt);
  r.valid = low.valid;
  r.makespan = low.makespan;
  r.peak = low.peak;
  r.host_peak = low.host_peak;
  if (low.first_violation) {
    violation v = std::move(*low.first_violation);
    // "instruction i (X)" becomes "<chain op> at op j" (the first one, the op at fault: "<chain
    // op>").
    std::string text;
    bool first = true;
    for (std::size_t pos = 0;;) {
      const std::size_t at_ins = v.message.find("instruction ", pos);
      std::size_t idx = 0, end = at_ins;
      bool ref = at_ins != std::string::npos;
      if (ref) {
        end = at_ins + 12;
        while (end < v.message.size() && v.message[end] >= '0' && v.message[end] <= '9')
          idx = idx * 10 + static_cast<std::size_t>(v.message[end++] - '0');
        ref = end > at_ins + 12 && idx < s->ops.size() && v.message.compare(end, 2, " (") == 0;
        if (ref) end = v.message.find(')', end);
        ref = ref && end != std::string::npos;
      }
      if (!ref) {
        text += v.message.substr(pos);
        break;
      }
      const std::size_t j = origin[idx];
      text += v.message.substr(pos, at_ins - pos) + to_string(ops[j]) +
              (first && at_ins == 0 ? std::string() : " at op " + std::to_string(j));
      first = false;
      pos = end + 1;
    }
    // The op at fault is named once: "F3_all: its input ..." rather than "F3_all: 'F3': its input
    // ...".
    if (v.op < origin.size() && s->ops[v.op].is_compute()) {
      const std::string twice = ": '" + g.compute(s->ops[v.op].node).name + "':";
      if (const auto p = text.find(twice); p != std::string::npos) text.erase(p, twice.size() - 1);
    }
    v.message = std::move(text);
    if (v.op < origin.size())
      v.op = origin[v.op];
    else if (v.op == s->ops.size())
      v.op = ops.size();
    r.first_violation = std::move(v);
  }
  for (const memory_point& p : low.timeline) {
    const std::size_t j = origin[p.op];
    if (!r.timeline.empty() && r.timeline.back().op == j) {
      memory_point& q = r.timeline.back();
      q.end = std::max(q.end, p.end);
      q.peak = std::max(q.peak, p.peak);
      q.after = p.after;
    } else {
      r.timeline.push_back(p);
      r.timeline.back().op = j;
    }
  }
  return r;
}

}  // namespace remat::sim
