// Chains joined at a loss under the executor: two and three towers of the example Eigen layers
// (linear and gelu: no context, their backward reads their input, as the unit-slot model's B
// does) over one input, joined by a loss over every tower's output. The multi-chain DP plans
// them at a budget that forces recomputation; the program runs over the layers, bit for bit the
// gradients of plain training (eg::backprop), within the budget.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <eigen/models.hpp>

#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/multi_chain.hpp>
#include <remat/sim/simulate.hpp>

using namespace remat;
using remat::exec::host_backend;

namespace {

/// The towers' loss: sum over towers j of mean((x_j - t_j)^2), t_j fixed; its backward reads
/// the towers' outputs and gives each its gradient 2 (x_j - t_j) / n.
class towers_loss final : public eg::multi_input_layer {
 public:
  towers_loss(std::size_t towers, eg::index batch, eg::index width, std::uint64_t seed)
      : multi_input_layer("loss") {
    for (std::size_t j = 0; j < towers; ++j) {
      targets_.emplace_back(batch, width);
      eg::fill_synthetic(targets_.back(), eg::derive_seed(seed, j));
    }
  }
  [[nodiscard]] bool is_loss() const noexcept override { return true; }
  [[nodiscard]] remat::exec::backward_needs backward_reads() const override {
    return {true, false};
  }

 protected:
  eg::tensor do_forward_n(inputs x, eg::backend& b) override {
    expect_inputs(x, {}, targets_.size(), true);
    float sum = 0;
    for (std::size_t j = 0; j < x.size(); ++j)
      sum += (x[j]->mat() - targets_[j]).squaredNorm() / static_cast<float>(targets_[j].size());
    eg::tensor y = eg::tensor::uninitialized(b, 1, 1);
    y.mat()(0, 0) = sum;
    return y;
  }
  eg::tensor do_forward_save_n(inputs x, eg::context&, eg::backend& b) override {
    return do_forward_n(x, b);
  }
  void do_backward_n(inputs x, const eg::tensor*, const eg::context&, const eg::tensor* dy,
                     input_gradients dx, eg::backend& b) override {
    expect_inputs(x, dx, targets_.size(), true);
    if (dy != nullptr) throw std::logic_error(where() + "is the loss: its backward takes no dy");
    for (std::size_t j = 0; j < x.size(); ++j) {
      const float s = 2.0f / static_cast<float>(targets_[j].size());
      accumulate(dx[j], eg::tensor::from(b, s * (x[j]->mat() - targets_[j])));
    }
  }

