// Must NOT compile: a run with targets on a DAG model whose loss (its last graph layer) takes
// none. The test expects the library's static_assert message.
#include <optional>
#include <span>
#include <tuple>

#include "chain_layers.hpp"

struct graph_loss {  // a graph loss without targets
  using context = cf::context;
  using inputs = std::span<const cf::tensor* const>;
  cf::tensor forward(inputs, cf::host_backend& b) { return {b.allocate(4)}; }
  cf::tensor forward_save(inputs, context&, cf::host_backend& b) { return {b.allocate(4)}; }
  void backward(inputs, const cf::tensor*, const context&, std::span<std::optional<cf::tensor>> dx,
                cf::host_backend& b) {
    dx[0] = cf::tensor{b.allocate(4)};
  }
};

int main() {
  remat::exec::dag_model<std::tuple<remat::exec::as_graph_layer<cf::layer>, graph_loss>> model{
      {}, {{"f", {"input"}}, {"loss", {"f"}}}};
  cf::host_backend b;
  (void)remat::exec::profile_dag(model, cf::tensor{b.allocate(4)}, cf::targets{1.0f}, b);
}
