// Must NOT compile: in a tuple model, a layer before the last has only a loss backward (only the
// last layer is the loss). The test expects the library's static_assert message.
#include <tuple>

#include "chain_layers.hpp"

int main() {
  std::tuple<cf::layer, cf::loss, cf::loss> model;
  const remat::chain c = cf::chain_of(3);
  cf::host_backend b;
  remat::exec::executor ex(model, c, b);
  (void)ex.run(*remat::store_all{}.solve(c, remat::unlimited_bytes), cf::tensor{b.allocate(4)});
}
