// Must NOT compile: the loss takes the batch's targets only, and the profiler is given none. The
// test expects the library's static_assert message, which says how to pass them.
#include <tuple>

#include "chain_layers.hpp"

int main() {
  std::tuple<cf::layer, cf::targets_loss> model;
  cf::host_backend b;
  (void)remat::exec::profile_chain(model, cf::tensor{b.allocate(4)}, b);
}
