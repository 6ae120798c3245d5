#pragma once
// What the graph executor needs from the user's layers (DESIGN.md §6): the ops of a forward DAG
// (rockmate-spec §1.2), each reading one or more tensors. As for chains (concepts.hpp), user
// types are adapted by providing the members the default graph_layer_traits look for, or by
// specialising graph_layer_traits; tensors and backends are the chain executor's
// (tensor_traits<T>, Backend).
//
// A graph layer L (or a pointer-like to one), with a `context` type as a chain layer's
// (default-constructible, movable, ctx.bytes()):
//   T forward(std::span<const T* const> x, Backend& b)                  fast-forward: keeps nothing
//   T forward_save(std::span<const T* const> x, context& ctx, Backend& b)
//                    computes the same y, fills ctx (the graph's phantom)
//   void backward(std::span<const T* const> x, const T* y, const context& ctx, const T& dy,
//                 std::span<std::optional<T>> dx, Backend& b)
//   void backward(std::span<const T* const> x, const T* y, const context& ctx,
//                 std::span<std::optional<T>> dx, Backend& b)      the loss: dy is the constant 1
// x holds the op's inputs in the order its dag_op lists them. In the backward, x[j] and y are
// null unless backward_reads() says the backward reads them (the graph keeps alive exactly what
// it reads, so a backward that reads nothing lets the planner free the tensors early).
//
// dx[j] is the gradient of input j, shared by every op that reads that tensor (a tensor read by k
// ops has k contributions, rockmate-spec §1.2). When dx[j] is empty, the backward creates it
// (through b) with its contribution; when it holds the sum of earlier contributions, the backward
// adds its own in place, element by element: dx[j][e] = dx[j][e] + c[e], with c computed by the
// same operations as when it creates dx[j]. This is what makes the executor's gradients bitwise
// those of plain training: one rounding per contribution and element, so two contributions give
// the same bits in either order (floating-point addition is commutative); for three or more the
// executor keeps store-all's order (graph_executor.hpp). Adding in place, without a temporary,
// is also what the graph model counts (an alive gradient costs nothing more to accumulate into);
// a layer that needs a temporary to accumulate is still safe: the profiler measures the backward
// both ways and plans for the larger overhead.
//
// Optional: backward_reads backward_reads() const (default: every input and the output), and the
// chain layers' S random_state() const / void set_random_state(const S&) and zero_grad().
//
// A model is a dag_model: the layers (a random-access range or a std::tuple, as for chains) and,
// per layer, its op: a name and the tensors it reads ("input" for the graph input, or other
// ops' names). The last op is the loss.

#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <remat/core/units.hpp>
#include <remat/exec/concepts.hpp>

namespace remat::exec {

/// What a layer's backward reads besides its context and the output gradient.
struct backward_reads {
  bool inputs = true;  ///< every input x[j] (false: none)
  bool output = true;  ///< its output y

  friend constexpr bool operator==(const backward_reads&, const backward_reads&) = default;
};

template <class L>
struct graph_layer_traits {
  using target = detail::target_t<L>;
  using context = typename target::context;

