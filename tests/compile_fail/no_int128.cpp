// Must NOT compile: a compiler without __int128 (MSVC), played by GCC or Clang with
// __SIZEOF_INT128__ undefined (tests/CMakeLists.txt), is told what remat needs.
#include <remat/remat.hpp>

int main() { return 0; }
