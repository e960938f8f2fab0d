# Finds what gpuscope builds against. Each failure says how to fix it.
#
# Run-time GPU libraries (libcuda, CUPTI, NVML) are never linked: gpuscope
# dlopen()s them, so one build runs with or without a GPU. At build time their
# vendors' headers declare the entry points and records (cuda.h, cupti.h,
# nvml.h: the CUDA toolkit's, else the PyPI packages nvidia-cuda-runtime,
# nvidia-cuda-cupti and nvidia-nvml-dev), the header-only NVTX v3 is needed
# when GPUSCOPE_WITH_NVTX is ON, and nlohmann-json (header-only) reads and
# writes JSON. All of them stay private to the library.

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
      "download an abseil-cpp release (https://github.com/abseil/abseil-cpp/releases), unpack it, "
      "and pass -DGPUSCOPE_ABSEIL_SOURCE_DIR=<that folder> (to pip: "
      "-Ccmake.define.GPUSCOPE_ABSEIL_SOURCE_DIR=<folder>). Users who only want the Python "
      "package: install the prebuilt wheel (pip install gpuscope-*.whl), which needs no Abseil.")
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
    OUTPUT_VARIABLE _py_nvidia_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  list(APPEND _gpuscope_header_hints ${_py_nvidia_dirs})
endif()

# nlohmann-json: the library's JSON reader and writer (private; header-only):
# an installed CMake package, else the headers of the PyPI package
# nlohmann-json (a build requirement of `pip install .`).
find_package(nlohmann_json 3.10 CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  find_path(_gpuscope_json_dir nlohmann/json.hpp HINTS ${_gpuscope_header_hints} NO_CACHE)
  if(NOT _gpuscope_json_dir)
    message(FATAL_ERROR
      "nlohmann-json (3.10 or newer) was not found. `pip install nlohmann-json` (`pip install .` "
      "does this in its build environment), or on Debian/Ubuntu apt-get install "
      "nlohmann-json3-dev (or run `make deps`), or point CMAKE_PREFIX_PATH at an install.")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_gpuscope_json_dir}")
  message(STATUS "gpuscope: nlohmann-json from ${_gpuscope_json_dir}")
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
  # A cached folder that lost its header (a pip build environment, gone)
  # is searched for again.
  if(NOT EXISTS "${GPUSCOPE_${_name}_INCLUDE_DIR}/${_header}")
    find_path(_gpuscope_dir ${_header} HINTS ${_gpuscope_header_hints} NO_CACHE)
    if(NOT _gpuscope_dir)
      message(FATAL_ERROR
        "${_header} (${_name}'s header) was not found. Install the CUDA toolkit, or "
        "`pip install ${_pypi}` (`make deps` does this), or pass "
        "-DGPUSCOPE_${_name}_INCLUDE_DIR=<dir>.")
    endif()
    set(GPUSCOPE_${_name}_INCLUDE_DIR "${_gpuscope_dir}" CACHE PATH
        "Directory holding ${_header} (found automatically when empty)" FORCE)
    unset(_gpuscope_dir)
  endif()
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
if(GPUSCOPE_WITH_NVTX AND NOT EXISTS "${GPUSCOPE_NVTX_INCLUDE_DIR}/nvtx3/nvToolsExt.h")
  set(_nvtx_hints ${_gpuscope_header_hints})
  find_path(_gpuscope_nvtx_dir nvtx3/nvToolsExt.h HINTS ${_nvtx_hints} NO_CACHE)
  if(NOT _gpuscope_nvtx_dir)
    message(FATAL_ERROR
      "NVTX v3 headers (nvtx3/nvToolsExt.h) were not found. Install the CUDA toolkit, or "
      "`pip install nvidia-nvtx` (`make deps` does this), or pass "
      "-DGPUSCOPE_NVTX_INCLUDE_DIR=<dir>, or build without NVTX: -DGPUSCOPE_WITH_NVTX=OFF.")
  endif()
  set(GPUSCOPE_NVTX_INCLUDE_DIR "${_gpuscope_nvtx_dir}" CACHE PATH
      "Directory holding nvtx3/nvToolsExt.h (found automatically when empty)" FORCE)
endif()

if(GPUSCOPE_WITH_NVTX)
  # An IMPORTED INTERFACE target keeps the include PRIVATE to the library and
  # marks the headers as system headers (no warnings from them).
  add_library(gpuscope_nvtx_headers INTERFACE IMPORTED)
  set_target_properties(gpuscope_nvtx_headers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${GPUSCOPE_NVTX_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
endif()
