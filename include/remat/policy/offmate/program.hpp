#pragma once
// An OFFMATE plan as the one program [Offmate24, §4, Fig. 1]: the blocks' activation programs
// (rockmate's assembly of each block's option: store-all, or recompute as F^ck then F^all before
// the backward, or store-all with the kept activations offloaded after the forward and prefetched
// before the backward, the cheap operations' outputs freed and made again instead), and around each
// step the whole-tensor moves of offmate_tensor_plan:
//
//   step t:  the block's activations back (P; an offloading block's backward), prefetches for
//            t+1 (Pw, Ps), offloads of other groups' tensors (Ow, Os), CPU updates (U_cpu), the
//            block's instructions (after its activations' waits; before their offloads, O, in
//            an offloading block's forward),
//            in a backward step the GPU updates of the groups whose last gradient it makes (U)
//            and their own offloads (Ow, Os, and Og for the CPU's gradients), then a wait for
//            every transfer of the step, the frees of the step's end (Dw, Ds), and S.
//
// The program is one iteration of the cycle: `schedule::parameters` says where each parameter
// is at the start of step 0, which is where the program leaves it. docs/offmate.md, "The program".

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/policy/offmate/from_graph.hpp>
#include <remat/policy/offmate/tensors.hpp>
#include <remat/policy/rockmate/assembly.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat {

