// The traits specialisation of examples/eigen/README.md ("Types you cannot change"), verbatim
// between the markers, so that the README's example keeps compiling and working.
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include <remat/exec/concepts.hpp>
#include <remat/exec/host_backend.hpp>

using remat::exec::host_backend;

namespace vendor {  // a third-party library: no bytes(), no forward/backward members
struct blob {
  host_backend::buffer mem;
  std::size_t n = 0;
  [[nodiscard]] float* data() const { return mem.as<float>(); }
};
inline std::size_t byte_size(const blob& t) { return t.n * sizeof(float); }
inline blob make_blob(host_backend& b, std::size_t n) {
  return {b.allocate(static_cast<remat::bytes>(n * sizeof(float))), n};
}
struct scale {  // y = k x
  float k = 2.0f;
  float grad_k = 0.0f;
};
inline void scale_fwd(float k, const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = k * x[i];
}
inline void scale_bwd(float k, const float* x, const float* dy, float* dx, float* dk,
                      std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    dx[i] = k * dy[i];
    *dk += x[i] * dy[i];
  }
}
}  // namespace vendor

// --- README begin ---
template <>
struct remat::exec::tensor_traits<vendor::blob> {
  static remat::bytes size(const vendor::blob& t) {
    return static_cast<remat::bytes>(vendor::byte_size(t));
  }
};

template <>
struct remat::exec::chain_layer_traits<vendor::scale> {
  using blob = vendor::blob;
  struct context {  // y = k x: the backward needs x only, which the executor keeps
    [[nodiscard]] remat::bytes bytes() const { return 0; }
  };
  static blob forward(vendor::scale& l, const blob& x, host_backend& b) {
    blob y = vendor::make_blob(b, x.n);  // through the backend: counted
    vendor::scale_fwd(l.k, x.data(), y.data(), x.n);
    return y;
  }
  static blob forward_save(vendor::scale& l, const blob& x, context&, host_backend& b) {
    return forward(l, x, b);
  }
  static blob backward(vendor::scale& l, const blob& x, const blob&, const context&, const blob& dy,
                       host_backend& b) {
    blob dx = vendor::make_blob(b, x.n);
    vendor::scale_bwd(l.k, x.data(), dy.data(), dx.data(), &l.grad_k, x.n);  // grad_k +=
    return dx;
  }
  static remat::bytes context_bytes(const context& c) { return c.bytes(); }
};

static_assert(remat::exec::check_chain_layer<vendor::scale, vendor::blob, host_backend>());
// --- README end ---

TEST_CASE("README: a third-party layer adapted by specialising the traits") {
  using traits = remat::exec::chain_layer_traits<vendor::scale>;
  host_backend b;
  vendor::scale l;
  vendor::blob x = vendor::make_blob(b, 3);
  for (std::size_t i = 0; i < 3; ++i) x.data()[i] = static_cast<float>(i + 1);
  traits::context ctx;
  const vendor::blob y = traits::forward_save(l, x, ctx, b);
  CHECK(remat::exec::tensor_traits<vendor::blob>::size(y) == 12);
  CHECK(b.in_use() == 24);
  CHECK(y.data()[2] == 6.0f);
  const vendor::blob dx = traits::backward(l, x, y, ctx, x, b);
  CHECK(dx.data()[1] == 4.0f);
  CHECK(l.grad_k == 14.0f);
  CHECK(traits::context_bytes(ctx) == 0);
}

TEST_CASE("README: its specialisation is the one compiled above") {
  const std::filesystem::path here(__FILE__);
  std::ifstream readme(here.parent_path() / ".." / ".." / "examples" / "eigen" / "README.md");
  std::ifstream self(here);
  if (!readme || !self) return;  // sources not at hand (an installed test binary)
  std::stringstream r, s;
  r << readme.rdbuf();
  s << self.rdbuf();
  const std::string src = s.str();
  const std::string begin = "// --- README begin ---\n", end = "// --- README end ---";
  const auto from = src.find(begin) + begin.size();
  const std::string snippet = src.substr(from, src.find(end, from) - from);
  CHECK(r.str().find("```cpp\n" + snippet + "```") != std::string::npos);
}
