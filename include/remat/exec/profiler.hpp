#pragma once
// The profiler: one measurement loop for every model, so a user goes from layers to a plan
// without writing a cost by hand:
//   profile_chain(chain_model, sample, backend)  -> chain        (the chain planners; build_graph
//                                                                 for the graph planners)
//   profile_dag(dag_model, sample, backend)      -> forward_dag  (build_graph for the graph
//                                                                 planners)
// A chain model is measured through the adapter the executor runs it with (detail::chain_stage):
// the same loop, the same numbers. Each op runs on the outputs of the ops it reads, `warmup +
// repetitions` times, and its times, output, context and overheads are recorded; a loss gets the
// sample targets when given. profile_options makes profiles reproducible. docs/executor.md, "The
// profiler".

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/core/units.hpp>
#include <remat/exec/as_graph_layer.hpp>
#include <remat/exec/concepts/backend.hpp>
#include <remat/exec/concepts/dag_layer.hpp>
#include <remat/exec/concepts/layer.hpp>
#include <remat/exec/concepts/model.hpp>
#include <remat/exec/concepts/parameters.hpp>
#include <remat/exec/concepts/tensor.hpp>
#include <remat/exec/detail/allocation_check.hpp>
#include <remat/exec/detail/check_model.hpp>
#include <remat/exec/detail/layer_calls.hpp>
#include <remat/exec/detail/model_graph.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>

