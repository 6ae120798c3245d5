#pragma once
// executor<Backend, Model>: runs a schedule (schedule/schedule.hpp) over the user's layers, one
// executor for every model. A DAG model (dag_model) runs on the graph it was planned with; a
// chain model (a range or tuple of chain layers) on its chain's graph, build_graph(chain), each
// chain layer entering through as_graph_layer. The semantics are the simulator's, and the
// gradients bitwise those of plain training: a schedule for which they would not be is refused
// before anything runs. run() returns a run_result (the input gradient, the loss, the measured
// peak and times) or why the run failed. Its dynamic mode, run(dynamic(budget), input), runs with
// no plan: DTR's evictions and recomputations decided as the run goes, on the tensors' real
// sizes. docs/executor.md, "The executor" and "The dynamic mode".

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <remat/core/result.hpp>
#include <remat/exec/as_graph_layer.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/exec/detail/check_model.hpp>
#include <remat/exec/detail/model_graph.hpp>
#include <remat/exec/detail/program_run.hpp>
#include <remat/exec/run_result.hpp>
#include <remat/policy/dtr/run.hpp>
#include <remat/problem/builder.hpp>
#include <remat/problem/chain.hpp>
#include <remat/problem/graph.hpp>
#include <remat/schedule/schedule.hpp>

namespace remat::exec {

/// The executor's dynamic mode: no plan, only a budget. The model's ops run in their order;
/// when an op's outputs and scratch would pass the budget, the resident activation with the
/// smallest score of `heuristic` (h_dtr, h_size, h_lru, or dtr_heuristic: one of them chosen at
/// run time, h_dtr unless set) is freed, and an evicted tensor is recomputed when an op needs it,
/// as DTR [DTR21] (policy/dtr/run.hpp, the dtr policy's own engine). Sizes are the tensors' real
/// ones, learnt as the ops make them (the graph's until then).
template <class Heuristic = dtr_heuristic>
struct dynamic {
  bytes budget = 0;
  Heuristic heuristic{};
  explicit dynamic(bytes b, Heuristic h = {}) : budget(b), heuristic(h) {}
};

/// Runs schedules over the layers of `Model` on backend B. It keeps references to the model, to
/// the graph or chain it was planned with, and to the backend.
template <class B, class Model>
class executor {
  static_assert(Backend<B>,
                "remat: executor<Backend, Model>: Backend must satisfy remat::exec::Backend");

 public:
  /// A DAG model (dag_model) on the graph it was planned with.
  executor(Model& model, const graph& g, B& backend) requires detail::is_dag_model<Model>
      : model_(model), graph_(&g), backend_(backend) {}
  /// A chain model (a range or tuple of chain layers, one per stage) on its chain.
  executor(Model& model, const chain& c, B& backend) requires(!detail::is_dag_model<Model>)
      : model_(model), chain_(&c), backend_(backend) {}
  /// Refused: the executor keeps a reference to the graph or chain (and builds the chain's graph
  /// from it at every run), so a temporary would dangle at the first run. Pass a named graph or
  /// chain that outlives the executor. (A template, so that the error is this static_assert's
  /// message rather than a dangling reference at run time.)
  template <class P>
  requires(!std::is_lvalue_reference_v<P> &&
           (std::same_as<std::remove_cv_t<P>, graph> || std::same_as<std::remove_cv_t<P>, chain>))
      executor(Model& model, P&& problem, B& backend)
      : model_(model), backend_(backend) {
    static_assert(!std::is_same_v<P, P>,
                  "remat: the executor keeps a reference to the graph or chain; pass an "
                  "lvalue that outlives the executor, not a temporary");
    (void)problem;
  }

  /// Runs the schedule on `input` (the graph input, a chain's a_0, which the run consumes).
  /// Returns the input gradient and the measurements, or why the run failed.
  template <class T>
  result<run_result<T>> run(const schedule& s, T input) {
    return run(s, std::move(input), no_targets{});
  }
  /// The same, handing the batch's targets (of any type) to the loss, the last layer, whose
  /// forward, forward_save and backward take them (exec/concepts/layer.hpp).
  template <class T, class Tg>
  result<run_result<T>> run(const schedule& s, T input, const Tg& targets);

  /// Runs the dynamic mode on `input` within mode.budget: the input gradient, the measurements
  /// and the decisions taken (run_result::decisions), or why the run failed (budget_too_small
  /// naming the op that does not fit with everything else evicted, and what it needs).
  template <class T, class H>
  result<run_result<T>> run(const dynamic<H>& mode, T input) {
    return run(mode, std::move(input), no_targets{});
  }
  /// The same, handing the batch's targets to the loss.
  template <class T, class Tg, class H>
  result<run_result<T>> run(const dynamic<H>& mode, T input, const Tg& targets);

  /// Runs a program that manages the parameters with their state `ps` (managed_training's
  /// step, exec/managed_training.hpp).
  template <class T, class Tg>
  result<run_result<T>> run_managed(const schedule& s, T input, const Tg& targets,
                                    detail::parameter_hooks& ps);

