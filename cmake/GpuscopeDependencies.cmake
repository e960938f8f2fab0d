# Finds what gpuscope builds against. Each failure says how to fix it.
#
# Run-time GPU libraries (libcuda, CUPTI, NVML) are never linked: gpuscope
# dlopen()s them, so one build runs with or without a GPU. At build time their
# vendors' headers declare the entry points and records (cuda.h, cupti.h,
# nvml.h: the CUDA toolkit's, else the PyPI packages nvidia-cuda-runtime,
# nvidia-cuda-crt, nvidia-cuda-cupti and nvidia-nvml-dev), the header-only
# NVTX v3 is needed when GPUSCOPE_WITH_NVTX is ON, and nlohmann-json
# (header-only; installed, else the PyPI package) reads and writes JSON. All
# of them stay private to the library. Abseil is the one dependency PyPI
# cannot supply: installed, or built in from a source tree.

include_guard(GLOBAL)

find_package(Threads REQUIRED)

# Abseil: an installed one (its CMake package), or a source tree built into
# this build as static, position-independent archives
# (GPUSCOPE_ABSEIL_SOURCE_DIR: the wheel's build, and the way to build
# without root where no Abseil is installed). PyPI has no Abseil to build
# against, so a `pip install .` needs one of the two.
if(GPUSCOPE_ABSEIL_SOURCE_DIR)
  if(NOT EXISTS "${GPUSCOPE_ABSEIL_SOURCE_DIR}/CMakeLists.txt"
     OR NOT EXISTS "${GPUSCOPE_ABSEIL_SOURCE_DIR}/absl/status/status.h")
    message(FATAL_ERROR
      "GPUSCOPE_ABSEIL_SOURCE_DIR=${GPUSCOPE_ABSEIL_SOURCE_DIR} is not an abseil-cpp source tree "
      "(no CMakeLists.txt or absl/status/status.h).")
  endif()
  if(GPUSCOPE_ENABLE_INSTALL)
    message(FATAL_ERROR
      "GPUSCOPE_ABSEIL_SOURCE_DIR builds Abseil into this build, which the installed CMake package "
      "cannot name: configure with -DGPUSCOPE_ENABLE_INSTALL=OFF, or install Abseil and drop "
      "GPUSCOPE_ABSEIL_SOURCE_DIR.")
  endif()
  # A function scope keeps these settings to Abseil's own directory.
  function(_gpuscope_add_abseil)
    set(BUILD_SHARED_LIBS OFF)
    set(BUILD_TESTING OFF)
    set(ABSL_PROPAGATE_CXX_STD ON)
    set(ABSL_ENABLE_INSTALL OFF)
    set(_system)
    if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.25)
      set(_system SYSTEM)  # its headers are system headers: no warnings from them
    endif()
    add_subdirectory("${GPUSCOPE_ABSEIL_SOURCE_DIR}" "${PROJECT_BINARY_DIR}/_deps/abseil"
                     EXCLUDE_FROM_ALL ${_system})
  endfunction()
  _gpuscope_add_abseil()
else()
  find_package(absl CONFIG QUIET)
  if(NOT absl_FOUND)
    message(FATAL_ERROR
      "Abseil was not found (PyPI has no Abseil package to build against). Either install it: "
      "Debian/Ubuntu `apt-get install libabsl-dev` (or `make deps`), Fedora `dnf install "
      "abseil-cpp-devel`, and point CMAKE_PREFIX_PATH at it if it is not in a system prefix; "
      "or, without root, build it in: "
      "download an abseil-cpp release (https://github.com/abseil/abseil-cpp/releases; 20220623 is "
      "the tested LTS), unpack it, and pass -DGPUSCOPE_ABSEIL_SOURCE_DIR=<its absolute path> (to "
      "pip: -Ccmake.define.GPUSCOPE_ABSEIL_SOURCE_DIR=<path>). For the Python package alone, a "
      "wheel built by `make wheel` needs no Abseil: pip install gpuscope-*.whl.")
  endif()
endif()