namespace remat::exec {

/// How a profile summarises an op's timed runs.
enum class time_statistic { median, min, mean };

/// An op's times given by the user instead of measured (profile_options::fixed_times).
struct op_costs {
  seconds forward = 0;   ///< its forward (F^all; the fast-forward takes the same)
  seconds backward = 0;  ///< its backward
};

struct profile_options {
  int repetitions = 5;  ///< timed runs per op
  int warmup = 1;       ///< untimed runs first
  std::string name = "profiled model";
  time_statistic statistic = time_statistic::median;  ///< the time kept from the timed runs
  seconds resolution =
      0;  ///< > 0: each time rounded to the nearest multiple of it (0: as measured)
  std::vector<op_costs>
      fixed_times{};  ///< empty: measured; else every op's times, in the model's order
};

namespace detail {
/// The time a profile keeps from the timed runs v: their statistic, rounded to the nearest
/// multiple of `resolution` when it is > 0.
inline seconds summarize_times(std::vector<seconds> v, time_statistic stat, seconds resolution) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  seconds t = 0;
  switch (stat) {
    case time_statistic::min:
      t = v.front();
      break;
    case time_statistic::mean: {
      for (seconds x : v) t += x;
      t /= static_cast<double>(v.size());
      break;
    }
    case time_statistic::median: {
      const std::size_t m = v.size() / 2;
      t = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
      break;
    }
  }
  return resolution > 0 ? std::round(t / resolution) * resolution : t;
}

/// Why `opt` cannot profile a model of `ops` ops (empty if it can); `who` starts the message.
inline std::string profile_options_problem(const profile_options& opt, std::size_t ops,
                                           const std::string& who) {
  auto finite = [](seconds t) { return std::isfinite(t) && t >= 0; };
  if (opt.repetitions < 1 || opt.warmup < 0)
    return who + ": repetitions must be >= 1 and warmup >= 0";
  if (opt.statistic != time_statistic::median && opt.statistic != time_statistic::min &&
      opt.statistic != time_statistic::mean)
    return who + ": statistic must be time_statistic::median, min or mean";
  if (!finite(opt.resolution))
    return who + ": resolution must be a finite time >= 0 (0: times as measured), not " +
           std::to_string(opt.resolution);
  if (!opt.fixed_times.empty() && opt.fixed_times.size() != ops)
    return who + ": fixed_times has " + std::to_string(opt.fixed_times.size()) +
           " entries but the model has " + std::to_string(ops) +
           " ops; give one per op, in the model's order, or none to measure the times";
  for (std::size_t i = 0; i < opt.fixed_times.size(); ++i)
    if (!finite(opt.fixed_times[i].forward) || !finite(opt.fixed_times[i].backward))
      return who + ": fixed_times[" + std::to_string(i) +
             "] has a negative or non-finite time; times are finite and >= 0";
  return {};
}

/// The measurement loop over the ops of `layers` whose nodes in g are `nodes`. f holds the ops'
/// names and inputs; their costs are filled in. `names[i]` receives the layer's own name() when
/// it has one. `label(i)` names op i in errors. The ops run in the graph's topological order, each
/// on the outputs of the ops it reads (the sample for the graph input), `warmup + repetitions`
/// times: forward, forward_save and the backward, whose output gradient is the op's output itself
/// (only its shape matters). Each op's random state is put back before every call, and its
/// parameter gradients cleared afterwards when it offers zero_grad(). A profile whose tensors are
/// not the backend's memory is refused (allocation_check).
template <class Layers, class T, class Tg, class B>
result<void> measure(Layers& layers, const graph& g, const std::vector<op_nodes>& nodes,
                     const std::vector<backward_needs>& reads, const T& sample_input,
                     const Tg& sample_targets, B& backend, const profile_options& opt,
                     forward_dag& f, std::vector<std::string>& names,
                     const std::function<std::string(std::size_t)>& label) {
  using mt = model_traits<Layers>;
  auto k = [](int i) { return static_cast<std::size_t>(i); };
  std::vector<std::size_t> order(nodes.size());  // the ops by their forward's index
  for (std::size_t i = 0; i < nodes.size(); ++i) order[k(nodes[i].fwd)] = i;
  std::vector<std::optional<T>> outputs(static_cast<std::size_t>(g.data_count()));
  names.assign(nodes.size(), std::string());
  std::size_t i = 0;
  allocation_check allocated;  // the tensors are the backend's memory
  try {
    for (std::size_t pos = 0; pos < order.size(); ++pos) {
      i = order[pos];
      const op_nodes& on = nodes[i];
      forward_op& fo = f.ops[i];
      std::vector<const T*> x;
      for (int d : on.in)
        x.push_back(d == training_layout::input ? &sample_input : &*outputs[k(d)]);
      mt::visit(layers, i, [&](auto& layer) {
        using layer_t = std::remove_reference_t<decltype(layer)>;
        using traits = dag_layer_traits<layer_t>;
        using C = typename traits::context;
        const bool loss = i + 1 == nodes.size();
        if constexpr (requires { deref(layer).name(); })
          names[i] = std::string(deref(layer).name());
        backend.set_activity("profiling " + label(i));
        // Replays draw the same random numbers, and the layer ends as it began.
        const saved_random_state<layer_t> rng(layer);
        const std::span<const T* const> xs(x);
        std::vector<const T*> x_read(x.size(), nullptr);
        if (reads[i].inputs) x_read = x;
        // Runs the backward on the given gradient slots; returns the bytes of the gradients it
        // created (the slots that were empty).
        auto backward = [&](const T& y, const C& ctx, std::vector<std::optional<T>>& dx) {
          std::vector<char> fresh;
          for (const auto& s : dx) fresh.push_back(!s);
          const T* yr = reads[i].output ? &y : nullptr;
          call_backward(layer, std::span<const T* const>(x_read), yr, ctx, loss ? nullptr : &y,
                        sample_targets, std::span<std::optional<T>>(dx), backend, "it");
          bytes made = 0;
          for (std::size_t j = 0; j < dx.size(); ++j) {
            if (!dx[j])
              throw execution_failure("its backward left the gradient of input " +
                                      std::to_string(j) + " empty");
            if (fresh[j]) made += tensor_traits<T>::size(*dx[j]);
          }
          return made;
        };
        bool shared = false;  // an input gradient other ops contribute to: measure accumulation
        for (int d : on.in_grad) shared = shared || g.producers(d).size() > 1;
        std::vector<seconds> tf, tb;
        bytes fwd_overhead = 0, save_overhead = 0, bwd_overhead = 0;
        for (int rep = 0; rep < opt.warmup + opt.repetitions; ++rep) {
          const bool timed = rep >= opt.warmup;
          rng.restore();
          {  // forward: its overhead is the high water above what was in use plus its output
            const bytes before = backend.in_use();
            backend.reset_high_water();
            T y = call_forward(layer, xs, loss, sample_targets, backend, "it");
            fo.output_bytes = tensor_traits<T>::size(y);
            if (rep == 0)
              allocated.add("profiling " + label(i), before, backend.in_use(), fo.output_bytes,
                            may_be_view(y, xs) ? fo.output_bytes : 0);
            fwd_overhead = std::max(fwd_overhead, backend.high_water() - before - fo.output_bytes);
          }
          // forward_save: its time is the op's forward time (the fast-forward takes the same)
          rng.restore();
          const bytes before = backend.in_use();
          backend.reset_high_water();
          C ctx{};
          const auto t_fwd = start_timer(backend);
          T y = call_forward_save(layer, xs, loss, sample_targets, ctx, backend, "it");
          if (timed) tf.push_back(stop_timer(backend, t_fwd));
          fo.phantom_bytes = std::max(fo.phantom_bytes, traits::context_bytes(ctx));
          save_overhead =
              std::max(save_overhead, backend.high_water() - before - tensor_traits<T>::size(y) -
                                          traits::context_bytes(ctx));
          // The backward overhead is the larger of two cases: every input gradient created by this
          // backward, and every one other ops also contribute to already there (it adds into it).
          std::vector<std::optional<T>> dx(x.size());
          bytes held = backend.in_use();
          backend.reset_high_water();
          const auto t_bwd = start_timer(backend);
          bytes made = backward(y, ctx, dx);
          if (timed) tb.push_back(stop_timer(backend, t_bwd));
          bwd_overhead = std::max(bwd_overhead, backend.high_water() - held - made);
          if (!shared) continue;
          for (std::size_t j = 0; j < dx.size(); ++j)
            if (g.producers(on.in_grad[j]).size() == 1) dx[j].reset();
          held = backend.in_use();
          backend.reset_high_water();
          made = backward(y, ctx, dx);
          bwd_overhead = std::max(bwd_overhead, backend.high_water() - held - made);
        }
        if (opt.fixed_times.empty()) {
          fo.forward_time = summarize_times(std::move(tf), opt.statistic, opt.resolution);
          fo.backward_time = summarize_times(std::move(tb), opt.statistic, opt.resolution);
        } else {
          fo.forward_time = opt.fixed_times[i].forward;
          fo.backward_time = opt.fixed_times[i].backward;
        }
        fo.forward_overhead_bytes = fwd_overhead;
        fo.forward_save_overhead_bytes = save_overhead;
        fo.backward_overhead_bytes = bwd_overhead;
        if (reads[i].inputs) fo.backward_reads = fo.inputs;
        if (reads[i].output) fo.backward_reads.emplace_back(::remat::detail::own_output_name);
        rng.restore();
        if (!loss)
          outputs[k(on.act)].emplace(call_forward(layer, xs, false, sample_targets, backend, "it"));
        rng.restore();
        if constexpr (requires { deref(layer).zero_grad(); }) {
          wait_idle(backend);  // the profiling backwards may still be adding to the gradients
          deref(layer).zero_grad();
        }
      });
    }
  } catch (const std::exception& e) {
    backend.set_activity("an allocation");
    return error{status::execution_error, label(i) + " failed: " + e.what(), {}};
  }
  backend.set_activity("an allocation");
  if (auto why = allocated.problem(); !why.empty()) return error{status::execution_error, why, {}};
  return {};
}
}  // namespace detail

