// Must NOT compile: an executor on the chain of a temporary result (*profile_chain(...)): the
// value moves out of the temporary. The executor keeps a reference to the chain
// (and builds its graph from it at every run), so the temporary would dangle at the first run;
// the test expects the library's static_assert message (tests/CMakeLists.txt, compile_fail.*).
#include <tuple>

#include "chain_layers.hpp"

int main() {
  std::tuple<cf::layer, cf::loss> model;
  const remat::chain c = cf::chain_of(2);
  cf::host_backend b;
  remat::exec::executor ex(model, *remat::result<remat::chain>(c),
                           b);  // a result's temporary value
  (void)ex.run(*remat::store_all{}.solve(c, 100), cf::tensor{b.allocate(4)});
}
