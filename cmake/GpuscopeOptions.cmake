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
option(GPUSCOPE_UNITY_BUILD
       "Compile the library's files in batches of eight (faster from scratch)"
       OFF)
set(GPUSCOPE_SANITIZE "" CACHE STRING
    "Sanitizer build: empty, 'address' (ASan + UBSan) or 'thread' (TSan)")
set_property(CACHE GPUSCOPE_SANITIZE PROPERTY STRINGS "" address thread)
set(GPUSCOPE_NVTX_INCLUDE_DIR "" CACHE PATH
    "Directory holding nvtx3/nvToolsExt.h (found automatically when empty)")
# The Python extension as a wheel ships it: a static Abseil and libstdc++
# linked in with their symbols hidden, so that it needs nothing from the
# build machine but glibc and its unwinder libgcc_s
# (cmake/GpuscopeSelfContained.cmake). AUTO does so where it can (Abseil
# built from GPUSCOPE_ABSEIL_SOURCE_DIR or installed static); ON fails where
# it cannot (`make wheel`); OFF links them as found.
set(GPUSCOPE_ABSEIL_SOURCE_DIR "" CACHE PATH
    "An abseil-cpp source tree to build into gpuscope (static, position-independent) instead of an installed Abseil")
set(GPUSCOPE_SELF_CONTAINED "OFF" CACHE STRING
    "Link Abseil and libstdc++ statically into the Python extension: OFF, AUTO or ON")
set_property(CACHE GPUSCOPE_SELF_CONTAINED PROPERTY STRINGS OFF AUTO ON)

if(NOT GPUSCOPE_SANITIZE STREQUAL "" AND NOT GPUSCOPE_SANITIZE MATCHES "^(address|thread)$")
  message(FATAL_ERROR
    "GPUSCOPE_SANITIZE='${GPUSCOPE_SANITIZE}' is not supported: use '', 'address' or 'thread'.")
endif()
if(NOT GPUSCOPE_SELF_CONTAINED MATCHES "^(OFF|AUTO|ON)$")
  message(FATAL_ERROR
    "GPUSCOPE_SELF_CONTAINED='${GPUSCOPE_SELF_CONTAINED}' is not supported: use OFF, AUTO or ON.")
endif()

function(gpuscope_print_configuration)
  message(STATUS "gpuscope ${PROJECT_VERSION} configuration:")
  foreach(_opt GPUSCOPE_BUILD_TESTS GPUSCOPE_BUILD_BENCHMARKS GPUSCOPE_BUILD_EXAMPLES GPUSCOPE_BUILD_PYTHON
               GPUSCOPE_ENABLE_INSTALL GPUSCOPE_WITH_NVTX GPUSCOPE_WERROR GPUSCOPE_UNITY_BUILD GPUSCOPE_SANITIZE
               GPUSCOPE_NVTX_INCLUDE_DIR GPUSCOPE_ABSEIL_SOURCE_DIR GPUSCOPE_SELF_CONTAINED)
    message(STATUS "  ${_opt} = ${${_opt}}")
  endforeach()
endfunction()