/// The chain of a chain model (a range or tuple of chain layers), measured; the loss gets
/// `sample_targets` (exec/concepts.hpp: a loss that takes the batch's targets).
template <class Model, class T, class Tg, class B>
requires Backend<B> result<chain> profile_chain(Model& model, const T& sample_input,
                                                const Tg& sample_targets, B& backend,
                                                profile_options opt = {}) {
  static_assert(
      Tensor<T>,
      "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` member "
      "returning its size in bytes) and must be movable");
  static_assert(detail::check_model<Model, T, Tg, B>());
  const int n = static_cast<int>(model_traits<Model>::size(model));
  if (n == 0) return error{status::invalid_problem, "profile_chain: the model has no layer", {}};
  if (auto why = detail::profile_options_problem(opt, static_cast<std::size_t>(n), "profile_chain");
      !why.empty())
    return error{status::invalid_problem, std::move(why), {}};
  // The chain's structure, costs to come: its graph and a forward DAG to fill.
  const chain shape{opt.name, tensor_traits<T>::size(sample_input),
                    std::vector<stage>(static_cast<std::size_t>(n))};
  forward_dag f = to_forward_dag(shape);
  const graph g = *build_graph(shape);
  detail::chain_layers<Model> layers{&model};
  std::vector<std::string> names;
  if (auto r = detail::measure(layers, g, detail::chain_op_nodes(n),
                               std::vector<backward_needs>(static_cast<std::size_t>(n)),
                               sample_input, sample_targets, backend, opt, f, names,
                               [&](std::size_t i) {
                                 std::string s = "stage " + std::to_string(i + 1);
                                 return names[i].empty() ? s : s + " ('" + names[i] + "')";
                               });
      !r)
    return error{status::execution_error, "profile_chain: " + r.err().message, {}};
  chain c{opt.name, f.input_bytes, {}};
  for (std::size_t i = 0; i < f.ops.size(); ++i) {
    const forward_op& op = f.ops[i];
    c.stages.push_back({names[i], op.forward_time, op.backward_time, op.output_bytes,
                        op.output_bytes + op.phantom_bytes, op.forward_overhead_bytes,
                        op.backward_overhead_bytes, op.forward_save_overhead_bytes});
  }
  if (auto v = validate(c); !v) return v.err();
  return c;
}