if(GPUSCOPE_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    find_package(GTest QUIET)
  endif()
  if(NOT GTest_FOUND)
    message(FATAL_ERROR
      "GoogleTest was not found. apt-get install libgtest-dev libgmock-dev (or `make deps`), "
      "or configure with -DGPUSCOPE_BUILD_TESTS=OFF.")
  endif()
endif()

if(GPUSCOPE_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG QUIET)
  if(NOT benchmark_FOUND)
    message(FATAL_ERROR
      "Google Benchmark was not found. apt-get install libbenchmark-dev (or `make deps`), "
      "or configure with -DGPUSCOPE_BUILD_BENCHMARKS=OFF.")
  endif()
endif()

# Where the toolkit's and the PyPI packages' headers may be: the roots named
# by CUDA_HOME / CUDA_PATH / CUDAToolkit_ROOT, /usr/local/cuda, /usr, and the
# nvidia/*/include and nlohmann_json/include folders of the Python that
# builds (scikit-build-core sets Python_EXECUTABLE; in an isolated build they
# come from pyproject.toml's build requirements), else of any python3.
set(_gpuscope_header_hints)
foreach(_root $ENV{CUDA_HOME} $ENV{CUDA_PATH} $ENV{CUDAToolkit_ROOT} /usr/local/cuda /usr)
  list(APPEND _gpuscope_header_hints "${_root}/include" "${_root}/extras/CUPTI/include")
endforeach()
set(_py "${Python_EXECUTABLE}")
if(NOT _py)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(_py "${Python3_EXECUTABLE}")
endif()
if(_py)
  execute_process(
    COMMAND "${_py}" -c
      "import glob, site, sys; roots = sys.path + site.getsitepackages() + [site.getusersitepackages()]; print(';'.join(sorted({d for r in roots if r for p in ('/nvidia/*/include', '/nlohmann_json/include') for d in glob.glob(r + p)})))"
    OUTPUT_VARIABLE _gpuscope_python_header_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  list(APPEND _gpuscope_header_hints ${_gpuscope_python_header_dirs})
endif()

# _gpuscope_header_dir(<name> <header> <advice>...): GPUSCOPE_<name>_INCLUDE_DIR,
# the folder holding <header>, found in the hints above when empty. A folder
# the user named must hold it; one found here before that lost it (a pip
# build environment, gone) is searched for again.
function(_gpuscope_header_dir name header)
  string(CONCAT advice ${ARGN})
  set(var GPUSCOPE_${name}_INCLUDE_DIR)
  if(EXISTS "${${var}}/${header}")
    return()
  endif()
  if(${var} AND NOT "${${var}}" STREQUAL "${_GPUSCOPE_${name}_FOUND_DIR}")
    message(FATAL_ERROR "${var}=${${var}} holds no ${header}: ${advice}")
  endif()
  find_path(dir ${header} HINTS ${_gpuscope_header_hints} NO_CACHE)
  if(NOT dir)
    message(FATAL_ERROR "${header} (${name}'s header) was not found: ${advice}")
  endif()
  set(${var} "${dir}" CACHE PATH "Directory holding ${header} (found automatically when empty)"
      FORCE)
  set(_GPUSCOPE_${name}_FOUND_DIR "${dir}" CACHE INTERNAL "where ${var} was found")
endfunction()

# nlohmann-json: the library's JSON reader and writer (private; header-only):
# an installed CMake package, else the headers of the PyPI package
# nlohmann-json (a build requirement of `pip install .`), looked for before
# any other copy of the headers, which may be older.
find_package(nlohmann_json 3.10 CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  set(_advice "`pip install nlohmann-json` (`pip install .` does this in its build environment), "
              "or on Debian/Ubuntu apt-get install nlohmann-json3-dev (or run `make deps`), or "
              "point CMAKE_PREFIX_PATH at an install.")
  find_path(_gpuscope_json_dir nlohmann/json.hpp HINTS ${_gpuscope_python_header_dirs}
            NO_DEFAULT_PATH NO_CACHE)
  if(NOT _gpuscope_json_dir)
    find_path(_gpuscope_json_dir nlohmann/json.hpp HINTS ${_gpuscope_header_hints} NO_CACHE)
  endif()
  if(NOT _gpuscope_json_dir)
    message(FATAL_ERROR "nlohmann-json (3.10 or newer) was not found. ${_advice}")
  endif()
  file(STRINGS "${_gpuscope_json_dir}/nlohmann/json.hpp" _json_version
       REGEX "#define NLOHMANN_JSON_VERSION_(MAJOR|MINOR) ")
  if(EXISTS "${_gpuscope_json_dir}/nlohmann/detail/abi_macros.hpp")
    file(STRINGS "${_gpuscope_json_dir}/nlohmann/detail/abi_macros.hpp" _json_version_abi
         REGEX "#define NLOHMANN_JSON_VERSION_(MAJOR|MINOR) ")
    list(APPEND _json_version ${_json_version_abi})
  endif()
  string(REGEX MATCH "VERSION_MAJOR ([0-9]+)" _ "${_json_version}")
  set(_json_major "${CMAKE_MATCH_1}")
  string(REGEX MATCH "VERSION_MINOR ([0-9]+)" _ "${_json_version}")
  set(_json_minor "${CMAKE_MATCH_1}")
  if("${_json_major}.${_json_minor}" VERSION_LESS 3.10)
    message(FATAL_ERROR
      "nlohmann-json in ${_gpuscope_json_dir} is ${_json_major}.${_json_minor}; 3.10 or newer is "
      "needed. ${_advice}")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_gpuscope_json_dir}")
  message(STATUS "gpuscope: nlohmann-json ${_json_major}.${_json_minor} from ${_gpuscope_json_dir}")
  unset(_gpuscope_json_dir)
endif()

# The vendors' headers for the dlopen'ed libraries: one folder each (a
# toolkit may lack nvml.h, which the PyPI package then supplies; cupti.h
# includes crt/host_defines.h, a package of its own on PyPI).
set(_gpuscope_vendor_dirs)
foreach(_pair "CUDA;cuda.h;nvidia-cuda-runtime" "CUPTI;cupti.h;nvidia-cuda-cupti"
              "CRT;crt/host_defines.h;nvidia-cuda-crt" "NVML;nvml.h;nvidia-nvml-dev")
  list(GET _pair 0 _name)
  list(GET _pair 1 _header)
  list(GET _pair 2 _pypi)
  _gpuscope_header_dir(${_name} ${_header}
    "install the CUDA toolkit, or `pip install ${_pypi}` (`make deps` does this), or pass "
    "-DGPUSCOPE_${_name}_INCLUDE_DIR=<dir>.")
  list(APPEND _gpuscope_vendor_dirs "${GPUSCOPE_${_name}_INCLUDE_DIR}")
endforeach()
list(REMOVE_DUPLICATES _gpuscope_vendor_dirs)
message(STATUS "gpuscope: vendor headers from ${_gpuscope_vendor_dirs}")
# Private to the library, and system headers (no warnings from them).
add_library(gpuscope_vendor_headers INTERFACE IMPORTED)
set_target_properties(gpuscope_vendor_headers PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_gpuscope_vendor_dirs}")

# NVTX v3 (header-only): the CUDA toolkit's copy, else the PyPI package
# `nvidia-nvtx` (installed by `make deps` when no toolkit is present).
if(GPUSCOPE_WITH_NVTX)
  _gpuscope_header_dir(NVTX nvtx3/nvToolsExt.h
    "install the CUDA toolkit, or `pip install nvidia-nvtx` (`make deps` does this), or pass "
    "-DGPUSCOPE_NVTX_INCLUDE_DIR=<dir>, or build without NVTX: -DGPUSCOPE_WITH_NVTX=OFF.")
  # An IMPORTED INTERFACE target keeps the include PRIVATE to the library and
  # marks the headers as system headers (no warnings from them).
  add_library(gpuscope_nvtx_headers INTERFACE IMPORTED)
  set_target_properties(gpuscope_nvtx_headers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${GPUSCOPE_NVTX_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
endif()