  template <class T, class B>
  static T forward(L& l, std::span<const T* const> x, B& b)
    requires requires(target& t) { { t.forward(x, b) } -> std::convertible_to<T>; }
  {
    return detail::deref(l).forward(x, b);
  }
  template <class T, class B>
  static T forward_save(L& l, std::span<const T* const> x, context& ctx, B& b)
    requires requires(target& t) { { t.forward_save(x, ctx, b) } -> std::convertible_to<T>; }
  {
    return detail::deref(l).forward_save(x, ctx, b);
  }
  template <class T, class B>
  static void backward(L& l, std::span<const T* const> x, const T* y, const context& ctx, const T& dy,
                       std::span<std::optional<T>> dx, B& b)
    requires requires(target& t) { t.backward(x, y, ctx, dy, dx, b); }
  {
    detail::deref(l).backward(x, y, ctx, dy, dx, b);
  }
  template <class T, class B>
  static void loss_backward(L& l, std::span<const T* const> x, const T* y, const context& ctx,
                            std::span<std::optional<T>> dx, B& b)
    requires requires(target& t) { t.backward(x, y, ctx, dx, b); }
  {
    detail::deref(l).backward(x, y, ctx, dx, b);
  }
  static bytes context_bytes(const context& ctx)
    requires requires { { ctx.bytes() } -> std::convertible_to<bytes>; }
  {
    return static_cast<bytes>(ctx.bytes());
  }
  static backward_reads reads(L& l) {
    if constexpr (requires(target& t) { { t.backward_reads() } -> std::convertible_to<backward_reads>; })
      return detail::deref(l).backward_reads();
    else
      return {};
  }
};

/// The parts of a graph layer, one concept each so that a misfit says which is missing.
template <class L>
concept HasGraphContext = requires { typename graph_layer_traits<L>::context; } &&
                          std::default_initializable<typename graph_layer_traits<L>::context> &&
                          std::movable<typename graph_layer_traits<L>::context>;
template <class L, class T, class B>
concept HasGraphForward = requires(L& l, std::span<const T* const> x, B& b) {
  { graph_layer_traits<L>::forward(l, x, b) } -> std::same_as<T>;
};
template <class L, class T, class B>
concept HasGraphForwardSave =
    HasGraphContext<L> &&
    requires(L& l, std::span<const T* const> x, typename graph_layer_traits<L>::context& c, B& b) {
      { graph_layer_traits<L>::forward_save(l, x, c, b) } -> std::same_as<T>;
    };
template <class L, class T, class B>
concept HasGraphBackward =
    HasGraphContext<L> && requires(L& l, std::span<const T* const> x, const T* y, const T& dy,
                                   const typename graph_layer_traits<L>::context& c,
                                   std::span<std::optional<T>> dx, B& b) {
      graph_layer_traits<L>::backward(l, x, y, c, dy, dx, b);
    };
template <class L, class T, class B>
concept HasGraphLossBackward =
    HasGraphContext<L> && requires(L& l, std::span<const T* const> x, const T* y,
                                   const typename graph_layer_traits<L>::context& c,
                                   std::span<std::optional<T>> dx, B& b) {
      graph_layer_traits<L>::loss_backward(l, x, y, c, dx, b);
    };
template <class L>
concept HasGraphContextBytes =
    HasGraphContext<L> && requires(const typename graph_layer_traits<L>::context& c) {
      { graph_layer_traits<L>::context_bytes(c) } -> std::convertible_to<bytes>;
    };

/// An op of a DAG model: everything but the loss backward (an op may provide both backwards).
template <class L, class T, class B>
concept GraphLayer = Tensor<T> && Backend<B> && HasGraphContext<L> && HasGraphForward<L, T, B> &&
                     HasGraphForwardSave<L, T, B> && HasGraphContextBytes<L> &&
                     (HasGraphBackward<L, T, B> || HasGraphLossBackward<L, T, B>);

/// Stops a misfit with a message that names the missing piece.
template <class L, class T, class B>
consteval bool check_graph_layer() {
  static_assert(Tensor<T>,
                "remat: the tensor type needs tensor_traits<T>::size(t) (default: a `bytes() const` "
                "member returning its size in bytes) and must be movable");
  static_assert(Backend<B>, "remat: the backend type does not satisfy remat::exec::Backend");
  static_assert(HasGraphContext<L>,
                "remat: the graph layer type needs a default-constructible, movable `context` type "
                "(what forward_save keeps for the backward), or a graph_layer_traits<L> "
                "specialisation");
  static_assert(HasGraphForward<L, T, B>,
                "remat: the graph layer type needs `T forward(std::span<const T* const> x, Backend& "
                "b)`, or a graph_layer_traits<L>::forward");
  static_assert(HasGraphForwardSave<L, T, B>,
                "remat: the graph layer type needs `T forward_save(std::span<const T* const> x, "
                "context& ctx, Backend& b)`, or a graph_layer_traits<L>::forward_save");
  static_assert(HasGraphContextBytes<L>,
                "remat: the graph layer's context needs `bytes() const` (its size in bytes), or a "
                "graph_layer_traits<L>::context_bytes");
  static_assert(HasGraphBackward<L, T, B> || HasGraphLossBackward<L, T, B>,
                "remat: the graph layer type needs `void backward(std::span<const T* const> x, "
                "const T* y, const context& ctx, const T& dy, std::span<std::optional<T>> dx, "
                "Backend& b)` (or, for the loss, the same without dy)");
  return true;
}

// --- models: a DAG of layers ---------------------------------------------------------------------

/// One op of a DAG model: its name (unique; not "input" nor "output") and the tensors it reads,
/// in the order its layer takes them: "input" (the graph input) or other ops' names. An op reads
/// a tensor once (a layer that uses a tensor twice reads it once and uses it twice).
struct dag_op {
  std::string name;
  std::vector<std::string> inputs;

  friend bool operator==(const dag_op&, const dag_op&) = default;
};

/// A DAG of layers: op i runs element i of `layers` (a random-access range of layers or a
/// std::tuple, as a chain model) and reads ops[i].inputs. The last op is the loss function.
template <class Layers>
struct dag_model {
  Layers layers;
  std::vector<dag_op> ops;
};

}  // namespace remat::exec
