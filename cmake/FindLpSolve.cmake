# FindLpSolve: lp_solve 5.5.
#
# Debian splits lp_solve: the headers come with liblpsolve55-dev (/usr/include/lpsolve), but the
# shared library comes with lp-solve and lives in a non-standard folder, /usr/lib/lp_solve
# (the -dev package itself ships only static archives). We look there too, and fall back to the
# position-independent static archive.
#
# Defines LpSolve_FOUND, LpSolve_INCLUDE_DIR, LpSolve_LIBRARY and the imported target
# LpSolve::LpSolve.

find_path(LpSolve_INCLUDE_DIR NAMES lp_lib.h PATH_SUFFIXES lpsolve lp_solve)
find_library(LpSolve_LIBRARY NAMES lpsolve55 lpsolve55_pic
             PATH_SUFFIXES lp_solve lpsolve)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LpSolve REQUIRED_VARS LpSolve_LIBRARY LpSolve_INCLUDE_DIR)

if(LpSolve_FOUND AND NOT TARGET LpSolve::LpSolve)
  add_library(LpSolve::LpSolve UNKNOWN IMPORTED)
  set_target_properties(LpSolve::LpSolve PROPERTIES
    IMPORTED_LOCATION "${LpSolve_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LpSolve_INCLUDE_DIR}")
  # The static archive needs libm and libdl (lp_solve loads its BFP/XLI plug-ins with dlopen).
  if(LpSolve_LIBRARY MATCHES "\\.a$")
    set_property(TARGET LpSolve::LpSolve APPEND PROPERTY INTERFACE_LINK_LIBRARIES m ${CMAKE_DL_LIBS})
  else()
    get_filename_component(_lpsolve_dir "${LpSolve_LIBRARY}" DIRECTORY)
    set_property(TARGET LpSolve::LpSolve APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath,${_lpsolve_dir}")
  endif()
endif()
mark_as_advanced(LpSolve_INCLUDE_DIR LpSolve_LIBRARY)
