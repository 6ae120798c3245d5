// Must NOT compile: an executor on a temporary graph. The executor keeps a reference to the
// graph, so the temporary would dangle at the first run; the test expects the library's
// static_assert message (tests/CMakeLists.txt, compile_fail.*).
#include <span>
#include <utility>
#include <vector>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

using remat::exec::host_backend;

struct tensor {
  host_backend::buffer buf;
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
};

struct op {  // never run: the constructor is refused first
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  tensor forward(std::span<const tensor* const> x, host_backend& b) {
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
  host_backend b;
  remat::exec::executor ex(model, std::move(*remat::build_graph(f)),
                           b);  // destroyed at the semicolon
  (void)ex;
}
