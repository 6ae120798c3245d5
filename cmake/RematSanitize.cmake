# REMAT_SANITIZE: a comma-separated list of sanitizers for remat's own targets (tests, examples,
# fuzz targets), e.g. -DREMAT_SANITIZE=address,undefined. Every report is fatal
# (-fno-sanitize-recover=all), so a test fails on the first one. The flags go on remat_warnings,
# the interface every own target links; the exported remat::remat never carries them.
#
#   cmake -S . -B build-asan -DREMAT_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug \
#         -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1"
#   ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
#     ctest --test-dir build-asan
set(REMAT_SANITIZE "" CACHE STRING
    "Sanitizers for remat's own targets, comma-separated (e.g. address,undefined); empty: none")

if(REMAT_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    message(FATAL_ERROR "REMAT_SANITIZE needs GCC or Clang (compiler: ${CMAKE_CXX_COMPILER_ID})")
  endif()
  set(remat_sanitize_flags -fsanitize=${REMAT_SANITIZE} -fno-sanitize-recover=all
                           -fno-omit-frame-pointer)
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=${REMAT_SANITIZE}")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=${REMAT_SANITIZE}")
  string(MAKE_C_IDENTIFIER "REMAT_SANITIZE_WORKS_${REMAT_SANITIZE}" remat_sanitize_check)
  check_cxx_source_compiles("int main() { return 0; }" ${remat_sanitize_check})
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT ${remat_sanitize_check})
    message(FATAL_ERROR "REMAT_SANITIZE=${REMAT_SANITIZE}: the compiler cannot build and link a "
                        "program with -fsanitize=${REMAT_SANITIZE} (clang needs its runtime: "
                        "Debian libclang-rt-14-dev)")
  endif()
  target_compile_options(remat_warnings INTERFACE ${remat_sanitize_flags})
  target_link_options(remat_warnings INTERFACE -fsanitize=${REMAT_SANITIZE})
  message(STATUS "remat: sanitizers ${REMAT_SANITIZE} on remat's own targets")
endif()
