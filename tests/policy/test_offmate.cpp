// offmate (the O-ILP): one block against its closed form, plenty of memory against plain
// training, whole-group plans against exhaustive enumeration, every answer refereed by
// evaluate(), monotone in memory, bandwidth and optimizer speeds, the least GPU memory and the
// host's shortfall, and problems and machines that cannot be planned.
#include <doctest/doctest.h>

#if defined(REMAT_HAS_LPSOLVE) || defined(REMAT_HAS_CBC)

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <remat/policy/offmate.hpp>
#include <remat/policy/offmate/from_graph.hpp>
#include <remat/zoo/llama.hpp>

#include "support/offmate_brute_force.hpp"
#include "support/small_llama.hpp"

#if defined(REMAT_HAS_CBC)
#include <remat/milp/cbc.hpp>
using offmate_backend = remat::milp::cbc;
#else
#include <remat/milp/lpsolve.hpp>
using offmate_backend = remat::milp::lpsolve;
#endif

using namespace remat;

namespace {

using policy = offmate<offmate_backend>;

/// L blocks of one to three options (store-all, recompute, offload), one group per block
/// (trained or frozen at random), sizes in hundreds of bytes, times in quarter seconds.
/// shared: one more group, trained, used by the first and the last block (tied weights).
offmate_problem random_problem(std::mt19937& rng, int L, int max_options = 3, bool shared = false) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  offmate_problem p;
  p.name = "random";
  for (int i = 0; i < L; ++i) {
    offmate_block b{"b" + std::to_string(i), {}};
    const seconds f = 0.25 * pick(1, 8), bw = 0.25 * pick(1, 12);
    const bytes s = 100 * pick(1, 10);
    b.options.push_back({"store-all", f, bw, s, 0, 100 * pick(0, 2), 100 * pick(0, 2)});
    if (max_options >= 2)
      b.options.push_back({"recompute", f, bw + f, s / 5, 0, 0, 100 * pick(0, 2)});
    if (max_options >= 3) b.options.push_back({"offload", f, bw, s / 5, s - s / 5, 0, 0});
    p.blocks.push_back(b);
    const bytes size = 100 * pick(1, 20);
    p.groups.push_back({"w" + std::to_string(i), {{"t", size, pick(0, 3) == 0 ? 0 : size}}, {i}});
  }
  for (int t = 0; t < 2 * L; ++t) p.interface_bytes.push_back(100 * pick(0, 3));
  if (shared) {
    const bytes size = 100 * pick(1, 20);
    p.groups.push_back({"tied", {{"t", size, size}}, {L - 1, 0}});
  }
  return p;
}

machine random_machine(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  machine m = machine::with_bandwidth(250.0 * pick(2, 16));
  m.gpu_optimizer_speed = 1000.0 * pick(1, 8);
  m.cpu_optimizer_speed = 250.0 * pick(1, 8);
  m.step_overhead = 0.125 * pick(0, 4);
  return m;
}

/// Everything on the GPU at once: a budget with which nothing needs to move.
bytes everything(const offmate_problem& p) {
  bytes b = 0;
  for (const auto& w : p.groups)
    b += w.size() +
         static_cast<bytes>(std::ceil(p.optimizer_states * static_cast<double>(w.trainable()))) +
         w.trainable();
  bytes act = 0;
  for (const auto& blk : p.blocks) {
    bytes most = 0;
    for (const auto& o : blk.options)
      most =
          std::max({most, o.stored_bytes + o.forward_overhead_bytes + o.backward_overhead_bytes});
    act += most;
  }
  bytes a = 0;
  for (bytes x : p.interface_bytes) a = std::max(a, x);
  return b + act + a;
}

/// msg has every part (says which it lacks).
bool mentions(const std::string& msg, std::initializer_list<std::string_view> parts) {
  for (auto part : parts)
    if (msg.find(part) == std::string::npos) {
      MESSAGE("message '" << msg << "' lacks '" << part << "'");
      return false;
    }
  return true;
}

policy with(const machine& hw) {
  policy pol;
  pol.hw = hw;
  return pol;
}

