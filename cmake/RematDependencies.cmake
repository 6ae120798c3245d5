# Finds remat's required and optional dependencies. Each optional one sets REMAT_HAS_<X> and is
# switched off cleanly when missing.

# Eigen 3.4: the example layers (examples/eigen/) and what trains them (remat-demo, profile-gpt,
# test_exec, bench_executor). remat's headers do not use it, and remat::remat does not link it.
if(REMAT_BUILD_TESTS OR REMAT_BUILD_EXAMPLES OR REMAT_BUILD_BENCH)
  find_package(Eigen3 3.4 REQUIRED NO_MODULE)
endif()

find_package(nlohmann_json 3 QUIET)
set(REMAT_HAS_JSON ${nlohmann_json_FOUND})

find_package(LpSolve QUIET)
set(REMAT_HAS_LPSOLVE ${LpSolve_FOUND})

find_package(PkgConfig QUIET)
set(REMAT_HAS_CBC OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(REMAT_CBC QUIET IMPORTED_TARGET cbc)
  if(REMAT_CBC_FOUND)
    set(REMAT_HAS_CBC ON)
  endif()
endif()

# CUDA (remat::cuda, optional): AUTO uses it when nvcc and the toolkit are found, OFF
# never, ON fails the configuration without them. A GPU is never needed to configure or build.
set(REMAT_ENABLE_CUDA AUTO CACHE STRING "Build remat's CUDA backend, tests and examples (AUTO, ON, OFF)")
set_property(CACHE REMAT_ENABLE_CUDA PROPERTY STRINGS AUTO ON OFF)
set(REMAT_HAS_CUDA OFF)
if(NOT REMAT_ENABLE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      set(REMAT_HAS_CUDA ON)
    endif()
  endif()
  if(REMAT_ENABLE_CUDA STREQUAL "ON" AND NOT REMAT_HAS_CUDA)
    message(FATAL_ERROR "remat: REMAT_ENABLE_CUDA=ON but no CUDA compiler or toolkit was found "
                        "(set CMAKE_CUDA_COMPILER, or use REMAT_ENABLE_CUDA=AUTO)")
  endif()
endif()
if(REMAT_HAS_CUDA)
  # Never `native`: configuring would fail on a machine without a GPU. Ampere and Hopper by
  # default (sm_80 also embeds PTX, which newer GPUs JIT); a user's own list wins.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
endif()

# LibTorch (remat::torch, optional): Debian's libtorch-dev (PyTorch 1.13, CPU). AUTO uses it when
# found, OFF never, ON fails the configuration without it.
set(REMAT_ENABLE_TORCH AUTO CACHE STRING "Build remat's LibTorch adapter, tests and examples (AUTO, ON, OFF)")
set_property(CACHE REMAT_ENABLE_TORCH PROPERTY STRINGS AUTO ON OFF)
set(REMAT_HAS_TORCH OFF)
if(NOT REMAT_ENABLE_TORCH STREQUAL "OFF")
  find_package(Torch QUIET)
  if(Torch_FOUND AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # LibTorch 1.13's headers do not compile as C++20 with Clang 14 and libstdc++ 12 (std::vector
    # of the incomplete c10::IValue); g++ 12 compiles them. Ask this Clang (a few seconds).
    include(CheckCXXSourceCompiles)
    set(CMAKE_REQUIRED_INCLUDES ${TORCH_INCLUDE_DIRS})
    set(CMAKE_REQUIRED_FLAGS "-std=c++20")
    set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
    check_cxx_source_compiles("#include <torch/nn.h>\nint remat_probe() { return 0; }" REMAT_TORCH_COMPILES)
    unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
    unset(CMAKE_REQUIRED_FLAGS)
    unset(CMAKE_REQUIRED_INCLUDES)
    if(NOT REMAT_TORCH_COMPILES)
      message(STATUS "remat: LibTorch's headers do not compile as C++20 with this compiler; remat::torch is off (use g++)")
      set(Torch_FOUND OFF)
    endif()
  endif()
  if(Torch_FOUND)
    set(REMAT_HAS_TORCH ON)
  elseif(REMAT_ENABLE_TORCH STREQUAL "ON")
    message(FATAL_ERROR "remat: REMAT_ENABLE_TORCH=ON but LibTorch was not found, or does not compile with this "
                        "compiler (Debian: apt-get install libtorch-dev; or set Torch_DIR)")
  endif()
endif()

# MPI (remat::mpi, optional): the pipeline's transport (<remat/dist/mpi.hpp>). Debian:
# libopenmpi-dev and openmpi-bin (mpirun). Off, and silent, when not found.
find_package(MPI QUIET COMPONENTS CXX)
set(REMAT_HAS_MPI ${MPI_CXX_FOUND})

# NCCL (remat::nccl, optional): the pipeline's device-to-device transport
# (<remat/dist/nccl.hpp>), with CUDA and MPI. The CUDA toolkit's (nccl.h and libnccl next to
# cudart) or Debian's libnccl-dev. Off, and silent, when not found.
set(REMAT_HAS_NCCL OFF)
if(REMAT_HAS_CUDA AND REMAT_HAS_MPI)
  find_path(REMAT_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(REMAT_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(REMAT_NCCL_INCLUDE_DIR AND REMAT_NCCL_LIBRARY)
    set(REMAT_HAS_NCCL ON)
  endif()
endif()

find_package(doctest QUIET)
set(REMAT_HAS_DOCTEST ${doctest_FOUND})

find_package(benchmark QUIET)
set(REMAT_HAS_BENCHMARK ${benchmark_FOUND})

# Report ON/OFF, not an empty string, for what was not found.
foreach(dep JSON LPSOLVE CBC CUDA TORCH MPI NCCL DOCTEST BENCHMARK)
  if(REMAT_HAS_${dep})
    set(REMAT_HAS_${dep} ON)
  else()
    set(REMAT_HAS_${dep} OFF)
  endif()
endforeach()
