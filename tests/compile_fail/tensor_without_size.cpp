// Must NOT compile: a tensor type with no size in bytes.
#include <vector>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

struct tensor {
  remat::exec::host_backend::buffer buf;
};

struct layer {
  struct context {
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  tensor forward(const tensor&, remat::exec::host_backend& b) { return {b.allocate(4)}; }
  tensor forward_save(const tensor&, context&, remat::exec::host_backend& b) {
    return {b.allocate(4)};
  }
  tensor backward(const tensor&, const tensor&, const context&, const tensor&,
                  remat::exec::host_backend& b) {
    return {b.allocate(4)};
  }
};

int main() {
  std::vector<layer> model(2);
  remat::chain c{"c", 4, {{"a", 1, 1, 4, 4, 0, 0}, {"b", 1, 1, 4, 4, 0, 0}}};
  remat::exec::host_backend b;
  remat::exec::host_backend::buffer in = b.allocate(4);
  auto r = remat::exec::profile_chain(model, tensor{std::move(in)}, b);
  (void)r;
}