/// plan() succeeded, its plan passes the referee at a tight tolerance and its time is the
/// referee's.
void check_answer(const offmate_problem& p, const policy& pol, bytes budget,
                  const offmate_answer& a) {
  const auto ev = evaluate(p, pol.hw, budget, a.plan, pol.semantics, pol.features, 1e-6);
  INFO((ev.violations.empty() ? std::string() : ev.violations.front()));
  CHECK(ev.valid());
  CHECK(a.fractional_makespan == doctest::Approx(ev.makespan).epsilon(1e-9));
  CHECK(ev.gpu_peak() <= static_cast<double>(budget) * (1 + 1e-6));
  CHECK(a.optimal);
  REQUIRE(a.bound);
  CHECK(*a.bound <= a.fractional_makespan * (1 + 1e-6));
}

}  // namespace

TEST_CASE("offmate: one block has the closed form of its only placement") {
  std::mt19937 rng(11);
  for (int round = 0; round < 12; ++round) {
    const offmate_problem p = random_problem(rng, 1);
    const machine hw = random_machine(rng);
    const parameter_group& w = p.groups[0];
    const double size = static_cast<double>(w.size()), grad = static_cast<double>(w.trainable());
    // The group and its states stay (no CPU update can happen: block 0's window is empty);
    // transfers only add time.
    // The peak of option o: the group, its states and (backward) its gradient, and the rest.
    auto peak = [&](const offmate_option& o) {
      const double fwd =
          size + 2 * grad +
          static_cast<double>(o.stored_bytes + o.forward_overhead_bytes + p.interface_at(0));
      const double bwd =
          size + 3 * grad +
          static_cast<double>(o.stored_bytes + o.backward_overhead_bytes + p.interface_at(1));
      return static_cast<bytes>(std::max(fwd, bwd));
    };
    bytes least = unlimited_bytes;
    for (const auto& o : p.blocks[0].options) least = std::min(least, peak(o));
    const policy pol = with(hw);
    CHECK(pol.minimum_budget(p).value() == least);
    for (bytes budget : {least, least + 150, least + 400}) {
      seconds best = 1e300;
      for (const auto& o : p.blocks[0].options) {
        if (peak(o) > budget) continue;
        // Offloaded activations leave after the forward and come back before the backward.
        const double moved = static_cast<double>(o.offloaded_bytes) / hw.device_to_host;
        best = std::min(best, std::max({hw.step_overhead, o.forward_time + moved}) +
                                  std::max({hw.step_overhead, moved + o.backward_time +
                                                                  grad / hw.gpu_optimizer_speed}));
      }
      const auto a = pol.plan(p, budget);
      REQUIRE(a);
      check_answer(p, pol, budget, *a);
      CHECK(a->fractional_makespan == doctest::Approx(best).epsilon(1e-7));
    }
    const auto below = pol.plan(p, least - 1);
    CHECK(below.code() == status::budget_too_small);
    CHECK(below.err().minimum_budget == least);
  }
}

TEST_CASE("offmate: with memory for everything the plan is plain training") {
  std::mt19937 rng(12);
  for (int round = 0; round < 6; ++round) {
    const offmate_problem p = random_problem(rng, 4);
    machine hw = random_machine(rng);
    hw.step_overhead = 0;
    policy pol = with(hw);
    pol.features.cpu_optimizer = false;
    seconds plain = 0;
    for (const auto& b : p.blocks) {
      seconds best = 1e300;
      for (const auto& o : b.options)
        if (o.offloaded_bytes == 0) best = std::min(best, o.forward_time + o.backward_time);
      plain += best;
    }
    for (const auto& w : p.groups)
      plain += static_cast<double>(w.trainable()) / hw.gpu_optimizer_speed;
    const bytes budget = everything(p);
    const auto a = pol.plan(p, budget);
    REQUIRE(a);
    check_answer(p, pol, budget, *a);
    CHECK(a->fractional_makespan == doctest::Approx(plain).epsilon(1e-7));
    // The CPU may take some updates off the GPU: never slower, never below the compute alone.
    pol.features.cpu_optimizer = true;
    const auto b = pol.plan(p, budget);
    REQUIRE(b);
    check_answer(p, pol, budget, *b);
    CHECK(b->fractional_makespan <= a->fractional_makespan + 1e-9);
    seconds compute = 0;
    for (const auto& blk : p.blocks) {
      seconds best = 1e300;
      for (const auto& o : blk.options) best = std::min(best, o.forward_time + o.backward_time);
      compute += best;
    }
    CHECK(b->fractional_makespan >= compute - 1e-9);
  }
}