/// The chain of a chain model whose loss takes no targets, measured.
template <class Model, class T, class B>
result<chain> profile_chain(Model& model, const T& sample_input, B& backend,
                            profile_options opt = {}) {
  static_assert(Backend<B>,
                "remat: profile_chain(): the backend must satisfy remat::exec::Backend");
  return profile_chain(model, sample_input, no_targets{}, backend, std::move(opt));
}

/// The forward DAG of a DAG model (dag_model), measured; build_graph makes its training graph.
/// The loss gets `sample_targets` (exec/concepts.hpp: a loss that takes the batch's targets).
template <class Model, class T, class Tg, class B>
requires Backend<B> result<forward_dag> profile_dag(Model& model, const T& sample_input,
                                                    const Tg& sample_targets, B& backend,
                                                    profile_options opt = {}) {
  static_assert(
      Tensor<T>,
      "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` member "
      "returning its size in bytes) and must be movable");
  static_assert(detail::is_dag_model<Model>,
                "remat: profile_dag() measures a dag_model; profile_chain() a chain model");
  static_assert(detail::check_model<Model, T, Tg, B>());
  if (model.ops.empty())
    return error{status::invalid_problem, "profile_dag: the model has no op", {}};
  if (auto why = detail::profile_options_problem(opt, model.ops.size(), "profile_dag");
      !why.empty())
    return error{status::invalid_problem, std::move(why), {}};
  auto structure = detail::model_graph(model, opt.name);
  if (!structure) return structure.err();
  forward_dag f{opt.name, tensor_traits<T>::size(sample_input), {}};
  for (const auto& op : model.ops) {
    f.ops.emplace_back();
    f.ops.back().name = op.name;
    f.ops.back().inputs = op.inputs;
  }
  std::vector<std::string> names;
  if (auto r = detail::measure(model.layers, structure->g, structure->ops, detail::reads_of(model),
                               sample_input, sample_targets, backend, opt, f, names,
                               [&](std::size_t i) { return "op '" + f.ops[i].name + "'"; });
      !r)
    return error{status::execution_error, "profile_dag: " + r.err().message, {}};
  // The layers' parameters (HasParameters), named "<op>.<parameter>", read by their op: the
  // planners of parameters see them, and a program that manages them finds each by its op.
  for (std::size_t i = 0; i < model.ops.size(); ++i)
    model_traits<decltype(model.layers)>::visit(model.layers, i, [&](auto& layer) {
      detail::for_each_parameter(layer, [&](const std::string& n, auto& value, auto&) {
        std::string full = f.ops[i].name + "." + n;
        f.parameters.push_back(
            {full, tensor_traits<std::remove_cvref_t<decltype(value)>>::size(value)});
        f.ops[i].parameters.push_back(std::move(full));
      });
    });
  if (auto v = validate(f); !v) return v.err();
  return f;
}

/// The forward DAG of a DAG model whose loss takes no targets, measured.
template <class Model, class T, class B>
result<forward_dag> profile_dag(Model& model, const T& sample_input, B& backend,
                                profile_options opt = {}) {
  static_assert(Backend<B>, "remat: profile_dag(): the backend must satisfy remat::exec::Backend");
  return profile_dag(model, sample_input, no_targets{}, backend, std::move(opt));
}

}  // namespace remat::exec
