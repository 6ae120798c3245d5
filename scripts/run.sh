#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (as root) or an existing checkout:
#   bash scripts/run.sh demo   build and run the main demo
#   bash scripts/run.sh test   build everything and run the whole test suite
# Installs the Debian packages it needs when they are missing. Under CI=true warnings are errors.
# The demo builds in build/ (Release), the tests in build-test/; REMAT_BUILD_DIR overrides either.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-}
case "$what" in
  demo|test) ;;
  *) echo "usage: bash scripts/run.sh demo|test" >&2; exit 2 ;;
esac

packages=(cmake g++ make pkg-config libeigen3-dev nlohmann-json3-dev doctest-dev libbenchmark-dev
          liblpsolve55-dev lp-solve coinor-libcbc-dev libtorch-dev libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing Debian packages (${missing[*]}); run as root or install them first" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
jobs=$(nproc 2>/dev/null || echo 2)

if [ "$what" = demo ]; then
  build=${REMAT_BUILD_DIR:-build}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DREMAT_WERROR=$werror >/dev/null
  cmake --build "$build" --target remat-demo -j "$jobs"
  exec "$build/examples/remat-demo" "${@:2}"
fi

# The tests, in build-test/: at -O1, since the tests need the code checked, not fast (a build at
# -O3 took half again as long); the benchmarks are measured from a Release build (README,
# "Benchmarks"). The programs of the core, I/O, executor and tools tests, remat-plan, remat-zoo
# and the fuzz targets are built with ASan and UBSan instead, at -O0 (the fastest to build with
# them: 31 s against 83 s at -O1 for one test file), and any report fails their test; the policy
# tests, LibTorch's, the examples and the benchmarks are plain (scripts/sanitize.sh sanitizes
# everything). REMAT_TEST_SANITIZE=none builds every program plain.
build=${REMAT_BUILD_DIR:-build-test}
sanitize=${REMAT_TEST_SANITIZE:-address,undefined}
[ "$sanitize" = none ] && sanitize=
# test_exec with ASan alone: UBSan's checks double the compile time of its Eigen-heavy files at
# -O0 (78 s against 42 s for test_eigen_gpt.cpp); scripts/sanitize.sh runs it under both.
sanitized=(test_core test_io test_exec=address test_tools remat-plan remat-zoo
           fuzz_chain_json fuzz_graph_json fuzz_schedule fuzz_cli fuzz_selftest)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
      -DREMAT_WERROR=$werror -DREMAT_SANITIZE="$sanitize" -DREMAT_UNITY_BUILD=ON \
      -DREMAT_SANITIZE_TARGETS="$(IFS=';'; echo "${sanitized[*]}")" >/dev/null
cmake --build "$build" -j "$jobs"
cd "$build"
ctest --output-on-failure -j "$jobs"