TEST_CASE("offmate: whole-group plans are the best of every enumerated plan") {
  std::mt19937 rng(13);
  int tight = 0;
  for (int round = 0; round < 16; ++round) {
    offmate_problem p = random_problem(rng, round < 4 ? 1 : 2, 2);
    // Two blocks: one trained group and one frozen keep the enumeration small.
    if (p.length() == 2) p.groups[static_cast<std::size_t>(round % 2)].tensors[0].trainable = 0;
    const machine hw = random_machine(rng);
    policy pol = with(hw);
    pol.whole_groups = true;
    const bytes least = pol.minimum_budget(p).value();
    const bytes budget = least + (everything(p) - least) * (round % 4) / 4;
    const auto brute = testing::offmate_brute_force(p, hw, budget);
    const auto a = pol.plan(p, budget);
    INFO("round " << round << ", budget " << budget << ", " << brute.plans << " plans");
    REQUIRE(brute.feasible == static_cast<bool>(a));
    if (!a) continue;
    check_answer(p, pol, budget, *a);
    CHECK(a->fractional_makespan == doctest::Approx(brute.best).epsilon(1e-7));
    // Fractions can only help.
    pol.whole_groups = false;
    const auto f = pol.plan(p, budget);
    REQUIRE(f);
    CHECK(f->fractional_makespan <= a->fractional_makespan + 1e-9);
    if (budget == least) ++tight;
  }
  CHECK(tight > 0);
}

TEST_CASE("offmate: more memory, bandwidth or optimizer speed never gives a slower plan") {
  std::mt19937 rng(14);
  for (int round = 0; round < 4; ++round) {
    const offmate_problem p = random_problem(rng, 3, 3, round % 2 == 0);
    const machine hw = random_machine(rng);
    const policy pol = with(hw);
    const bytes least = pol.minimum_budget(p).value();
    const bytes top = everything(p);
    seconds last = 1e300;
    for (int i = 0; i <= 4; ++i) {
      const bytes budget = least + (top - least) * i / 4;
      const auto a = pol.plan(p, budget);
      REQUIRE(a);
      check_answer(p, pol, budget, *a);
      CHECK(a->fractional_makespan <= last + 1e-9);
      last = a->fractional_makespan;
      // Faster parts of the machine, one at a time.
      for (int part = 0; part < 4; ++part) {
        machine fast = hw;
        if (part == 0) fast.device_to_host = fast.host_to_device = 2 * hw.device_to_host;
        if (part == 1) fast.gpu_optimizer_speed *= 2;
        if (part == 2) fast.cpu_optimizer_speed *= 2;
        if (part == 3) fast.step_overhead /= 2;
        const auto b = with(fast).plan(p, budget);
        REQUIRE(b);
        CHECK(b->fractional_makespan <= a->fractional_makespan + 1e-9);
      }
      // Switching a feature off never helps; the paper's literal sums never hurt.
      for (int what = 0; what < 3; ++what) {
        policy other = pol;
        if (what == 0) other.features.cpu_optimizer = false;
        if (what == 1) other.features.activation_offload = false;
        if (what == 2) other.semantics = offmate_semantics::literal;
        const auto c = other.plan(p, budget);
        if (what == 2) {
          REQUIRE(c);
          CHECK(c->fractional_makespan <= a->fractional_makespan + 1e-9);
        } else if (c) {
          CHECK(c->fractional_makespan >= a->fractional_makespan - 1e-9);
        }
      }
    }
  }
}

