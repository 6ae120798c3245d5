#!/usr/bin/env bash
# Every test program under ASan and UBSan, in build-asan/ (REMAT_ASAN_BUILD_DIR), at -O0 with line
# tables; any report fails its test. `bash scripts/run.sh test` (and so CI) already runs the core,
# I/O, executor and tools tests, remat-plan and the fuzz targets so; this adds the policy tests,
# LibTorch's and the examples (about twice the time on 2 cores).
# Needs what `bash scripts/run.sh test` installs (g++ 12 has both sanitizers' runtimes).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${REMAT_ASAN_BUILD_DIR:-build-asan}
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" \
      -DREMAT_SANITIZE=address,undefined -DREMAT_SANITIZE_TARGETS= -DREMAT_BUILD_BENCH=OFF \
      -DREMAT_WERROR=$werror >/dev/null
cmake --build "$build" -j "$jobs"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
# Leaks inside third-party libraries, each explained in the file.
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$build"
# The compile-fail and packaging tests build other programs: nothing of theirs runs sanitized.
ctest --output-on-failure -j "$jobs" -LE 'compile_fail|package'
