# Writes include/remat/milp/detail/lpsolve_macro_names.hpp, the one list of lp_solve's macro
# names that <remat/milp/lpsolve.hpp> saves before <lp_lib.h> and restores after its own code.
#
#   cmake -D LPSOLVE_INCLUDE_DIR=/usr/include/lpsolve -P scripts/lpsolve_macro_names.cmake
#
# With -D CHECK=ON it writes nothing, and fails when the list lacks a name that the headers in
# LPSOLVE_INCLUDE_DIR define or undefine, or does not undefine one of their defaults (below); the
# test milp.lpsolve_macro_names runs that check on the lp_solve the build found.
#
# The names: every macro that lp_lib.h and the headers it includes with #include "..." (found in
# LPSOLVE_INCLUDE_DIR, followed recursively) define or undefine, in any branch of any #if, the
# include guards (HEADER_*) excepted: a later #include <lp_lib.h> must stay a no-op, its
# declarations being there already. The defaults: the names among them that lp_solve defines only
# where they are not defined yet (#ifndef X / #if !defined X), such as REAL (double) and MYBOOL
# (unsigned char), which shape its declarations; lpsolve.hpp undefines them, once saved, so that
# lp_lib.h always declares what liblpsolve55 was built with. NULL and CHAR_BIT are not defaults
# here: the standard library defines them, before the save (lpsolve.hpp includes <climits> and
# <cstddef> first), and lp_solve's fallbacks must not replace them.
cmake_minimum_required(VERSION 3.25)

if(NOT LPSOLVE_INCLUDE_DIR OR NOT EXISTS "${LPSOLVE_INCLUDE_DIR}/lp_lib.h")
  message(FATAL_ERROR "lpsolve_macro_names: set LPSOLVE_INCLUDE_DIR to the folder of lp_lib.h "
                      "(Debian: -D LPSOLVE_INCLUDE_DIR=/usr/include/lpsolve)")
endif()
get_filename_component(output "${CMAKE_CURRENT_LIST_DIR}/../include/remat/milp/detail/lpsolve_macro_names.hpp"
                       ABSOLUTE)

