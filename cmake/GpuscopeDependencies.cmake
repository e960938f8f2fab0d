# Finds what gpuscope builds against. Each failure says how to fix it.
#
# Run-time GPU libraries (libcuda, CUPTI, NVML) are never linked: gpuscope
# dlopen()s them, so one build runs with or without a GPU. At build time only
# the header-only NVTX v3 is needed, and only when GPUSCOPE_WITH_NVTX is ON.

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

# NVTX v3 (header-only): the CUDA toolkit's copy, else the PyPI package
# `nvidia-nvtx` (installed by `make deps` when no toolkit is present).
if(GPUSCOPE_WITH_NVTX AND NOT GPUSCOPE_NVTX_INCLUDE_DIR)
  set(_nvtx_hints)
  foreach(_root $ENV{CUDA_HOME} $ENV{CUDA_PATH} $ENV{CUDAToolkit_ROOT} /usr/local/cuda /usr)
    list(APPEND _nvtx_hints "${_root}/include")
  endforeach()
  # The interpreter building the wheel (scikit-build-core sets
  # Python_EXECUTABLE), else any python3: its path may hold nvidia-nvtx.
  set(_py "${Python_EXECUTABLE}")
  if(NOT _py)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    set(_py "${Python3_EXECUTABLE}")
  endif()
  if(_py)
    execute_process(
      COMMAND "${_py}" -c
        "import glob, site, sys; roots = sys.path + site.getsitepackages() + [site.getusersitepackages()]; print(';'.join(sorted({d for r in roots if r for d in glob.glob(r + '/nvidia/*/include')})))"
      OUTPUT_VARIABLE _py_nvtx_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    list(APPEND _nvtx_hints ${_py_nvtx_dirs})
  endif()
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
