// remat's generic code compiled against the archetypes (remat/archetypes.hpp): the executor, on a
// chain model and on a DAG model, with transfers; both profilers; code that takes a policy as a
// template parameter. A member the concepts do not promise, used by that code, fails to compile
// here. Nothing is run: the archetypes only compile.

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/archetypes.hpp>
#include <remat/exec/executor.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/concepts.hpp>

using namespace remat;
namespace arch = remat::archetypes;

namespace {

/// A template that takes a policy, as the composite policies do: it states its requirement.
template <class P>
result<schedule> plan_twice(const P& p, const chain& c, bytes budget) {
  static_assert(require_chain_policy<P>);
  auto first = p.solve(c, budget);
  if (!first) return first;
  return p.solve(c, budget);
}

/// Instantiates everything; never called.
[[maybe_unused]] void instantiate() {
  arch::backend b;
  const chain c;
  std::vector<arch::chain_layer> chain_model;
  exec::executor chain_ex(chain_model, c, b);
  (void)chain_ex.run(schedule{}, arch::tensor(arch::buffer{}));
  (void)exec::profile_chain(chain_model, arch::tensor(arch::buffer{}), b);

  exec::dag_model<std::vector<arch::dag_layer>> dag{{}, {}};
  const graph g;
  exec::executor dag_ex(dag, g, b);
  (void)dag_ex.run(schedule{}, arch::tensor(arch::buffer{}));
  (void)exec::profile_dag(dag, arch::tensor(arch::buffer{}), b);

  (void)plan_twice(arch::policy{}, c, 0);
}

}  // namespace

TEST_CASE("archetypes meet exactly the concepts they stand for") {
  static_assert(exec::Tensor<arch::tensor>);
  static_assert(!std::copyable<arch::tensor>);
  static_assert(exec::Backend<arch::backend>);
  static_assert(exec::TransferBackend<arch::backend>);
  static_assert(exec::TransferableTensor<arch::tensor, arch::backend>);
  static_assert(exec::ChainLayer<arch::chain_layer, arch::tensor, arch::backend>);
  static_assert(exec::DagLayer<arch::dag_layer, arch::tensor, arch::backend>);
  static_assert(ChainPolicy<arch::policy> && GraphPolicy<arch::policy>);
  CHECK(machine_of(arch::policy{}) == machine{});
  CHECK_THROWS_AS(static_cast<void>(arch::backend{}.in_use()), std::logic_error);
}
