// Must NOT compile: a type without solve() given where a MILP backend is required. The test
// expects the library's static_assert naming remat::milp::MilpBackend (tests/CMakeLists.txt).
#include <string_view>

#include <remat/milp/model.hpp>

struct not_a_backend {  // name and available(), but no solve()
  static constexpr std::string_view name = "nothing";
  static bool available() { return true; }
};

int main() {
  remat::milp::model m;
  (void)remat::milp::solve<not_a_backend>(m);
}
