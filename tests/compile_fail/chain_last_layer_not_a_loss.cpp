// Must NOT compile: in a tuple model the last layer is the loss, and this one has no loss
// backward (caught at compile time, not when the run reaches it). The test expects the library's
// static_assert message.
#include <tuple>

#include "chain_layers.hpp"

int main() {
  std::tuple<cf::layer, cf::layer> model;
  const remat::chain c = cf::chain_of(2);
  cf::host_backend b;
  remat::exec::executor ex(model, c, b);
  (void)ex.run(*remat::store_all{}.solve(c, remat::unlimited_bytes), cf::tensor{b.allocate(4)});
}