# The lines of a file as a CMake list. Not file(STRINGS): a list element holding an unmatched '['
# swallows the ';' after it (lp_matrix.h's macros would merge with their neighbours), so ';', '['
# and ']', which no directive's name holds, are replaced first.
function(read_lines file out)
  file(READ "${file}" text)
  string(REPLACE ";" " " text "${text}")
  string(REPLACE "[" "(" text "${text}")
  string(REPLACE "]" ")" text "${text}")
  string(REPLACE "\\\n" " " text "${text}")  # continued lines
  string(REPLACE "\n" ";" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# lp_lib.h and the headers it includes from its own folder.
set(pending lp_lib.h)
set(headers)
while(pending)
  list(POP_FRONT pending header)
  if(header IN_LIST headers OR NOT EXISTS "${LPSOLVE_INCLUDE_DIR}/${header}")
    continue()  # seen, or not shipped (lp_fortify.h's fortify.h, under #ifdef FORTIFY)
  endif()
  list(APPEND headers ${header})
  read_lines("${LPSOLVE_INCLUDE_DIR}/${header}" lines)
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
      list(APPEND pending "${CMAKE_MATCH_1}")
    endif()
  endforeach()
endwhile()

set(names)
set(tested)  # names tested by #ifndef X or #if !defined X
foreach(header IN LISTS headers)
  read_lines("${LPSOLVE_INCLUDE_DIR}/${header}" lines)
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*#[ \t]*(define|undef)[ \t]+([A-Za-z_][A-Za-z_0-9]*)")
      list(APPEND names "${CMAKE_MATCH_2}")
    elseif(line MATCHES "^[ \t]*#[ \t]*ifndef[ \t]+([A-Za-z_][A-Za-z_0-9]*)")
      list(APPEND tested "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^[ \t]*#[ \t]*if[ \t]*![ \t]*defined[ \t(]*([A-Za-z_][A-Za-z_0-9]*)")
      list(APPEND tested "${CMAKE_MATCH_1}")
    endif()
  endforeach()
endforeach()
list(FILTER names EXCLUDE REGEX "^HEADER_")
list(REMOVE_DUPLICATES names)
list(SORT names)
set(defaults)
foreach(name IN LISTS names)
  if(name IN_LIST tested AND NOT name MATCHES "^(NULL|CHAR_BIT)$")
    list(APPEND defaults ${name})
  endif()
endforeach()

file(STRINGS "${LPSOLVE_INCLUDE_DIR}/lp_lib.h" version_lines
     REGEX "^[ \t]*#[ \t]*define[ \t]+(MAJORVERSION|MINORVERSION|RELEASE|BUILD)[ \t]")
set(version)
foreach(part MAJORVERSION MINORVERSION RELEASE BUILD)
  foreach(line IN LISTS version_lines)
    if(line MATCHES "define[ \t]+${part}[ \t]+([0-9]+)")
      list(APPEND version ${CMAKE_MATCH_1})
    endif()
  endforeach()
endforeach()
list(JOIN version "." version)
list(JOIN headers " " header_names)

if(CHECK)
  if(NOT EXISTS "${output}")
    message(FATAL_ERROR "lpsolve_macro_names: ${output} is missing")
  endif()
  file(STRINGS "${output}" listed REGEX "^REMAT_LPSOLVE_MACRO\\(")
  list(TRANSFORM listed REPLACE "^REMAT_LPSOLVE_MACRO\\(([A-Za-z_0-9]+)\\)$" "\\1")
  file(STRINGS "${output}" undefined REGEX "^#undef ")
  list(TRANSFORM undefined REPLACE "^#undef ([A-Za-z_0-9]+)$" "\\1")
  set(missing ${names})
  if(listed)
    list(REMOVE_ITEM missing ${listed})
  endif()
  set(missing_defaults ${defaults})
  if(undefined)
    list(REMOVE_ITEM missing_defaults ${undefined})
  endif()
  if(missing OR missing_defaults)
    message(FATAL_ERROR "lpsolve_macro_names: lp_solve ${version} in ${LPSOLVE_INCLUDE_DIR} "
                        "defines names that ${output} does not save (${missing}) or defaults it "
                        "does not undefine (${missing_defaults}): regenerate it with\n"
                        "  cmake -D LPSOLVE_INCLUDE_DIR=${LPSOLVE_INCLUDE_DIR} -P scripts/lpsolve_macro_names.cmake")
  endif()
  list(LENGTH names count)
  message(STATUS "lpsolve_macro_names: the list saves all ${count} macro names of lp_solve ${version}")
  return()
endif()

set(text "// Generated by scripts/lpsolve_macro_names.cmake from lp_solve ${version}'s headers; do not edit.
// Regenerate with
//   cmake -D LPSOLVE_INCLUDE_DIR=/usr/include/lpsolve -P scripts/lpsolve_macro_names.cmake
// (the test milp.lpsolve_macro_names fails when the lp_solve a build finds defines a name that is
// missing here). Headers read:
//   ${header_names}
//
// Every macro name that they define or undefine, include guards excepted, once, as
// REMAT_LPSOLVE_MACRO(NAME): the includer defines REMAT_LPSOLVE_MACRO to act on each name.
// <remat/milp/lpsolve.hpp> includes this file twice: before <lp_lib.h>, to save each name's state
// (#pragma push_macro), with REMAT_LPSOLVE_UNDEF_DEFAULTS defined; after its own code, to restore
// it (#pragma pop_macro). REMAT_LPSOLVE_UNDEF_DEFAULTS then undefines the names that lp_solve
// defines only where they are not defined yet (REAL, MYBOOL, ...): a user's own REAL, saved and
// restored, must not change what lp_lib.h declares.
// No include guard: it is meant to be included where it acts.
// clang-format off
")
foreach(name IN LISTS names)
  string(APPEND text "REMAT_LPSOLVE_MACRO(${name})\n")
endforeach()
string(APPEND text "#ifdef REMAT_LPSOLVE_UNDEF_DEFAULTS\n")
foreach(name IN LISTS defaults)
  string(APPEND text "#undef ${name}\n")
endforeach()
string(APPEND text "#endif\n// clang-format on\n")
file(WRITE "${output}" "${text}")
list(LENGTH names count)
list(LENGTH defaults default_count)
message(STATUS "lpsolve_macro_names: wrote ${count} names (${default_count} defaults) to ${output}")
