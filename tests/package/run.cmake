# Installs the configured remat build into a scratch prefix, then configures, builds and runs a
# consumer project that only does find_package(remat CONFIG REQUIRED). EXPECTED_PARTS lists the
# optional targets remat was built with (json lpsolve cbc cuda): the consumer must see each one's
# REMAT_HAS_ macro through the installed target, and no other.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${REMAT_BINARY_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "installing remat failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build"
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer against the installed remat failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed (${rc})")
endif()
execute_process(COMMAND "${WORK_DIR}/build/consumer" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer said: ${out}")
if(rc)
  message(FATAL_ERROR "the consumer failed (${rc})")
endif()
# The consumer must have picked the installed headers, not the source tree.
if(NOT out MATCHES "from ${WORK_DIR}/prefix")
  message(FATAL_ERROR "the consumer did not use the installed remat: ${out}")
endif()
execute_process(COMMAND "${WORK_DIR}/build/backends" RESULT_VARIABLE rc OUTPUT_VARIABLE out)
string(STRIP "${out}" out)
message(STATUS "backends said: ${out}")
set(expected "parts: ${EXPECTED_PARTS}")
string(STRIP "${expected}" expected)
if(rc OR NOT out STREQUAL expected)
  message(FATAL_ERROR "the installed targets' REMAT_HAS_ macros: expected '${expected}', got '${out}' (${rc})")
endif()
