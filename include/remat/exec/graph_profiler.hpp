#pragma once
// profile_graph(): the forward DAG of a DAG model with measured costs (DESIGN.md §6), as
// profile() does for chains (profiler.hpp), so a user goes from layers to a graph to plan with
// (build_graph) without writing a cost by hand.
//
// The ops run in the graph's topological order, each on the outputs of the ops it reads (the
// sample for the graph input), `warmup + repetitions` times: forward (the fast-forward),
// forward_save and the backward, whose output gradient is the op's output itself (only its shape
// matters, as for chains). It records per op
//   forward_time / backward_time   medians (forward_save's time, as for chains; the graph's
//                                  fast-forward takes the same)
//   output_bytes, phantom_bytes    the output and the context forward_save keeps
//   backward_reads                 from the layer's backward_reads()
//   forward_overhead_bytes         the backend's high-water mark above what was in use plus the
//                                  result, the largest seen; forward_save_overhead_bytes the same
//                                  for forward_save
//   backward_overhead_bytes        the larger of two cases: every input gradient created by this
//                                  backward (high-water mark above what was in use plus the
//                                  gradients it made), and every input gradient that other ops
//                                  also contribute to already there, so that the backward adds
//                                  into it (above what was in use plus the gradients it made).
//                                  A layer that accumulates in place has the same overhead in
//                                  both, and the graph simulator predicts its peak exactly.
// Times are the wall clock's, or the backend's own (events on a GPU stream) for a TimingBackend,
// as profile() takes them. Layers with random state are restored to it afterwards; parameter
// gradients accumulated by the profiling backwards are cleared when the layer offers zero_grad().

#include <algorithm>
#include <cstddef>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/exec/graph_concepts.hpp>
#include <remat/exec/graph_executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/problem/builder.hpp>

