// The simulator on programs that manage parameters (sim/parameters.hpp): the text form of the
// new instructions, the memory of weights, gradients and states on the device and the host, the
// four lanes and a step's end, each rule broken once with the message that says so, and a cycle
// that must end where it started.

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>
#include <remat/sim/simulate.hpp>

using namespace remat;
using gi = instruction;
using tp = tensor_part;
using vk = sim::violation_kind;

namespace {

/// Three ops in a chain, each reading one weight (w0 trainable 100 bytes, w1 trainable 200, w2
/// frozen 50); activations of 10 bytes, times of 1 s.
graph three() {
  forward_dag f{"three", 10, {}};
  for (int i = 0; i < 3; ++i) {
    const std::string in = i == 0 ? "input" : "f" + std::to_string(i - 1);
    f.ops.push_back({"f" + std::to_string(i), {in}, 1, 1, 10, 0, {in}});
    f.ops.back().parameters = {"w" + std::to_string(i)};
  }
  f.parameters = {{"w0", 100, true, "fp32"}, {"w1", 200, true, "fp32"}, {"w2", 50, false, "fp32"}};
  return build_graph(f).value();
}

/// Where a backward instruction of the forward node named `name` sits in ops.
std::size_t backward_at(const graph& g, const std::vector<gi>& ops, const std::string& name) {
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].is_compute() && g.compute(ops[i].node).kind == compute_kind::backward &&
        g.compute(g.forward_of(ops[i].node)).name == "fwd " + name)
      return i;
  FAIL("no backward of " << name);
  return 0;
}

schedule managed(std::vector<gi> ops, std::vector<parameter_start> start) {
  schedule s;
  s.ops = std::move(ops);
  s.parameters = parameter_plan{true, std::move(start), 2};
  return s;
}

bool says(const sim::report& r, vk kind, std::initializer_list<std::string_view> parts) {
  if (!r.first_violation) return false;
  if (r.first_violation->kind != kind) {
    MESSAGE("kind " << static_cast<int>(r.first_violation->kind) << ": "
                    << r.first_violation->message);
    return false;
  }
  for (auto p : parts)
    if (r.first_violation->message.find(p) == std::string::npos) {
      MESSAGE("'" << r.first_violation->message << "' lacks '" << p << "'");
      return false;
    }
  return true;
}

}  // namespace

TEST_CASE("parameter instructions: text form round trip") {
  const std::vector<gi> all = {gi::offload(tp::weight, 2),
                               gi::offload(tp::gradient, 0),
                               gi::offload(tp::states, 11),
                               gi::prefetch(tp::weight, 3),
                               gi::prefetch(tp::states, 1),
                               gi::wait(tp::gradient, 4),
                               gi::free(tp::weight, 5),
                               gi::update(6),
                               gi::cpu_update(7),
                               gi::sync(),
                               gi::offload(3),
                               gi::compute(1)};
  schedule s{all, 0, 0};
  CHECK(to_string(s) == "Ow2 Og0 Os11 Pw3 Ps1 Wg4 Dw5 U6 U7_cpu S O3 C1");
  const auto back = parse_program(to_string(s));
  REQUIRE(back);
  CHECK(back->ops == all);
  for (const char* bad : {"Ux3", "Ow", "Oq3", "S1", "U3_gpu", "Cw3"})
    CHECK_FALSE(parse_instruction(bad));
  CHECK(gi::update(1).manages_parameters());
  CHECK(gi::sync().manages_parameters());
  CHECK_FALSE(gi::offload(1).manages_parameters());
  CHECK(gi::offload(1).on_data());
}