TEST_CASE("offmate: scaling every time, or every size with the speeds, keeps the plan's shape") {
  std::mt19937 rng(15);
  const offmate_problem p = random_problem(rng, 3);
  const machine hw = random_machine(rng);
  const bytes budget = (policy{with(hw)}.minimum_budget(p).value() + everything(p)) / 2;
  const auto base = with(hw).plan(p, budget);
  REQUIRE(base);
  offmate_problem slow = p;
  for (auto& b : slow.blocks)
    for (auto& o : b.options) {
      o.forward_time *= 3;
      o.backward_time *= 3;
    }
  machine slow_hw = hw;
  slow_hw.device_to_host /= 3;
  slow_hw.host_to_device /= 3;
  slow_hw.gpu_optimizer_speed /= 3;
  slow_hw.cpu_optimizer_speed /= 3;
  slow_hw.step_overhead *= 3;
  const auto s = with(slow_hw).plan(slow, budget);
  REQUIRE(s);
  CHECK(s->fractional_makespan == doctest::Approx(3 * base->fractional_makespan).epsilon(1e-7));
  offmate_problem big = p;
  for (auto& b : big.blocks)
    for (auto& o : b.options) {
      o.stored_bytes *= 4;
      o.offloaded_bytes *= 4;
      o.forward_overhead_bytes *= 4;
      o.backward_overhead_bytes *= 4;
    }
  for (auto& a : big.interface_bytes) a *= 4;
  for (auto& w : big.groups)
    for (auto& t : w.tensors) {
      t.size *= 4;
      t.trainable *= 4;
    }
  machine big_hw = hw;
  big_hw.device_to_host *= 4;
  big_hw.host_to_device *= 4;
  big_hw.gpu_optimizer_speed *= 4;
  big_hw.cpu_optimizer_speed *= 4;
  const auto b = with(big_hw).plan(big, 4 * budget);
  REQUIRE(b);
  CHECK(b->fractional_makespan == doctest::Approx(base->fractional_makespan).epsilon(1e-7));
}

TEST_CASE("offmate: the least GPU memory has a plan, and below it the answer says what fills it") {
  std::mt19937 rng(16);
  for (int round = 0; round < 4; ++round) {
    const offmate_problem p = random_problem(rng, 3, 3, round % 2 == 1);
    const policy pol = with(random_machine(rng));
    const bytes least = pol.minimum_budget(p).value();
    // A necessary floor: each step's own parameters, gradient and stored activations.
    bytes floor = 0;
    for (int t = 0; t < p.steps(); ++t) {
      bytes need = p.interface_at(t);
      for (const auto& w : p.groups)
        need += (p.uses(w, t) ? w.size() : 0) + (p.holds_gradient(w, t) ? w.trainable() : 0);
      for (int i = 0; i <= p.block_of(t); ++i) {
        bytes s = unlimited_bytes;
        for (const auto& o : p.blocks[static_cast<std::size_t>(i)].options)
          s = std::min(s, o.stored_bytes);
        need += s;
      }
      floor = std::max(floor, need);
    }
    CHECK(least >= floor);
    const auto at = pol.plan(p, least);
    REQUIRE(at);
    check_answer(p, pol, least, *at);
    const auto below = pol.plan(p, least - 1);
    REQUIRE(below.code() == status::budget_too_small);
    CHECK(below.err().minimum_budget == least);
    CHECK(mentions(below.err().message, {"the least is", "set at step", "parameters of block"}));
  }
}

TEST_CASE("offmate: host memory too small says how much more it needs") {
  std::mt19937 rng(17);
  const offmate_problem p = random_problem(rng, 3);
  machine hw = random_machine(rng);
  const policy roomy = with(hw);
  const bytes least = roomy.minimum_budget(p).value();
  const auto a = roomy.plan(p, least);
  REQUIRE(a);
  const auto host = static_cast<bytes>(a->evaluation.host_bytes);
  REQUIRE(host > 0);
  // At the least GPU memory the plan must offload: with less host memory than any such plan
  // needs, the GPU is what should grow.
  hw.host_memory = 1;
  const auto r = with(hw).plan(p, least);
  REQUIRE(!r);
  CHECK(r.code() == status::budget_too_small);
  CHECK(r.err().minimum_budget > least);
  CHECK(mentions(r.err().message, {"of host memory", "the least is"}));
}