  /// The graph the executor runs (a DAG model's; a chain model's, built from its chain) and each
  /// op's nodes, or why the model and the problem do not match.
  result<detail::run_plan> plan();

  /// The model it runs (for train_step, exec/train.hpp).
  Model& model() noexcept { return model_; }
  /// The backend it runs on.
  B& backend() noexcept { return backend_; }

 private:
  template <class T, class Tg, class Go>
  result<run_result<T>> run_with(Go&& go);

  Model& model_;
  const graph* graph_ = nullptr;
  const chain* chain_ = nullptr;
  std::optional<graph> chain_graph_;  // build_graph(*chain_) of the current run
  B& backend_;
  std::optional<bytes> last_run_end_;  // backend_.in_use() when the last run ended
};

/// The graph and the ops' nodes, or why the model and the problem do not match
/// (status::invalid_problem, before anything runs): a DAG model must be the one its graph was
/// built from (structure_difference), a chain model must have one layer per stage.
template <class B, class Model>
result<detail::run_plan> executor<B, Model>::plan() {
  if constexpr (detail::is_dag_model<Model>) {
    auto ref = detail::model_graph(model_, graph_->name);
    if (!ref) return ref.err();
    if (auto diff = detail::structure_difference(*graph_, ref->g); !diff.empty())
      return error{status::invalid_problem,
                   "executor: graph '" + graph_->name + "' was not built from this model: " + diff +
                       "; plan with build_graph(profile_dag(model, ...))",
                   {}};
    return detail::run_plan{graph_, std::move(ref->ops),
                            detail::reads_of(model_)};  // same nodes, same indices
  } else {
    const int n = chain_->length();
    const auto layers = model_traits<Model>::size(model_);
    if (static_cast<int>(layers) != n)
      return error{status::invalid_problem,
                   "executor: the model has " + std::to_string(layers) + " layers but the chain '" +
                       chain_->name + "' has " + std::to_string(n) +
                       " stages; plan with the chain of this model",
                   {}};
    // Built at every run from the chain as it is now (the executor holds the chain by reference).
    auto g = build_graph(*chain_);
    if (!g) return g.err();
    chain_graph_ = std::move(*g);
    return detail::run_plan{&*chain_graph_, detail::chain_op_nodes(n),
                            std::vector<backward_needs>(static_cast<std::size_t>(n))};
  }
}

/// The model's layers are checked at compile time, each in its place (check_model: only the last
/// is the loss, and it takes the targets when the run passes them); the plan is matched to the
/// model, then the program runs (detail::program_run).
template <class B, class Model>
template <class T, class Tg>
result<run_result<T>> executor<B, Model>::run(const schedule& s, T input, const Tg& targets) {
  return run_with<T, Tg>([&]<class L>(L& layers, const detail::run_plan& p) {
    return detail::program_run<B, T, Tg, L>(backend_, layers, p, s, targets).run(std::move(input));
  });
}

template <class B, class Model>
template <class T, class Tg, class H>
result<run_result<T>> executor<B, Model>::run(const dynamic<H>& mode, T input, const Tg& targets) {
  return run_with<T, Tg>([&]<class L>(L& layers, const detail::run_plan& p) {
    return detail::program_run<B, T, Tg, L>(backend_, layers, p, targets)
        .run_dynamic(std::move(input), mode.budget, mode.heuristic);
  });
}

template <class B, class Model>
template <class T, class Tg>
result<run_result<T>> executor<B, Model>::run_managed(const schedule& s, T input, const Tg& targets,
                                                      detail::parameter_hooks& ps) {
  return run_with<T, Tg>([&]<class L>(L& layers, const detail::run_plan& p) {
    return detail::program_run<B, T, Tg, L>(backend_, layers, p, s, targets, &ps)
        .run(std::move(input));
  });
}

/// go(layers, plan) runs the model's layers (a DAG model's, or a chain model's through
/// chain_layers) on the plan matched to the model.
template <class B, class Model>
template <class T, class Tg, class Go>
result<run_result<T>> executor<B, Model>::run_with(Go&& go) {
  static_assert(
      Tensor<T>,
      "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` member "
      "returning its size in bytes) and must be movable");
  static_assert(detail::check_model<Model, T, Tg, B>());
  auto p = plan();
  if (!p) return p.err();
  p->last_run_end = last_run_end_;
  auto r = [&] {
    if constexpr (detail::is_dag_model<Model>) {
      return go(model_.layers, *p);
    } else {
      detail::chain_layers<Model> layers{&model_};
      return go(layers, *p);
    }
  }();
  // What the run leaves besides its results (the caller's to keep or free): memory in use
  // beyond it at the next run was made or kept between the two.
  last_run_end_ = backend_.in_use() - (r ? tensor_traits<T>::size(r->input_gradient) : 0);
  return r;
}

}  // namespace remat::exec
