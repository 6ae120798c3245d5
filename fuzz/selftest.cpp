// A target that fails on purpose, to check that the driver catches what a fuzz test must report
// (fuzz/CMakeLists.txt: fuzz.driver_catches_*): an abort on "abort", an out-of-bounds write on
// "overflow" (under ASan), a hang on "hang".

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <thread>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (text == "abort") std::abort();
  if (text == "overflow") {
    auto* p = new char[4];
    volatile std::size_t past = size;  // 8: past the end (volatile: no compile-time warning)
    p[past] = 1;
    delete[] p;
  }
  if (text == "hang") std::this_thread::sleep_for(std::chrono::seconds(30));
  return 0;
}
