// Must NOT compile: a layer without forward(). The test expects the library's static_assert
// message, which names the missing member (tests/CMakeLists.txt, compile_fail.*).
#include <vector>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

struct tensor {
  remat::exec::host_backend::buffer buf;
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
};

struct layer {  // forward is missing
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  tensor forward_save(const tensor& x, context&, remat::exec::host_backend& b) {
    return {b.allocate(x.bytes())};
  }
  tensor backward(const tensor& x, const tensor&, const context&, const tensor&,
                  remat::exec::host_backend& b) {
    return {b.allocate(x.bytes())};
  }
};

int main() {
  std::vector<layer> model(2);
  remat::chain c{"c", 4, {{"a", 1, 1, 4, 4, 0, 0}, {"b", 1, 1, 4, 4, 0, 0}}};
  remat::exec::host_backend b;
  remat::exec::executor ex(model, c, b);
  (void)ex.run(*remat::store_all{}.solve(c, 100), tensor{b.allocate(4)});
}
