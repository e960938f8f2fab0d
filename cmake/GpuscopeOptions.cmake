# Every GPUSCOPE_* build option is declared here, once.
#
# Options only change what is built and how; none of them changes a public
# header (house rule 1), so a consumer never needs to know how gpuscope was
# configured.

include_guard(GLOBAL)

if(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  set(_gpuscope_is_top_level ON)
else()
  set(_gpuscope_is_top_level OFF)
endif()

option(GPUSCOPE_BUILD_TESTS "Build the GoogleTest suite and register it with ctest" ${_gpuscope_is_top_level})
option(GPUSCOPE_BUILD_BENCHMARKS "Build the Google Benchmark programs under benchmarks/" ${_gpuscope_is_top_level})
option(GPUSCOPE_BUILD_EXAMPLES "Build the programs under examples/" ${_gpuscope_is_top_level})
option(GPUSCOPE_BUILD_PYTHON "Build the Python extension gpuscope._gpuscope (pip install . turns this on)" OFF)
option(GPUSCOPE_ENABLE_INSTALL "Generate install rules and the gpuscope CMake package" ON)
option(GPUSCOPE_WITH_NVTX "Emit NVTX ranges for steps and phases (OFF compiles NVTX out)" ON)
option(GPUSCOPE_WERROR "Treat compiler warnings as errors" OFF)
set(GPUSCOPE_SANITIZE "" CACHE STRING
    "Sanitizer build: empty, 'address' (ASan + UBSan) or 'thread' (TSan)")
set_property(CACHE GPUSCOPE_SANITIZE PROPERTY STRINGS "" address thread)
set(GPUSCOPE_NVTX_INCLUDE_DIR "" CACHE PATH
    "Directory holding nvtx3/nvToolsExt.h (found automatically when empty)")

if(NOT GPUSCOPE_SANITIZE STREQUAL "" AND NOT GPUSCOPE_SANITIZE MATCHES "^(address|thread)$")
  message(FATAL_ERROR
    "GPUSCOPE_SANITIZE='${GPUSCOPE_SANITIZE}' is not supported: use '', 'address' or 'thread'.")
endif()

function(gpuscope_print_configuration)
  message(STATUS "gpuscope ${PROJECT_VERSION} configuration:")
  foreach(_opt GPUSCOPE_BUILD_TESTS GPUSCOPE_BUILD_BENCHMARKS GPUSCOPE_BUILD_EXAMPLES GPUSCOPE_BUILD_PYTHON
               GPUSCOPE_ENABLE_INSTALL GPUSCOPE_WITH_NVTX GPUSCOPE_WERROR GPUSCOPE_SANITIZE
               GPUSCOPE_NVTX_INCLUDE_DIR)
    message(STATUS "  ${_opt} = ${${_opt}}")
  endforeach()
endfunction()
