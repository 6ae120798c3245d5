// Must NOT compile: a graph layer (an op of a DAG model) without either backward. The test expects
// the library's static_assert message, which names the missing member (tests/CMakeLists.txt,
// compile_fail.*).
#include <optional>
#include <span>
#include <vector>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

using remat::exec::host_backend;

struct tensor {
  host_backend::buffer buf;
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
};

struct op {  // both backwards are missing
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  tensor forward(std::span<const tensor* const> x, host_backend& b) {
    return {b.allocate(x[0]->bytes())};
  }
  tensor forward_save(std::span<const tensor* const> x, context&, host_backend& b) {
    return {b.allocate(x[0]->bytes())};
  }
};

int main() {
  remat::exec::dag_model<std::vector<op>> model{std::vector<op>(2),
                                                {{"f", {"input"}}, {"loss", {"f"}}}};
  const remat::forward_dag f{"d",
                             4,
                             {{.name = "f", .inputs = {"input"}, .output_bytes = 4},
                              {.name = "loss", .inputs = {"f"}, .output_bytes = 4}}};
  const remat::graph g = *remat::build_graph(f);
  host_backend b;
  remat::exec::executor ex(model, g, b);
  (void)ex.run(remat::schedule{remat::store_all_program(g), 0, 0}, tensor{b.allocate(4)});
}