TEST_CASE("offmate: the time limit stops the search with its best plan") {
  // Eight identical decoder layers between an embedding and a head, Llama2-7B-like sizes: a
  // search of tens of seconds, stopped after one (CBC once crashed there, with a warm start).
  offmate_problem p;
  p.name = "decoder";
  const bytes act = 1'270'000'000, out = 33'554'432, layer = 808'000'000, emb = 524'288'000;
  p.blocks.push_back({"embed", {{"store-all", 0.001, 0.002, out, 0, 0, 0}}});
  for (int i = 0; i < 8; ++i)
    p.blocks.push_back({"layer",
                        {{"store-all", 0.09, 0.18, act, 0, out, out},
                         {"recompute", 0.09, 0.27, out, 0, out, act},
                         {"offload", 0.09, 0.18, out, act - out, out, out}}});
  p.blocks.push_back({"head", {{"store-all", 0.06, 0.12, 262'144'000, 0, 0, 0}}});
  for (int i = 0; i < p.length(); ++i)
    p.groups.push_back({"w" + std::to_string(i),
                        {{"t", i == 0 || i == p.length() - 1 ? emb : layer,
                          i == 0 || i == p.length() - 1 ? emb : layer}},
                        {i}});
  p.interface_bytes.assign(static_cast<std::size_t>(p.steps()), 2 * out);
  policy pol;
  pol.hw = machine::with_bandwidth(10.4e9);
  pol.hw.step_overhead = 0.05;
  pol.time_limit = 1;
  const auto a = pol.plan(p, 6'000'000'000);
  REQUIRE(a);
  CHECK(a->solve_seconds < 5);
  CHECK(evaluate(p, pol.hw, 6'000'000'000, a->plan).valid());
  if (!a->optimal) CHECK(mentions(a->notes.at(0), {"time limit"}));
}

TEST_CASE("offmate: a ZeRO-Infinity-like plan in the same model is valid and never faster") {
  std::mt19937 rng(19);
  for (int round = 0; round < 4; ++round) {
    const offmate_problem p = random_problem(rng, 3);
    policy pol = with(random_machine(rng));
    const bytes budget = everything(p);
    const auto best = pol.plan(p, budget);
    REQUIRE(best);
    pol.features.zero_infinity = true;
    const auto zero = pol.plan(p, budget);
    REQUIRE(zero);
    check_answer(p, pol, budget, *zero);
    CHECK(zero->fractional_makespan >= best->fractional_makespan - 1e-9);
    for (std::size_t w = 0; w < p.groups.size(); ++w)
      for (int t = 0; t < p.steps(); ++t)
        if (!p.uses(p.groups[w], t)) CHECK(zero->plan.at(w, t).resident == 0);
  }
}

TEST_CASE("offmate: a ZeRO-2-like plan in the same model is valid and never faster") {
  std::mt19937 rng(23);
  int cpu = 0;
  for (int round = 0; round < 4; ++round) {
    const offmate_problem p = random_problem(rng, 3);
    policy pol = with(random_machine(rng));
    const bytes budget = everything(p);
    const auto best = pol.plan(p, budget);
    REQUIRE(best);
    pol.features.zero_offload = true;
    const auto zero = pol.plan(p, budget);
    REQUIRE_MESSAGE(zero.ok(), zero.message());
    check_answer(p, pol, budget, *zero);
    CHECK(zero->fractional_makespan >= best->fractional_makespan - 1e-9);
    for (std::size_t w = 0; w < p.groups.size(); ++w) {
      const parameter_group& g = p.groups[w];
      const double x = zero->plan.cpu_share(w);
      if (g.trainable() > 0 && p.has_cpu_window(g)) {
        CHECK(x == doctest::Approx(1.0));  // every update the CPU can make
        ++cpu;
      }
      if (g.trainable() == 0)  // nothing to update: on the GPU throughout
        for (int t = 0; t < p.steps(); ++t)
          CHECK(zero->plan.at(w, t).resident + zero->plan.at(w, t).prefetched ==
                doctest::Approx(1.0));
    }
  }
  CHECK(cpu > 0);
}

TEST_CASE("offmate on a graph: blocks, their options, and groups by the blocks that read them") {
  const graph g = build_graph(testing::small_llama(2, true)).value();
  const auto all = offmate_problem_of(g, {.max_blocks = 0});
  REQUIRE(all);
  const offmate_problem& p = all->problem;
  // The cut: the embedding, attention and MLP per layer, the final norm, the head and loss.
  CHECK(p.length() == 1 + 2 * 2 + 2);
  CHECK(all->blocks.size() == static_cast<std::size_t>(p.length()));
  CHECK(validate(p).ok());
  for (const auto& b : p.blocks) {
    const offmate_option& keep = b.options.front();
    CHECK(keep.name == "store-all");
    for (const auto& o : b.options) {
      if (o.name == "recompute") {
        CHECK(o.stored_bytes < keep.stored_bytes);
        CHECK(o.backward_time == doctest::Approx(keep.forward_time + keep.backward_time));
      }
      if (o.name == "offload") {
        CHECK(o.stored_bytes + o.offloaded_bytes == keep.stored_bytes);
        CHECK(o.forward_time == keep.forward_time);
      }
    }
  }
  // Groups: the tied embedding (first and last block), then one per block with weights.
  bytes total = 0;
  for (const auto& w : g.parameters()) total += w.size;
  bytes grouped = 0;
  bool tied = false;
  for (const auto& w : p.groups) {
    grouped += w.size();
    if (w.blocks == std::vector<int>{0, p.length() - 1}) tied = true;
  }
  CHECK(grouped == total);
  CHECK(tied);
  CHECK(p.groups.size() == 1 + 2 * 2 + 1);  // the tied one, 4 layer halves, the final norm
  // Merged into at most 4: runs of two, placed where they repeat: the embedding, one block a
  // decoder layer (attention and MLP), the final norm with the head; every forward node once,
  // in order.
  const auto merged = offmate_problem_of(g, {.max_blocks = 4});
  REQUIRE(merged);
  REQUIRE(merged->problem.length() == 4);
  for (int layer = 0; layer < 2; ++layer) {
    const auto& b = merged->blocks[static_cast<std::size_t>(1 + layer)];
    const std::string h = "fwd layers." + std::to_string(layer) + ".";
    CHECK(g.compute(b.front()).name == h + "input_layernorm");
    CHECK(g.compute(b.back()).name == h + "add_2");
  }
  std::vector<int> seen;
  for (const auto& b : merged->blocks) seen.insert(seen.end(), b.begin(), b.end());
  std::vector<int> before;
  for (const auto& b : all->blocks) before.insert(before.end(), b.begin(), b.end());
  CHECK(seen == before);
  // Planned end to end.
  policy pol;
  pol.hw.step_overhead = 0.001;
  const bytes budget = pol.minimum_budget(p).value() * 3 / 2;
  const auto a = pol.plan(g, budget);
  REQUIRE_MESSAGE(a, a.err().message);
  CHECK(a->blocks.size() == static_cast<std::size_t>(a->problem.length()));
  CHECK(evaluate(a->problem, pol.hw, budget, a->plan).valid());
  CHECK(a->makespan >= g.ideal_time() - 1e-9);
}

TEST_CASE("offmate on a graph: the offload option makes its cheap operations again") {
  // [Offmate24, §4.1]: an operation is cheap when it takes less time than its outputs' offload
  // and prefetch; the offload option frees their outputs after the forward and makes them again
  // at the start of the backward instead of moving them.
  const graph g = build_graph(testing::small_llama(2, true)).value();
  const policy pol;
  const machine& hw = pol.hw;
  const auto plain = offmate_problem_of(g, {.recompute_cheap = false}, hw);
  const auto cheap = offmate_problem_of(g, {}, hw);
  REQUIRE(plain);
  REQUIRE(cheap);
  // A link that costs nothing makes nothing cheap: the same problem.
  const auto free_link = offmate_problem_of(g, {});
  REQUIRE(free_link);
  CHECK(free_link->problem.blocks == plain->problem.blocks);
  CHECK(validate(cheap->problem).ok());
  const double round_trip = 1 / hw.device_to_host + 1 / hw.host_to_device;
  int fewer = 0;
  for (int r = 0; r < cheap->kinds.kinds(); ++r) {
    const auto ri = static_cast<std::size_t>(r);
    const int k =
        static_cast<int>(std::ranges::find(cheap->kinds.kind_of, r) - cheap->kinds.kind_of.begin());
    const auto& opts = cheap->problem.blocks[static_cast<std::size_t>(k)].options;
    const auto& before = plain->problem.blocks[static_cast<std::size_t>(k)].options;
    REQUIRE(opts.size() == before.size());
    if (opts.back().name != "offload") continue;
    const offmate_option &o = opts.back(), &q = before.back();
    CHECK(o.stored_bytes <= q.stored_bytes);  // less by the phantoms made again
    CHECK(o.forward_time == q.forward_time);
    CHECK(o.offloaded_bytes <= q.offloaded_bytes);
    CHECK(o.stored_bytes + o.forward_overhead_bytes <= q.stored_bytes + q.forward_overhead_bytes);
    CHECK(o.stored_bytes + o.backward_overhead_bytes <= q.stored_bytes + q.backward_overhead_bytes);
    // The option's program: the forwards it runs again, at the start of its backward, are
    // cheap, their outputs no longer moved, and the backward longer by their time.
    REQUIRE(cheap->programs[ri].options.size() == 2);
    const auto& moved = cheap->offloaded[ri];
    const auto& moved_before = plain->offloaded[ri];
    seconds again = 0;
    bytes made = 0;
    for (const instruction& i : cheap->programs[ri].options[1].backward) {
      if (!i.is_compute() || g.compute(i.node).kind != compute_kind::forward) continue;
      again += g.compute(i.node).time;
      double out = 0;
      for (int d : g.outputs(i.node)) {
        if (g.data(d).kind != data_kind::activation) continue;
        CHECK(std::ranges::find(moved_before, d) != moved_before.end());
        CHECK(std::ranges::find(moved, d) == moved.end());
        out += static_cast<double>(g.data(d).size);
        made += g.data(d).size;
      }
      CHECK(g.compute(i.node).time < out * round_trip);
    }
    CHECK(o.backward_time == doctest::Approx(q.backward_time + again));
    CHECK(o.offloaded_bytes + made == q.offloaded_bytes);
    fewer += o.offloaded_bytes < q.offloaded_bytes;
  }
  CHECK(fewer > 0);
}

TEST_CASE("offmate: problems and machines it cannot plan are refused with the reason") {
  std::mt19937 rng(18);
  const offmate_problem good = random_problem(rng, 2);
  const policy pol = with(random_machine(rng));
  auto refused = [&](const offmate_problem& p, std::initializer_list<std::string_view> parts) {
    const auto r = pol.plan(p, unlimited_bytes);
    REQUIRE(!r);
    CHECK(r.code() == status::invalid_problem);
    CHECK(mentions(r.err().message, parts));
  };
  offmate_problem p = good;
  p.blocks.clear();
  refused(p, {"no block"});
  p = good;
  p.blocks[1].options.clear();
  refused(p, {"block 1", "no option"});
  p = good;
  p.blocks[0].options[0].stored_bytes = -5;
  refused(p, {"block 0", "option 0", "stored_bytes", "negative"});
  p = good;
  p.blocks[0].options[1].forward_time = std::nan("");
  refused(p, {"block 0", "option 1", "forward_time"});
  p = good;
  p.groups[0].blocks = {7};
  refused(p, {"parameter group 0", "block 7", "0..1"});
  p = good;
  p.groups[1].tensors[0].trainable = p.groups[1].tensors[0].size + 1;
  refused(p, {"parameter group 1", "trainable", "exceeds its size"});
  p = good;
  p.interface_bytes.push_back(0);
  refused(p, {"interface_bytes", "one per step"});
  p = good;
  p.optimizer_states = -1;
  refused(p, {"optimizer_states"});
  for (int field = 0; field < 4; ++field) {
    policy bad = pol;
    if (field == 0) bad.hw.cpu_optimizer_speed = 0;
    if (field == 1) bad.hw.gpu_optimizer_speed = std::nan("");
    if (field == 2) bad.hw.step_overhead = -1;
    if (field == 3) bad.hw.device_to_host = -1;
    const auto r = bad.plan(good, unlimited_bytes);
    REQUIRE(!r);
    CHECK(r.code() == status::invalid_problem);
    const char* name[] = {"cpu_optimizer_speed", "gpu_optimizer_speed", "step_overhead",
                          "device-to-host"};
    CHECK(mentions(r.err().message, {name[field]}));
  }
  // Only activation offloading, and no link.
  p = good;
  p.blocks[0].options.erase(p.blocks[0].options.begin(), p.blocks[0].options.begin() + 2);
  policy no_link = pol;
  no_link.hw.device_to_host = no_link.hw.host_to_device = 0;
  const auto r = no_link.plan(p, unlimited_bytes);
  REQUIRE(!r);
  CHECK(mentions(r.err().message, {"block 0", "no link"}));
}

#endif

TEST_CASE("offmate batch size: with one sample at most it is the O-ILP itself") {
  std::mt19937 rng(41);
  for (int k = 0; k < 4; ++k) {
    const offmate_problem p = random_problem(rng, 3);
    policy pol;
    pol.hw = random_machine(rng);
    const bytes budget = everything(p) * 3 / 4;
    const auto base = pol.plan(p, budget);
    const auto b = pol.plan_batch(p, budget, 1);
    REQUIRE(base.ok() == b.ok());
    if (!base) continue;
    CHECK(b->batch == 1);
    CHECK(b->continuous_batch == doctest::Approx(1.0));
    CHECK(b->time_per_sample == doctest::Approx(base->fractional_makespan).epsilon(1e-6));
    CHECK(b->answer.makespan == doctest::Approx(base->makespan).epsilon(1e-6));
  }
}

TEST_CASE("offmate batch size: a lower bound of every batch size's plan per sample") {
  // [Offmate24, App. A]: a plan at batch b, divided by b, is a plan of the variant at r = 1/b
  // (the data are linear in b here), so the variant's optimum is at most every b's per sample;
  // the answer is the better rounding of its 1/r.
  std::mt19937 rng(43);
  constexpr int max_batch = 4;
  int checked = 0, above_one = 0, exact = 0;
  for (int k = 0; k < 6; ++k) {
    const offmate_problem p = random_problem(rng, 3);
    policy pol;
    pol.hw = random_machine(rng);
    const bytes budget = everything(p);
    const auto v = pol.plan_batch(p, budget, max_batch);
    REQUIRE_MESSAGE(v.ok(), v.message());
    CHECK(v->continuous_batch >= 1 - 1e-9);
    CHECK(v->continuous_batch <= max_batch + 1e-9);
    CHECK(v->batch >= 1);
    CHECK(v->batch <= max_batch);
    CHECK(std::abs(v->batch - v->continuous_batch) < 1);
    CHECK(v->answer.makespan / v->batch >= v->time_per_sample * (1 - 1e-6));
    REQUIRE(!v->tried.empty());
    CHECK(v->tried.front().first == 1);  // the batch as given is always a candidate
    for (const auto& [b, t] : v->tried)
      if (t > 0) CHECK(v->samples_per_second() >= b / t * (1 - 1e-12));
    const int whole = static_cast<int>(std::lround(v->continuous_batch));
    for (int b = 1; b <= max_batch; ++b) {
      const auto a = pol.plan(at_batch(p, b), budget);
      if (!a) continue;
      ++checked;
      CHECK(a->fractional_makespan / b >= v->time_per_sample * (1 - 1e-6));
      // At a whole 1/r the variant's plan is batch b's, divided by b: equal optima.
      if (b == whole && std::abs(v->continuous_batch - whole) < 1e-6) {
        ++exact;
        CHECK(a->fractional_makespan / b == doctest::Approx(v->time_per_sample).epsilon(1e-5));
      }
    }
    above_one += v->batch > 1;
  }
  CHECK(checked > 6);
  CHECK(exact > 0);
  CHECK(above_one > 0);  // room for more than one sample: it takes it
}

TEST_CASE("offmate batch size: bad requests say what would work") {
  std::mt19937 rng(47);
  const offmate_problem p = random_problem(rng, 3);
  policy pol;
  auto zero = pol.plan_batch(p, everything(p), 0);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.code() == status::invalid_problem);
  CHECK(mentions(zero.message(), {"max_batch", ">= 1"}));
  auto tight = pol.plan_batch(p, 1, 8);
  REQUIRE_FALSE(tight.ok());
  CHECK(tight.code() == status::budget_too_small);
  CHECK(tight.err().minimum_budget.has_value());
}
