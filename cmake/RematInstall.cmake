# Install rules and a package config, so that find_package(remat) works from an install tree.
include(CMakePackageConfigHelpers)

set(REMAT_CMAKE_DIR "${CMAKE_INSTALL_DATADIR}/cmake/remat")
install(DIRECTORY include/ DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
set(_remat_targets remat)
if(REMAT_HAS_JSON)
  list(APPEND _remat_targets remat_json)
endif()
if(REMAT_HAS_LPSOLVE)
  list(APPEND _remat_targets remat_lpsolve)
endif()
if(REMAT_HAS_CBC)
  list(APPEND _remat_targets remat_cbc)
endif()
if(REMAT_HAS_CUDA)
  list(APPEND _remat_targets remat_cuda)
endif()
if(REMAT_HAS_TORCH)
  list(APPEND _remat_targets remat_torch)
endif()
if(REMAT_HAS_MPI)
  list(APPEND _remat_targets remat_mpi)
endif()
if(REMAT_HAS_NCCL)
  list(APPEND _remat_targets remat_nccl)
endif()
install(TARGETS ${_remat_targets} EXPORT remat-targets)
install(EXPORT remat-targets NAMESPACE remat:: DESTINATION "${REMAT_CMAKE_DIR}")
configure_package_config_file(cmake/remat-config.cmake.in
  "${CMAKE_CURRENT_BINARY_DIR}/remat-config.cmake" INSTALL_DESTINATION "${REMAT_CMAKE_DIR}")
# Header-only: any architecture may use it.
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/remat-config-version.cmake"
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/remat-config.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/remat-config-version.cmake"
              cmake/FindLpSolve.cmake
        DESTINATION "${REMAT_CMAKE_DIR}")