TEST_CASE("parameters: store-all with every update on the GPU counts weights, gradients, states") {
  const graph g = three();
  auto ops = store_all_program(g);
  const sim::report plain = sim::simulate(g, schedule{ops, 0, 0});
  REQUIRE(plain.valid);
  for (int p : {0, 1}) ops.push_back(gi::update(p));
  machine hw;
  hw.gpu_optimizer_speed = 100;  // w0: 1 s, w1: 2 s
  const auto r = sim::simulate(g, managed(ops, std::vector<parameter_start>(3)), {.hw = hw});
  INFO((r.first_violation ? r.first_violation->message : std::string()));
  REQUIRE(r.valid);
  // Weights 350 and states 2 x 300 throughout; at the end of the backward both gradients too.
  CHECK(r.peak >= plain.peak + 350 + 600);
  CHECK(r.peak <= plain.peak + 350 + 600 + 300);
  CHECK(r.makespan == doctest::Approx(plain.makespan + 3));
  CHECK(r.host_peak == 0);
  // Without the plan the same instructions are refused.
  schedule bare{ops, 0, 0};
  CHECK(says(sim::simulate(g, bare), vk::invalid_instruction, {"U0", "no parameter plan"}));
}

TEST_CASE("parameters: offloaded after the update, brought back for the next use") {
  const graph g = three();
  auto base = store_all_program(g);
  machine hw = machine::with_bandwidth(100);  // 100 bytes/s
  // w0 leaves after its update (a copy, waited, then freed) and starts the cycle on the host;
  // it comes back before its forward.
  std::vector<gi> ops = {gi::prefetch(tp::weight, 0), gi::wait(tp::weight, 0)};
  ops.insert(ops.end(), base.begin(), base.end());
  ops.insert(ops.end(), {gi::update(0), gi::update(1), gi::offload(tp::weight, 0),
                         gi::wait(tp::weight, 0), gi::free(tp::weight, 0)});
  std::vector<parameter_start> start(3);
  start[0] = {.weight_on_device = false, .weight_on_host = true};
  const auto r = sim::simulate(g, managed(ops, start), {.hw = hw});
  INFO((r.first_violation ? r.first_violation->message : std::string()));
  REQUIRE(r.valid);
  CHECK(r.host_peak == 100);
  // The prefetch takes 1 s before the first forward, the copy out 1 s at the end.
  CHECK(r.timeline[0].lane == sim::lane::host_to_device);
  CHECK(r.timeline[0].end == doctest::Approx(1));
  CHECK(r.timeline[ops.size() - 3].lane == sim::lane::device_to_host);

  SUBCASE("a forward of a weight that is not there") {
    std::vector<gi> bad(ops.begin() + 2, ops.end());
    CHECK(says(sim::simulate(g, managed(bad, start), {.hw = hw}), vk::not_resident,
               {"'fwd f0'", "parameter 'w0'", "not on the device", "Pw0"}));
  }
  SUBCASE("a forward while it is still arriving") {
    std::vector<gi> bad(ops);
    bad.erase(bad.begin() + 1);
    CHECK(says(sim::simulate(g, managed(bad, start), {.hw = hw}), vk::not_resident,
               {"being prefetched", "Ww0"}));
  }
  SUBCASE("a free before the copy is waited for") {
    std::vector<gi> bad(ops);
    bad.erase(bad.end() - 2);
    CHECK(says(sim::simulate(g, managed(bad, start), {.hw = hw}), vk::invalid_transfer,
               {"Dw0", "being offloaded", "Ww0"}));
  }
  SUBCASE("a free with no current host copy loses the weight") {
    std::vector<gi> bad(ops.begin(), ops.end() - 3);
    bad.push_back(gi::free(tp::weight, 0));
    CHECK(says(sim::simulate(g, managed(bad, start), {.hw = hw}), vk::invalid_transfer,
               {"no current host copy"}));
  }
  SUBCASE("ending on the device where it started on the host") {
    std::vector<gi> bad(ops.begin(), ops.end() - 3);
    CHECK(says(sim::simulate(g, managed(bad, start), {.hw = hw}), vk::wrong_final_state,
               {"parameter 'w0'", "ends on the device"}));
  }
  SUBCASE("an update missing, one twice, one of a frozen weight") {
    std::vector<gi> none(ops);
    std::erase(none, gi::update(1));
    CHECK(says(sim::simulate(g, managed(none, start), {.hw = hw}), vk::wrong_final_state,
               {"'w1' is never updated"}));
    std::vector<gi> twice(ops);
    twice.push_back(gi::update(1));
    CHECK(says(sim::simulate(g, managed(twice, start), {.hw = hw}), vk::invalid_instruction,
               {"already updated"}));
    std::vector<gi> frozen(ops);
    frozen.push_back(gi::update(2));
    CHECK(says(sim::simulate(g, managed(frozen, start), {.hw = hw}), vk::invalid_instruction,
               {"'w2' is frozen"}));
  }
  SUBCASE("an update before the gradient is complete, and a backward after it") {
    std::vector<gi> early(base);
    early.insert(early.begin() + static_cast<std::ptrdiff_t>(backward_at(g, early, "f1")),
                 gi::update(1));
    early.push_back(gi::update(0));
    CHECK(says(sim::simulate(g, managed(early, std::vector<parameter_start>(3)), {.hw = hw}),
               vk::incomplete_input, {"U1", "gradient is not complete", "0 of 1"}));
  }
  SUBCASE("states on the host must come back for a GPU update") {
    std::vector<parameter_start> away(3);
    away[1].states_on_device = false;
    std::vector<gi> plain(base);
    plain.insert(plain.end(), {gi::update(0), gi::update(1)});
    CHECK(says(sim::simulate(g, managed(plain, away), {.hw = hw}), vk::not_resident,
               {"'w1'", "optimizer states are not resident", "Ps1"}));
    std::vector<gi> fixed(base);
    fixed.insert(fixed.end(), {gi::prefetch(tp::states, 1), gi::wait(tp::states, 1), gi::update(0),
                               gi::update(1), gi::offload(tp::states, 1), gi::wait(tp::states, 1),
                               gi::free(tp::states, 1)});
    const auto ok = sim::simulate(g, managed(fixed, away), {.hw = hw});
    INFO((ok.first_violation ? ok.first_violation->message : std::string()));
    CHECK(ok.valid);
    CHECK(ok.host_peak == 400);
  }
}

