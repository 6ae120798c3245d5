# REMAT_SANITIZE: a comma-separated list of sanitizers for remat's own targets (tests, examples,
# fuzz targets), e.g. -DREMAT_SANITIZE=address,undefined. Every report is fatal
# (-fno-sanitize-recover=all), so a test fails on the first one. The exported remat::remat never
# carries the flags.
#
# REMAT_SANITIZE_TARGETS: empty, every own target is sanitized (the flags go on remat_warnings,
# the interface every own target links). Otherwise only the targets listed are, built with
# REMAT_SANITIZE_TARGET_FLAGS (default -O0 -g1) after the build type's flags, and the others are
# plain: one build holds sanitized and plain test programs (scripts/run.sh test does this). Each
# listed program also gets cmake/sanitizer_options.cpp, its default runtime options (fatal
# reports, leak detection, the suppressions of scripts/lsan.supp), so that ctest, a program run
# by hand and the programs a test starts all behave alike; the *SAN_OPTIONS variables override.
#
#   cmake -S . -B build-asan -DREMAT_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug \
#         -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1"
#   ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
#     LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp ctest --test-dir build-asan
set(REMAT_SANITIZE "" CACHE STRING
    "Sanitizers for remat's own targets, comma-separated (e.g. address,undefined); empty: none")
set(REMAT_SANITIZE_TARGETS "" CACHE STRING
    "With REMAT_SANITIZE: the targets to sanitize (a ;-list); empty: all of remat's own targets")
set(REMAT_SANITIZE_TARGET_FLAGS "-O0;-g1" CACHE STRING
    "With REMAT_SANITIZE_TARGETS: the flags the sanitized targets add after the build type's")

# An entry of REMAT_SANITIZE_TARGETS: a target, sanitized with REMAT_SANITIZE, or
# "target=list", sanitized with its own list (e.g. test_exec=address: ASan without UBSan, whose
# checks double the compile time of the executor's tests at -O0).
function(remat_sanitize_entry entry name_out list_out)
  if(entry MATCHES "^([^=]+)=(.+)$")
    set(${name_out} ${CMAKE_MATCH_1} PARENT_SCOPE)
    set(${list_out} ${CMAKE_MATCH_2} PARENT_SCOPE)
  else()
    set(${name_out} ${entry} PARENT_SCOPE)
    set(${list_out} ${REMAT_SANITIZE} PARENT_SCOPE)
  endif()
endfunction()

# remat_sanitized(target out): whether `target` is built with the sanitizers.
function(remat_sanitized target out)
  set(${out} FALSE PARENT_SCOPE)
  if(NOT REMAT_SANITIZE)
    return()
  endif()
  if(NOT REMAT_SANITIZE_TARGETS)
    set(${out} TRUE PARENT_SCOPE)
    return()
  endif()
  foreach(entry IN LISTS REMAT_SANITIZE_TARGETS)
    remat_sanitize_entry("${entry}" name list)
    if(name STREQUAL target)
      set(${out} TRUE PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

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
  if(REMAT_SANITIZE_TARGETS)
    message(STATUS "remat: sanitizers ${REMAT_SANITIZE} on ${REMAT_SANITIZE_TARGETS}")
  else()
    target_compile_options(remat_warnings INTERFACE ${remat_sanitize_flags})
    target_link_options(remat_warnings INTERFACE -fsanitize=${REMAT_SANITIZE})
    message(STATUS "remat: sanitizers ${REMAT_SANITIZE} on remat's own targets")
  endif()
endif()

# The flags on the listed targets, once they all exist (the top-level CMakeLists.txt calls it
# last). A name that is no target of this build (a program its options leave out) is skipped.
function(remat_apply_sanitize_targets)
  if(NOT REMAT_SANITIZE OR NOT REMAT_SANITIZE_TARGETS)
    return()
  endif()
  foreach(entry IN LISTS REMAT_SANITIZE_TARGETS)
    remat_sanitize_entry("${entry}" t list)
    if(TARGET ${t})
      target_compile_options(${t} PRIVATE -fsanitize=${list} -fno-sanitize-recover=all
                                          -fno-omit-frame-pointer ${REMAT_SANITIZE_TARGET_FLAGS})
      target_link_options(${t} PRIVATE -fsanitize=${list})
      # The fuzz driver (fuzz/driver.cpp) sets its own: reports abort, so that it keeps the input.
      get_target_property(own_options ${t} REMAT_OWN_SANITIZER_OPTIONS)
      if(NOT own_options)
        target_sources(${t} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/sanitizer_options.cpp)
        set_source_files_properties(${PROJECT_SOURCE_DIR}/cmake/sanitizer_options.cpp
                                    TARGET_DIRECTORY ${t} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
        target_compile_definitions(
          ${t} PRIVATE REMAT_LSAN_SUPPRESSIONS="${PROJECT_SOURCE_DIR}/scripts/lsan.supp")
      endif()
    endif()
  endforeach()
endfunction()