 private:
  std::vector<eg::matrix> targets_;
};

/// Towers of linear and gelu layers named as build_graph(multi_chain) names its ops.
eg::dag make_towers(const std::vector<int>& lengths, eg::index batch, eg::index width) {
  eg::dag d;
  std::uint64_t part = 0;
  for (std::size_t j = 0; j < lengths.size(); ++j) {
    std::string prev = "input";
    for (int i = 1; i <= lengths[j]; ++i) {
      const std::string name = "c" + std::to_string(j + 1) + "." + std::to_string(i);
      if (i % 2 == 1)
        prev = eg::add_op(
            d, std::make_unique<eg::linear>(width, width, eg::derive_seed(7, part++), name),
            {prev});
      else
        prev = eg::add_op(d, std::make_unique<eg::gelu>(name), {prev});
    }
  }
  std::vector<std::string> outs;
  for (const auto& op : d.ops)
    if (op.name.find('.') != std::string::npos) {
      const auto dot = op.name.find('.');
      const int j = std::stoi(op.name.substr(1, dot - 1));
      if (std::stoi(op.name.substr(dot + 1)) == lengths[static_cast<std::size_t>(j - 1)])
        outs.push_back(op.name);
    }
  eg::add_op(d, std::make_unique<towers_loss>(lengths.size(), batch, width, 11), outs);
  return d;
}

void check_towers(const std::vector<int>& lengths, int extra_slots) {
  constexpr eg::index batch = 4, width = 6;
  host_backend pb;
  eg::dag pm = make_towers(lengths, batch, width);
  auto f = exec::profile_dag(pm, eg::make_input(pb, batch, width, 5), pb,
                             {.repetitions = 1, .warmup = 0, .name = "towers"});
  REQUIRE_MESSAGE(f.ok(), f.message());
  auto built = build_graph(*f);
  REQUIRE_MESSAGE(built.ok(), built.message());
  const graph& g = *built;

  // The problem: one slot per activation, as measured.
  const bytes slot = f->ops.front().output_bytes;
  const multi_chain p{"towers", lengths, 1, 2, 1, slot};
  const multi_chain_dp dp;
  const int m = multi_chain_dp::minimum_slots(p) + extra_slots;
  const bytes budget = (m + multi_chain_dp::reserved_slots) * slot + slot / 2;
  const auto s = dp.solve_detailed(p, budget);
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(s->details.forwards > p.total_length());  // it recomputes
  INFO(to_string(s->details.ops));
  // The program is over the same layout: the profiled graph (the loss value's 4 bytes, the
  // measured overheads) replays it too.
  const auto sim = sim::simulate(g, s->program, {.budget = budget});
  REQUIRE_MESSAGE(sim.valid, (sim.first_violation ? sim.first_violation->message : ""));

  eg::dag ref = make_towers(lengths, batch, width);
  host_backend rb;
  std::optional<eg::tensor> ref_dx;
  eg::zero_grad(ref.layers);
  (void)eg::backprop(ref, eg::make_input(rb, batch, width, 5), rb, &ref_dx);
  REQUIRE(ref_dx.has_value());

  eg::dag model = make_towers(lengths, batch, width);
  eg::zero_grad(model.layers);
  host_backend b(budget);
  exec::executor ex(model, g, b);
  auto r = ex.run(s->program, eg::make_input(b, batch, width, 5));
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(eg::flat_gradients(model.layers) == eg::flat_gradients(ref.layers));
  CHECK(eg::bitwise_equal(r->input_gradient, *ref_dx));
  CHECK(r->measured_peak <= sim.peak);
  CHECK(r->measured_peak <= budget);
  MESSAGE("towers ", lengths.size(), ": budget ", budget, ", simulated ", sim.peak, ", measured ",
          r->measured_peak, ", forwards ", s->details.forwards);
}

}  // namespace

TEST_CASE("multi_chain: two Eigen towers joined at a loss, bitwise plain training") {
  check_towers({4, 6}, 1);
}

TEST_CASE("multi_chain: three Eigen towers joined at a loss, bitwise plain training") {
  check_towers({3, 3, 3}, 1);
}

TEST_CASE("multi_chain: a plan for towers of other lengths than the model's is refused") {
  // The model has towers of 4 and 6 layers; the plan is for 4 and 5. The executor checks the
  // program against the model's graph before it runs a layer.
  constexpr eg::index batch = 4, width = 6;
  host_backend pb;
  eg::dag pm = make_towers({4, 6}, batch, width);
  auto f = exec::profile_dag(pm, eg::make_input(pb, batch, width, 5), pb,
                             {.repetitions = 1, .warmup = 0, .name = "towers"});
  REQUIRE_MESSAGE(f.ok(), f.message());
  auto built = build_graph(*f);
  REQUIRE_MESSAGE(built.ok(), built.message());
  const bytes slot = f->ops.front().output_bytes;
  const multi_chain other{"towers", {4, 5}, 1, 2, 1, slot};
  const auto s = multi_chain_dp{}.solve(other, 64 * slot);
  REQUIRE_MESSAGE(s.ok(), s.message());
  eg::dag model = make_towers({4, 6}, batch, width);
  host_backend b;
  exec::executor ex(model, *built, b);
  auto r = ex.run(*s, eg::make_input(b, batch, width, 5));
  REQUIRE_FALSE(r.ok());
  MESSAGE(r.message());
  CHECK_FALSE(r.message().empty());
}