namespace remat::exec {

template <class Model, class T, class B>
result<forward_dag> profile_graph(Model& model, const T& sample_input, B& backend, profile_options opt = {}) {
  static_assert(Tensor<T>, "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` member "
                "returning its size in bytes) and must be movable");
  static_assert(Backend<B>, "remat: profile_graph(): the backend must satisfy remat::exec::Backend");
  using mt = model_traits<std::remove_cvref_t<decltype(model.layers)>>;
  if (opt.repetitions < 1 || opt.warmup < 0)
    return error{status::invalid_problem, "profile_graph: repetitions must be >= 1 and warmup >= 0", {}};
  if (model.ops.empty()) return error{status::invalid_problem, "profile_graph: the model has no op", {}};
  auto structure = detail::model_graph(model, opt.name);
  if (!structure) return structure.err();
  const graph& g = structure->g;
  const std::vector<detail::op_nodes>& nodes = structure->ops;
  const std::vector<backward_reads> reads = detail::reads_of(model);
  forward_dag f{opt.name, tensor_traits<T>::size(sample_input), {}};
  for (const auto& op : model.ops) {
    f.ops.emplace_back();
    f.ops.back().name = op.name;
    f.ops.back().inputs = op.inputs;
  }
  auto k = [](int i) { return static_cast<std::size_t>(i); };

  std::vector<std::size_t> order(nodes.size());  // the ops by their forward's index
  for (std::size_t i = 0; i < nodes.size(); ++i) order[k(nodes[i].fwd)] = i;
  std::vector<std::optional<T>> outputs(static_cast<std::size_t>(g.data_count()));
  std::size_t i = 0;
  try {
    for (std::size_t pos = 0; pos < order.size(); ++pos) {
      i = order[pos];
      const detail::op_nodes& on = nodes[i];
      forward_op& fo = f.ops[i];
      std::vector<const T*> x;
      for (int d : on.in) x.push_back(d == training_layout::input ? &sample_input : &*outputs[k(d)]);
      mt::visit(model.layers, i, [&](auto& layer) {
        using layer_t = std::remove_reference_t<decltype(layer)>;
        using traits = graph_layer_traits<layer_t>;
        static_assert(check_graph_layer<layer_t, T, B>());
        using C = typename traits::context;
        backend.set_activity("profiling op '" + fo.name + "'");
        const exec::detail::saved_random_state<layer_t> rng(layer);
        const std::span<const T* const> xs(x);
        std::vector<const T*> x_read(x.size(), nullptr);
        if (reads[i].inputs) x_read = x;
        // Runs the backward on the given gradient slots; returns the bytes of the gradients it
        // created (the slots that were empty).
        auto backward = [&](const T& y, const C& ctx, std::vector<std::optional<T>>& dx) {
          std::vector<char> fresh;
          for (const auto& s : dx) fresh.push_back(!s);
          const T* yr = reads[i].output ? &y : nullptr;
          const std::span<std::optional<T>> slots(dx);
          if (i + 1 == model.ops.size()) {
            if constexpr (HasGraphLossBackward<layer_t, T, B>)
              traits::loss_backward(layer, std::span<const T* const>(x_read), yr, ctx, slots, backend);
            else
              throw detail::execution_failure("it is the loss (the last op), but its layer has no loss backward");
          } else {
            if constexpr (HasGraphBackward<layer_t, T, B>)
              traits::backward(layer, std::span<const T* const>(x_read), yr, ctx, y, slots, backend);
            else
              throw detail::execution_failure("only the last op may be a loss");
          }
          bytes made = 0;
          for (std::size_t j = 0; j < dx.size(); ++j) {
            if (!dx[j])
              throw detail::execution_failure("its backward left the gradient of input " + std::to_string(j) +
                                              " empty");
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
          {
            const bytes before = backend.in_use();
            backend.reset_high_water();
            T y = traits::forward(layer, xs, backend);
            fo.output_bytes = tensor_traits<T>::size(y);
            fwd_overhead = std::max(fwd_overhead, backend.high_water() - before - fo.output_bytes);
          }
          rng.restore();
          const bytes before = backend.in_use();
          backend.reset_high_water();
          C ctx{};
          const auto t_fwd = detail::start_timer(backend);
          T y = traits::forward_save(layer, xs, ctx, backend);
          if (timed) tf.push_back(detail::stop_timer(backend, t_fwd));
          fo.phantom_bytes = std::max(fo.phantom_bytes, traits::context_bytes(ctx));
          save_overhead = std::max(save_overhead, backend.high_water() - before - tensor_traits<T>::size(y) -
                                                      traits::context_bytes(ctx));
          std::vector<std::optional<T>> dx(x.size());
          bytes held = backend.in_use();
          backend.reset_high_water();
          const auto t_bwd = detail::start_timer(backend);
          bytes made = backward(y, ctx, dx);
          if (timed) tb.push_back(detail::stop_timer(backend, t_bwd));
          bwd_overhead = std::max(bwd_overhead, backend.high_water() - held - made);
          if (!shared) continue;
          for (std::size_t j = 0; j < dx.size(); ++j)
            if (g.producers(on.in_grad[j]).size() == 1) dx[j].reset();
          held = backend.in_use();
          backend.reset_high_water();
          made = backward(y, ctx, dx);
          bwd_overhead = std::max(bwd_overhead, backend.high_water() - held - made);
        }
        fo.forward_time = detail::median(tf);
        fo.backward_time = detail::median(tb);
        fo.forward_overhead_bytes = fwd_overhead;
        fo.forward_save_overhead_bytes = save_overhead;
        fo.backward_overhead_bytes = bwd_overhead;
        if (reads[i].inputs) fo.backward_reads = fo.inputs;
        if (reads[i].output) fo.backward_reads.emplace_back(::remat::detail::own_output_name);
        rng.restore();
        if (i + 1 < model.ops.size()) outputs[k(on.act)].emplace(traits::forward(layer, xs, backend));
        rng.restore();
        if constexpr (requires { exec::detail::deref(layer).zero_grad(); }) exec::detail::deref(layer).zero_grad();
      });
    }
  } catch (const std::exception& e) {
    backend.set_activity("an allocation");
    return error{status::execution_error, "profile_graph: op '" + f.ops[i].name + "' failed: " + e.what(), {}};
  }
  backend.set_activity("an allocation");
  if (auto v = validate(f); !v) return v.err();
  return f;
}

}  // namespace remat::exec
