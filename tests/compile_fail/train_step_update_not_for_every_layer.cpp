// Must NOT compile: train_step's update takes one layer type, but the model has two (update is
// called on every layer); the test expects the library's static_assert message
// (tests/CMakeLists.txt, compile_fail.*).
#include <tuple>

#include "chain_layers.hpp"

int main() {
  std::tuple<cf::layer, cf::loss> model;
  const remat::chain c = cf::chain_of(2);
  cf::host_backend b;
  remat::exec::executor ex(model, c, b);
  auto only_layers = [](cf::layer&) {};  // not callable on cf::loss
  (void)remat::exec::train_step(ex, *remat::store_all{}.solve(c, 100), cf::tensor{b.allocate(4)},
                                only_layers);
}
