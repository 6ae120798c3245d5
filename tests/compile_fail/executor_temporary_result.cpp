// Must NOT compile: an executor on the chain of a temporary result (*profile_chain(...)): the
// value moves out of the temporary. The executor keeps a reference to the chain
// (and builds its graph from it at every run), so the temporary would dangle at the first run;
// the test expects the library's static_assert message (tests/CMakeLists.txt, compile_fail.*).
#include <vector>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

struct tensor {
  remat::exec::host_backend::buffer buf;
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
};

struct layer {
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  tensor forward(const tensor& x, remat::exec::host_backend& b) { return {b.allocate(x.bytes())}; }
  tensor forward_save(const tensor& x, context&, remat::exec::host_backend& b) { return {b.allocate(x.bytes())}; }
  tensor backward(const tensor& x, const tensor&, const context&, const tensor&, remat::exec::host_backend& b) {
    return {b.allocate(x.bytes())};
  }
  tensor backward(const tensor& x, const tensor&, const context&, remat::exec::host_backend& b) {  // the loss
    return {b.allocate(x.bytes())};
  }
};

int main() {
  std::vector<layer> model(2);
  const remat::chain c{"c", 4, {{"a", 1, 1, 4, 4, 0, 0}, {"b", 1, 1, 4, 4, 0, 0}}};
  remat::exec::host_backend b;
  remat::exec::executor ex(model, *remat::result<remat::chain>(c), b);  // a result's temporary value
  (void)ex.run(*remat::store_all{}.solve(c, 100), tensor{b.allocate(4)});
}
