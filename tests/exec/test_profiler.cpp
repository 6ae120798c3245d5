// The profiler (exec/profiler.hpp) on toy chains and DAGs whose layers allocate only through the
// backend: exact sizes, overheads and backward reads; random states and gradients left as they
// were; the statistic of the timed runs and its rounding; fixed times; bad options refused.

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec/profiler.hpp>
#include <remat/remat.hpp>

#include "toy_dags.hpp"
#include "toy_layers.hpp"

using namespace remat;
using remat::exec::host_backend;
using namespace toy::dags;

namespace {

/// A toy chain model: n stages, the last a loss; sizes, context and temporaries vary per stage.
std::vector<toy::stage> make_chain(int n, unsigned seed, bool noisy) {
  return toy::make_chain_model(n, seed, noisy);
}

toy::tensor make_input(host_backend& b, int n) {
  auto x = toy::tensor::make(b, n);
  for (int i = 0; i < n; ++i) x[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  return x;
}

}  // namespace

TEST_CASE("profile: exact sizes and overheads for layers that allocate only through the backend") {
  host_backend backend;
  std::vector<toy::stage> m = make_chain(4, 11, true);
  const auto rng = m[1].random_state();
  auto c =
      exec::profile_chain(m, make_input(backend, 12), backend, {.repetitions = 3, .warmup = 1});
  REQUIRE(c.ok());
  CHECK(c->input_bytes == 48);
  for (int l = 1; l <= 3; ++l) {
    const auto& st = m[static_cast<std::size_t>(l - 1)];
    CHECK(c->at(l).output_bytes == 4 * st.n_out);
    CHECK(c->at(l).saved_bytes == 4 * (st.n_out + st.extra));
    CHECK(c->at(l).forward_overhead_bytes == 4 * st.tmp_f);
    CHECK(c->at(l).backward_overhead_bytes == 4 * st.tmp_b);
    CHECK(c->at(l).name == st.label);
    CHECK(st.gw == 0.0f);  // the profiling backwards' gradients were cleared
  }
  CHECK(c->at(4).output_bytes == 4);
  CHECK(m[1].random_state() == rng);  // random layers end as they began
  CHECK(backend.in_use() == 0);       // the sample was a temporary; profiling keeps nothing
}

TEST_CASE("profile: the statistic of the timed runs, rounded to the resolution") {
  using exec::time_statistic;
  using exec::detail::summarize_times;
  const std::vector<seconds> t{3, 1, 10, 2};
  CHECK(summarize_times(t, time_statistic::median, 0) == 2.5);
  CHECK(summarize_times({3, 1, 10}, time_statistic::median, 0) == 3);
  CHECK(summarize_times(t, time_statistic::min, 0) == 1);
  CHECK(summarize_times(t, time_statistic::mean, 0) == 4);
  CHECK(summarize_times({}, time_statistic::mean, 0) == 0);
  // Rounded to the nearest multiple: times within the same step come out identical.
  CHECK(summarize_times({0.123}, time_statistic::median, 0.05) == doctest::Approx(0.1));
  CHECK(summarize_times({0.126}, time_statistic::median, 0.05) == doctest::Approx(0.15));
  CHECK(summarize_times({0.1230001}, time_statistic::min, 1e-3) ==
        summarize_times({0.1229999}, time_statistic::min, 1e-3));
}

TEST_CASE("profile: fixed times make profiles equal and plans the same; bad options are refused") {
  host_backend backend;
  std::vector<toy::stage> m = make_chain(5, 4, true);
  std::vector<exec::op_costs> fixed;
  for (int i = 0; i < 5; ++i) fixed.push_back({1.0 + i, 2.0 + 0.5 * i});
  const exec::profile_options opt{.repetitions = 2, .warmup = 0, .fixed_times = fixed};
  const auto a = exec::profile_chain(m, make_input(backend, 12), backend, opt);
  const auto b = exec::profile_chain(m, make_input(backend, 12), backend, opt);
  REQUIRE_MESSAGE(a.ok(), a.message());
  REQUIRE(b.ok());
  CHECK(*a == *b);
  for (int l = 1; l <= 5; ++l) {
    CHECK(a->at(l).forward_time == fixed[static_cast<std::size_t>(l - 1)].forward);
    CHECK(a->at(l).backward_time == fixed[static_cast<std::size_t>(l - 1)].backward);
  }
  const bytes budget =
      (rotor{}.minimum_budget(*a) + store_all{}.solve(*a, unlimited_bytes)->predicted_peak) / 2;
  CHECK(*rotor{}.solve(*a, budget) == *rotor{}.solve(*b, budget));
  // A resolution above every measured time rounds them all to 0.
  const auto coarse = exec::profile_chain(
      m, make_input(backend, 12), backend,
      {.repetitions = 1, .warmup = 0, .statistic = exec::time_statistic::min, .resolution = 1e6});
  REQUIRE(coarse.ok());
  for (const auto& st : coarse->stages) {
    CHECK(st.forward_time == 0);
    CHECK(st.backward_time == 0);
  }
  auto refused = [&](exec::profile_options o, const std::string& says) {
    const auto r = exec::profile_chain(m, make_input(backend, 12), backend, std::move(o));
    CHECK(r.code() == status::invalid_problem);
    INFO(r.message());
    CHECK(r.message().find(says) != std::string::npos);
  };
  refused({.resolution = -1e-5}, "profile_chain: resolution must be a finite time >= 0");
  refused({.fixed_times = {{1, 1}}},
          "profile_chain: fixed_times has 1 entries but the model has 5 ops");
  fixed[2].backward = -1;
  refused({.fixed_times = fixed},
          "profile_chain: fixed_times[2] has a negative or non-finite time");
  CHECK(backend.in_use() == 0);
}

TEST_CASE("profile_dag: exact sizes, overheads and backward reads") {
  host_backend b;
  model m = make_model(three, 9, true);
  const auto rng = m.layers[1].random_state();
  auto f = exec::profile_dag(m, make_input(b), b, {.repetitions = 3, .warmup = 1, .name = "three"});
  REQUIRE_MESSAGE(f.ok(), f.message());
  CHECK(f->name == "three");
  CHECK(f->input_bytes == 4 * input_floats);
  REQUIRE(f->ops.size() == three.size());
  for (std::size_t i = 0; i < three.size(); ++i) {
    const auto& n = m.layers[i];
    const auto& op = f->ops[i];
    INFO(op.name);
    CHECK(op.name == three[i].name);
    CHECK(op.inputs == three[i].inputs);
    CHECK(op.output_bytes == 4 * (n.is_loss ? 1 : n.n_out));
    CHECK(op.phantom_bytes == 4 * n.extra);
    CHECK(op.forward_overhead_bytes == 4 * n.tmp_f);
    CHECK(op.forward_save_overhead_bytes == 4 * n.tmp_f);
    CHECK(op.backward_overhead_bytes == 4 * n.tmp_b);  // in place: the same when accumulating
    CHECK(n.gw == 0.0f);
  }
  CHECK(f->ops[5].backward_reads.empty());  // the sum reads nothing
  CHECK(f->ops[4].backward_reads == std::vector<std::string>{"q", "k", "v", "output"});
  CHECK(f->ops[6].backward_reads == std::vector<std::string>{"add"});
  CHECK(m.layers[1].random_state() == rng);
  CHECK(b.in_use() == 0);
}

TEST_CASE("profile_dag: fixed times give equal forward DAGs; bad options are refused") {
  host_backend b;
  model m = make_model(diamond, 3, false);
  std::vector<exec::op_costs> fixed{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}};
  const exec::profile_options opt{.repetitions = 1, .warmup = 0, .fixed_times = fixed};
  const auto f1 = exec::profile_dag(m, make_input(b), b, opt);
  const auto f2 = exec::profile_dag(m, make_input(b), b, opt);
  REQUIRE_MESSAGE(f1.ok(), f1.message());
  REQUIRE(f2.ok());
  CHECK(*f1 == *f2);
  CHECK(f1->ops[3].forward_time == 7);  // op "d", in the model's order
  CHECK(f1->ops[3].backward_time == 8);
  fixed.pop_back();
  const auto r = exec::profile_dag(m, make_input(b), b, {.fixed_times = fixed});
  CHECK(r.code() == status::invalid_problem);
  CHECK(r.message().find("profile_dag: fixed_times has 4 entries but the model has 5 ops") !=
        std::string::npos);
}
