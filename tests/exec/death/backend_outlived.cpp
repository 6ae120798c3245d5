// A buffer kept past its backend: ~host_backend must say so, naming who allocated it, and abort
// (ctest matches the message), rather than let the buffer free into a backend that is gone.
#include <cstdio>

#include <remat/exec/host_backend.hpp>

int main() {
  remat::exec::host_backend::buffer* kept = nullptr;  // leaked on purpose: never released
  {
    remat::exec::host_backend b;
    b.set_activity("F2_all of stage 2 ('fc1')");
    kept = new remat::exec::host_backend::buffer(b.allocate(64));
  }
  std::puts(kept->empty() ? "" : "not reported");  // reached only when the destructor is silent
  return 0;
}
