#pragma once
// profile(): fills a chain by running the user's layers (DESIGN.md §6; the parameter
// estimation of shilova-spec §2.6, thesis S:1472-1478), so a user goes from model to plan
// without writing a cost by hand.
//
// For each stage, on the output of the previous one (starting from the sample input), it runs
// `warmup + repetitions` times: forward (F^∅/F^ck), forward_save (F^all) and the backward (the
// output itself serves as the output gradient: only its shape matters, as the thesis assumes
// data-independent layers). It records
//   forward_time / backward_time   medians (the forward of F^all, as the thesis times it)
//   output_bytes                   size of the output
//   saved_bytes                    output + context
//   forward/backward_overhead      the backend's high-water mark above what was in use plus the
//                                  op's result, the largest seen
//   forward_save_overhead          the same for forward_save (F^all), whose temporaries often
//                                  end up in the context
// Times are the wall clock's, or the backend's own (events on a GPU stream) for a TimingBackend.
// Layers with random state are restored to it afterwards; parameter gradients accumulated by
// the profiling backwards are cleared when the layer offers zero_grad().

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/executor.hpp>
#include <remat/problem/chain.hpp>

namespace remat::exec {

struct profile_options {
  int repetitions = 5;  ///< timed runs per op (the median is kept)
  int warmup = 1;       ///< untimed runs first
  std::string name = "profiled model";
};

namespace detail {
inline seconds median(std::vector<seconds> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}
}  // namespace detail

template <class Model, class T, class B>
result<chain> profile(Model& model, const T& sample_input, B& backend, profile_options opt = {}) {
  static_assert(Tensor<T>, "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` member "
                "returning its size in bytes) and must be movable");
  static_assert(Backend<B>, "remat: profile(): the backend must satisfy remat::exec::Backend");
  using mt = model_traits<Model>;
  const int n = static_cast<int>(mt::size(model));
  if (n == 0) return error{status::invalid_problem, "profile: the model has no layer", {}};
  if (opt.repetitions < 1 || opt.warmup < 0)
    return error{status::invalid_problem, "profile: repetitions must be >= 1 and warmup >= 0", {}};

  chain c{opt.name, tensor_traits<T>::size(sample_input), {}};
  std::optional<T> current;  // the input of the stage being profiled, past stage 1
  int l = 0;
  try {
    for (l = 1; l <= n; ++l) {
      const T& x = current ? *current : sample_input;
      std::optional<T> next;
      mt::visit(model, static_cast<std::size_t>(l - 1), [&](auto& layer) {
        using layer_t = std::remove_reference_t<decltype(layer)>;
        using traits = layer_traits<layer_t>;
        static_assert(check_layer<layer_t, T, B>());
        using C = typename traits::context;
        stage st;
        if constexpr (requires { exec::detail::deref(layer).name(); })
          st.name = std::string(exec::detail::deref(layer).name());
        backend.set_activity("profiling stage " + std::to_string(l) + (st.name.empty() ? "" : " ('" + st.name + "')"));
        // Replays draw the same random numbers, and the layer ends as it began.
        const exec::detail::saved_random_state<layer_t> rng(layer);
        std::vector<seconds> tf, tb;
        for (int rep = 0; rep < opt.warmup + opt.repetitions; ++rep) {
          const bool timed = rep >= opt.warmup;
          rng.restore();
          {
            const bytes before = backend.in_use();
            backend.reset_high_water();
            T y = traits::forward(layer, x, backend);
            st.output_bytes = tensor_traits<T>::size(y);
            st.forward_overhead_bytes = std::max(st.forward_overhead_bytes,
                                                 backend.high_water() - before - st.output_bytes);
          }
          rng.restore();
          const bytes before = backend.in_use();
          backend.reset_high_water();
          C ctx{};
          const auto t_fwd = detail::start_timer(backend);
          T y = traits::forward_save(layer, x, ctx, backend);
          if (timed) tf.push_back(detail::stop_timer(backend, t_fwd));
          const bytes saved = tensor_traits<T>::size(y) + traits::context_bytes(ctx);
          st.saved_bytes = std::max(st.saved_bytes, saved);
          st.forward_save_overhead_bytes =
              std::max(st.forward_save_overhead_bytes.value_or(0), backend.high_water() - before - saved);
          const bytes held = backend.in_use();
          backend.reset_high_water();
          const auto t_bwd = detail::start_timer(backend);
          std::optional<T> dx;
          if (l == n) {
            if constexpr (HasLossBackward<layer_t, T, B>)
              dx.emplace(traits::loss_backward(layer, x, y, ctx, backend));
            else
              throw detail::execution_failure("the last stage is the loss, but its layer has no loss backward");
          } else {
            if constexpr (HasBackward<layer_t, T, B>)
              dx.emplace(traits::backward(layer, x, y, ctx, y, backend));
            else
              throw detail::execution_failure("only the last stage may be a loss");
          }
          if (timed) tb.push_back(detail::stop_timer(backend, t_bwd));
          st.backward_overhead_bytes = std::max(st.backward_overhead_bytes,
                                                backend.high_water() - held - tensor_traits<T>::size(*dx));
        }
        st.forward_time = detail::median(tf);
        st.backward_time = detail::median(tb);
        rng.restore();
        if (l < n) next.emplace(traits::forward(layer, x, backend));
        rng.restore();
        if constexpr (requires { exec::detail::deref(layer).zero_grad(); }) exec::detail::deref(layer).zero_grad();
        c.stages.push_back(std::move(st));
      });
      current = std::move(next);
    }
  } catch (const std::exception& e) {
    backend.set_activity("an allocation");
    return error{status::execution_error,
                 "profile: stage " + std::to_string(l) + " failed: " + e.what(), {}};
  }
  backend.set_activity("an allocation");
  if (auto v = validate(c); !v) return v.err();
  return c;
}

}  // namespace remat::exec
