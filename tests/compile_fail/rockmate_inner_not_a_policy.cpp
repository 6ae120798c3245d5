// Must NOT compile: rockmate's block solver is a chain policy, which cannot plan the blocks
// (graphs). The test expects the library's static_assert message, which names the missing
// requirement (tests/CMakeLists.txt, compile_fail.*).
#include <remat/policy/rockmate.hpp>
#include <remat/policy/rotor.hpp>

int main() {
  remat::rockmate<remat::rotor> p;  // rotor plans chains only
  (void)p;
}