/// The program of whole-tensor plan `tp` of gp (made from g by offmate_problem_of). Errors
/// (status::invalid_problem): a plan of another problem (sizes), a group tensor that is not a
/// parameter of g.
inline result<schedule> offmate_program(const graph& g, const offmate_graph_problem& gp,
                                        const offmate_tensor_plan& tp) {
  const offmate_problem& p = gp.problem;
  const int L = p.length(), steps = p.steps();
  auto bad = [](std::string m) { return error{status::invalid_problem, std::move(m), {}}; };
  if (tp.option.size() != p.blocks.size() || tp.groups.size() != p.groups.size() ||
      gp.kinds.count() != L)
    return bad("offmate_program: the plan is not one of this problem (blocks or groups differ)");
  auto is = [&](int k, const char* name) {
    return p.option(k, tp.option[static_cast<std::size_t>(k)]).name == name;
  };

  // The activations: rockmate's assembly of the blocks' options, and where each step begins.
  detail::decisions d;
  // Block programs: options[0] store-all's, options[1] the offload option's.
  auto program = [&](int k) { return is(k, "offload") ? 1 : 0; };
  for (int k = 0; k < L; ++k) {
    d.ops.push_back(chain_op::forward(
        k + 1, is(k, "recompute") ? forward_mode::save_input : forward_mode::save_all));
    d.options.push_back(program(k));
  }
  std::vector<std::size_t> step_of_op;  // per decision
  for (int k = 0; k < L; ++k) step_of_op.push_back(static_cast<std::size_t>(k));
  for (int k = L - 1; k >= 0; --k) {
    if (is(k, "recompute")) {
      d.ops.push_back(chain_op::forward(k + 1, forward_mode::save_all));
      d.options.push_back(0);
      step_of_op.push_back(static_cast<std::size_t>(p.backward_step(k)));
    }
    d.ops.push_back(chain_op::backward(k + 1));
    d.options.push_back(program(k));
    step_of_op.push_back(static_cast<std::size_t>(p.backward_step(k)));
  }
  const detail::block_assembly assembly(g, gp.kinds, gp.programs);
  const schedule acts = assembly.program_of(d);
  std::vector<std::vector<instruction>> body(static_cast<std::size_t>(steps));
  const auto& starts = assembly.op_starts();
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t end = i + 1 < starts.size() ? starts[i + 1] : acts.ops.size();
    auto& into = body[step_of_op[i]];
    into.insert(into.end(), acts.ops.begin() + static_cast<std::ptrdiff_t>(starts[i]),
                acts.ops.begin() + static_cast<std::ptrdiff_t>(end));
  }
  // The activations block k's offload option moves, on block k's nodes.
  auto offloaded = [&](int k) {
    const int r = gp.kinds.kind_of[static_cast<std::size_t>(k)];
    const block_graph& rep = gp.kinds.of_kind(r);
    const block_graph& b = gp.kinds.blocks[static_cast<std::size_t>(k)];
    std::map<int, std::size_t> local;
    for (std::size_t i = 0; i < rep.data_in_parent.size(); ++i) local[rep.data_in_parent[i]] = i;
    std::vector<int> out;
    for (int dn : gp.offloaded[static_cast<std::size_t>(r)])
      out.push_back(b.data_in_parent[local.at(dn)]);
    return out;
  };

  // Group tensors as graph parameters.
  std::map<std::string, int> param;
  for (std::size_t i = 0; i < g.parameters().size(); ++i)
    param[g.parameters()[i].name] = static_cast<int>(i);
  std::vector<std::vector<int>> pid(p.groups.size());
  for (std::size_t w = 0; w < p.groups.size(); ++w)
    for (const parameter_tensor& t : p.groups[w].tensors) {
      const auto it = param.find(t.name);
      if (it == param.end())
        return bad("offmate_program: tensor '" + t.name + "' of " +
                   detail::group_label(p.groups[w], w) + " is not a parameter of graph '" + g.name +
                   "'");
      pid[w].push_back(it->second);
    }

  // Where each parameter starts (step 0 of the cycle).
  parameter_plan plan;
  plan.managed = true;
  plan.optimizer_states = p.optimizer_states;
  plan.start.assign(g.parameters().size(), parameter_start{});
  for (std::size_t w = 0; w < p.groups.size(); ++w) {
    const parameter_group& grp = p.groups[w];
    const offmate_group_tensors& gt = tp.groups[w];
    const int zero = p.position(grp, 0);
    for (std::size_t j = 0; j < grp.tensors.size(); ++j) {
      parameter_start& s = plan.start[static_cast<std::size_t>(pid[w][j])];
      const bool trained = grp.tensors[j].trainable > 0;
      const bool cpu = gt.cpu_updated[j] != 0;
      s.weight_on_device = gt.resident[j] != 0;
      s.cpu_updated = cpu;
      s.states_on_device = trained && !cpu && gt.states_resident[j] != 0;
      // A current host copy: the CPU's master copy; a frozen tensor offloaded at all; a GPU
      // tensor offloaded between its update and step 0.
      bool copied = false, copied_since = false, states_since = false, update_after = false;
      for (int q = 0; q < steps; ++q) {
        const auto& st = gt.steps[static_cast<std::size_t>(p.step_at(grp, q))];
        const bool here = std::ranges::find(st.offload, static_cast<int>(j)) != st.offload.end();
        copied = copied || here;
        if (q < zero) copied_since = copied_since || here;
        if (q < zero &&
            std::ranges::find(st.states_offload, static_cast<int>(j)) != st.states_offload.end())
          states_since = true;
        if (q >= zero &&
            std::ranges::find(st.cpu_update, static_cast<int>(j)) != st.cpu_update.end())
          update_after = true;
      }
      s.weight_on_host = cpu || (trained ? copied_since : copied);
      s.gradient_on_host = cpu && update_after;
      s.states_on_host = s.states_on_device && states_since;
    }
  }

  // The steps.
  schedule s;
  for (int t = 0; t < steps; ++t) {
    const auto u = static_cast<std::size_t>(t);
    const int k = p.block_of(t);
    const bool fwd = p.is_forward(t);
    std::vector<instruction> waits;
    auto issue = [&](instruction i) {
      s.ops.push_back(i);
      if (i.is_transfer()) waits.push_back(instruction{op_kind::wait, i.node, i.part});
    };
    auto own = [&](std::size_t w) { return !fwd && p.last_gradient(p.groups[w]) == t; };
    // The block's activations first on the prefetch lane: its compute waits for them.
    const std::vector<int> moved = is(k, "offload") ? offloaded(k) : std::vector<int>{};
    if (!fwd)
      for (int dn : moved) s.ops.push_back(instruction::prefetch(dn));
    for (std::size_t w = 0; w < p.groups.size(); ++w) {
      const offmate_tensor_step& st = tp.groups[w].steps[u];
      for (int j : st.prefetch)
        issue(instruction::prefetch(tensor_part::weight, pid[w][detail::ix(j)]));
      for (int j : st.states_prefetch)
        issue(instruction::prefetch(tensor_part::states, pid[w][detail::ix(j)]));
      if (!own(w)) {
        for (int j : st.offload)
          issue(instruction::offload(tensor_part::weight, pid[w][detail::ix(j)]));
        for (int j : st.states_offload)
          issue(instruction::offload(tensor_part::states, pid[w][detail::ix(j)]));
      }
      for (int j : st.cpu_update) s.ops.push_back(instruction::cpu_update(pid[w][detail::ix(j)]));
    }
    // The block between its activations: waited for before it runs (backward), sent out after
    // it (forward), as the model times them.
    for (int dn : fwd ? std::vector<int>{} : moved) s.ops.push_back(instruction::wait(dn));
    s.ops.insert(s.ops.end(), body[u].begin(), body[u].end());
    for (int dn : fwd ? moved : std::vector<int>{}) issue(instruction::offload(dn));
    for (std::size_t w = 0; w < p.groups.size(); ++w) {
      if (!own(w)) continue;
      const parameter_group& grp = p.groups[w];
      const offmate_group_tensors& gt = tp.groups[w];
      for (std::size_t j = 0; j < grp.tensors.size(); ++j)
        if (grp.tensors[j].trainable > 0 && !gt.cpu_updated[j])
          s.ops.push_back(instruction::update(pid[w][j]));
      for (int j : gt.steps[u].offload)
        issue(instruction::offload(
            gt.cpu_updated[detail::ix(j)] ? tensor_part::gradient : tensor_part::weight,
            pid[w][detail::ix(j)]));
      for (int j : gt.steps[u].states_offload)
        issue(instruction::offload(tensor_part::states, pid[w][detail::ix(j)]));
    }
    s.ops.insert(s.ops.end(), waits.begin(), waits.end());
    for (std::size_t w = 0; w < p.groups.size(); ++w) {
      const offmate_tensor_step& st = tp.groups[w].steps[u];
      for (int j : st.free)
        s.ops.push_back(instruction::free(tensor_part::weight, pid[w][detail::ix(j)]));
      for (int j : st.states_free)
        s.ops.push_back(instruction::free(tensor_part::states, pid[w][detail::ix(j)]));
    }
    s.ops.push_back(instruction::sync());
  }
  s.parameters = std::move(plan);
  return s;
}

}  // namespace remat
