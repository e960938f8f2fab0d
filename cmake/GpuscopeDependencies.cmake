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

find_package(absl CONFIG QUIET)
if(NOT absl_FOUND)
  message(FATAL_ERROR
    "Abseil was not found. On Debian/Ubuntu: apt-get install libabsl-dev "
    "(or run `make deps`), or point CMAKE_PREFIX_PATH at an Abseil install.")
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

# nlohmann-json: the library's JSON reader and writer (private; header-only).
find_package(nlohmann_json 3.10 CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR
    "nlohmann-json (3.10 or newer) was not found. On Debian/Ubuntu: apt-get install "
    "nlohmann-json3-dev (or run `make deps`), or point CMAKE_PREFIX_PATH at an install.")
endif()

# Where the toolkit's and the PyPI packages' headers may be: the roots named
# by CUDA_HOME / CUDA_PATH / CUDAToolkit_ROOT, /usr/local/cuda, /usr, and the
# nvidia/*/include folders of the Python that builds (scikit-build-core sets
# Python_EXECUTABLE), else of any python3.
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
      "import glob, site, sys; roots = sys.path + site.getsitepackages() + [site.getusersitepackages()]; print(';'.join(sorted({d for r in roots if r for d in glob.glob(r + '/nvidia/*/include')})))"
    OUTPUT_VARIABLE _py_nvidia_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  list(APPEND _gpuscope_header_hints ${_py_nvidia_dirs})
endif()

# The vendors' headers for the dlopen'ed libraries: one folder each (a
# toolkit may lack nvml.h, which the PyPI package then supplies).
set(_gpuscope_vendor_dirs)
foreach(_pair "CUDA;cuda.h;nvidia-cuda-runtime" "CUPTI;cupti.h;nvidia-cuda-cupti" "NVML;nvml.h;nvidia-nvml-dev")
  list(GET _pair 0 _name)
  list(GET _pair 1 _header)
  list(GET _pair 2 _pypi)
  if(NOT GPUSCOPE_${_name}_INCLUDE_DIR)
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
# Private to the library, and system headers (no warnings from them).
add_library(gpuscope_vendor_headers INTERFACE IMPORTED)
set_target_properties(gpuscope_vendor_headers PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_gpuscope_vendor_dirs}")

# NVTX v3 (header-only): the CUDA toolkit's copy, else the PyPI package
# `nvidia-nvtx` (installed by `make deps` when no toolkit is present).
if(GPUSCOPE_WITH_NVTX AND NOT GPUSCOPE_NVTX_INCLUDE_DIR)
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
