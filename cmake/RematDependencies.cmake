# Finds remat's required and optional dependencies. Each optional one sets REMAT_HAVE_<X> and is
# switched off cleanly when missing.

find_package(Eigen3 3.4 REQUIRED NO_MODULE)

find_package(nlohmann_json 3 QUIET)
set(REMAT_HAVE_JSON ${nlohmann_json_FOUND})

find_package(LpSolve QUIET)
set(REMAT_HAVE_LPSOLVE ${LpSolve_FOUND})

find_package(PkgConfig QUIET)
set(REMAT_HAVE_CBC OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(REMAT_CBC QUIET IMPORTED_TARGET cbc)
  if(REMAT_CBC_FOUND)
    set(REMAT_HAVE_CBC ON)
  endif()
endif()

include(CheckLanguage)
check_language(CUDA)
set(REMAT_HAVE_CUDA OFF)
if(CMAKE_CUDA_COMPILER)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(REMAT_HAVE_CUDA ON)
  endif()
endif()

find_package(doctest QUIET)
set(REMAT_HAVE_DOCTEST ${doctest_FOUND})

find_package(benchmark QUIET)
set(REMAT_HAVE_BENCHMARK ${benchmark_FOUND})

# Report ON/OFF, not an empty string, for what was not found.
foreach(dep JSON LPSOLVE CBC CUDA DOCTEST BENCHMARK)
  if(REMAT_HAVE_${dep})
    set(REMAT_HAVE_${dep} ON)
  else()
    set(REMAT_HAVE_${dep} OFF)
  endif()
endforeach()