TEST_CASE("parameters: a CPU update waits for its gradient, and the prefetch for it") {
  const graph g = three();
  auto base = store_all_program(g);
  machine hw = machine::with_bandwidth(100);
  hw.cpu_optimizer_speed = 50;  // w1: 4 s
  // w1 on the CPU: its gradient goes down after its backward, its weight is dropped, the CPU
  // updates the host copy, and the weight comes back.
  std::vector<gi> ops(base);
  const auto after = static_cast<std::ptrdiff_t>(backward_at(g, ops, "f1") + 1);
  ops.insert(ops.begin() + after,
             {gi::offload(tp::gradient, 1), gi::free(tp::weight, 1), gi::cpu_update(1),
              gi::prefetch(tp::weight, 1), gi::wait(tp::weight, 1)});
  ops.push_back(gi::update(0));
  std::vector<parameter_start> start(3);
  start[1] = {.weight_on_device = true,
              .weight_on_host = true,
              .states_on_device = false,
              .cpu_updated = true};
  const auto r = sim::simulate(g, managed(ops, start), {.hw = hw});
  INFO((r.first_violation ? r.first_violation->message : std::string()));
  REQUIRE(r.valid);
  const auto at = static_cast<std::size_t>(after);
  const auto& grad = r.timeline[at];
  const auto& cpu = r.timeline[at + 2];
  const auto& back = r.timeline[at + 3];
  CHECK(grad.lane == sim::lane::device_to_host);
  CHECK(cpu.lane == sim::lane::cpu);
  CHECK(cpu.start == doctest::Approx(grad.end));
  CHECK(cpu.end == doctest::Approx(cpu.start + 4));
  CHECK(back.start == doctest::Approx(cpu.end));
  // Host: the weight's copy, its states (400) and its gradient buffer.
  CHECK(r.host_peak == 200 + 400 + 200);

  SUBCASE("a CPU update with the weight still on the device") {
    std::vector<gi> bad(ops);
    std::erase(bad, gi::free(tp::weight, 1));
    CHECK(says(sim::simulate(g, managed(bad, start), {.hw = hw}), vk::invalid_transfer,
               {"U1_cpu", "weight is on the device"}));
  }
  SUBCASE("its states never go to the device") {
    std::vector<gi> bad(ops);
    bad.insert(bad.begin(), gi::prefetch(tp::states, 1));
    CHECK(says(sim::simulate(g, managed(bad, start), {.hw = hw}), vk::invalid_transfer,
               {"updated on the CPU", "states stay on the host"}));
  }
  SUBCASE("a GPU update of a parameter the CPU updates") {
    std::vector<gi> bad(ops);
    std::replace(bad.begin(), bad.end(), gi::cpu_update(1), gi::update(1));
    CHECK(says(sim::simulate(g, managed(bad, start), {.hw = hw}), vk::invalid_instruction,
               {"updated on the CPU", "U1_cpu"}));
  }
  SUBCASE("a gradient left from the previous iteration is updated first") {
    // The cycle's CPU update comes before this iteration's backward: it takes the previous
    // gradient, and this one waits on the host for the next iteration.
    std::vector<gi> cyc = {gi::cpu_update(1), gi::prefetch(tp::weight, 1), gi::wait(tp::weight, 1)};
    cyc.insert(cyc.end(), base.begin(), base.end());
    const auto b1 = static_cast<std::ptrdiff_t>(backward_at(g, cyc, "f1") + 1);
    cyc.insert(cyc.begin() + b1,
               {gi::offload(tp::gradient, 1), gi::wait(tp::gradient, 1), gi::free(tp::weight, 1)});
    cyc.push_back(gi::update(0));
    std::vector<parameter_start> st(3);
    st[1] = {.weight_on_device = false,
             .weight_on_host = true,
             .states_on_device = false,
             .cpu_updated = true,
             .gradient_on_host = true};
    const auto c = sim::simulate(g, managed(cyc, st), {.hw = hw});
    INFO((c.first_violation ? c.first_violation->message : std::string()));
    CHECK(c.valid);
    // The new gradient may not start while the old one waits.
    std::vector<gi> late(base);
    late.push_back(gi::update(0));
    st[1].weight_on_device = true;
    CHECK(says(sim::simulate(g, managed(late, st), {.hw = hw}), vk::not_resident,
               {"'w1'", "previous iteration's still waits", "U1_cpu"}));
    st[1].weight_on_device = false;
    st[1].gradient_on_host = false;
    CHECK(says(sim::simulate(g, managed(cyc, st), {.hw = hw}), vk::invalid_transfer,
               {"U1_cpu", "not on its way to the host"}));
  }
}

TEST_CASE("parameters: a step ends when the GPU and both copy engines are idle") {
  const graph g = three();
  auto base = store_all_program(g);
  machine hw = machine::with_bandwidth(10);
  hw.step_overhead = 0.5;
  // A copy of 10 s started before the first op: the sync after the first op waits for it; the
  // second step lasts at least the management time.
  std::vector<parameter_start> start(3);
  start[0] = {.weight_on_device = true, .weight_on_host = false};
  std::vector<gi> ops = {gi::offload(tp::weight, 0), base[0], gi::sync(), gi::sync()};
  ops.insert(ops.end(), base.begin() + 1, base.end());
  ops.insert(ops.end(), {gi::update(0), gi::update(1), gi::wait(tp::weight, 0)});
  const auto r = sim::simulate(g, managed(ops, start), {.hw = hw});
  // w0 was updated after its copy: the host copy is stale, not where it started (none).
  INFO((r.first_violation ? r.first_violation->message : std::string()));
  CHECK(r.timeline[2].end == doctest::Approx(10));
  CHECK(r.timeline[3].end == doctest::Approx(10.5));
  CHECK(says(r, vk::invalid_transfer, {"U0", "being offloaded", "wait for it before updating"}));
}
