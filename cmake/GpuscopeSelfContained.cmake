# A Python extension that needs nothing from the build machine but glibc and
# the unwinder glibc loads (GPUSCOPE_SELF_CONTAINED, the wheel's build:
# `make wheel`).
#
# A wheel built against the build machine's shared Abseil runs only where
# that exact Abseil (Debian's libabsl_*.so.20220623, say) is installed, and
# auditwheel cannot bundle libstdc++: it is on every manylinux policy's list
# of system libraries, so the extension would carry the build machine's
# GLIBCXX symbol versions. So the extension links:
#
#   - Abseil as static, position-independent archives: built from source
#     into this build (GPUSCOPE_ABSEIL_SOURCE_DIR, which `make wheel` sets),
#     or an installed static Abseil. Distributions' own static archives
#     (Debian's libabsl-dev) are not position-independent (local-exec TLS),
#     so they cannot go into a shared object;
#   - libstdc++ statically (-static-libstdc++). Not libgcc: its unwinder
#     stays the shared libgcc_s.so.1 that glibc itself loads to unwind a
#     thread in pthread_exit() (Debian's libc6 depends on it; every manylinux
#     policy lists it). With a second, static unwinder in the extension,
#     CPython ending a daemon thread inside gpuscope at exit (a forced
#     unwind started by glibc's copy, resumed by ours) aborted the process
#     (tests/python/test_threads_fork.py and tests/wheel/ catch it);
#   - exporting PyInit_<module> and nothing else (a version script), so that
#     the copies inside the extension never interpose on, nor are interposed
#     by, the libstdc++ or Abseil that torch or another extension loads into
#     the same process (template instantiations of std::string, say, are
#     otherwise exported with default visibility);
#   - with --gc-sections, which drops what nothing reaches: among it the
#     std::random_device code that would bind arc4random@GLIBC_2.36 and
#     raise the wheel's platform tag past manylinux_2_35.
#
# The CUDA driver, CUPTI and NVML stay dlopen()ed, as in every build.
#
#   gpuscope_resolve_self_contained()      top level, after lib/: decides
#       (AUTO: where it can) and sets GPUSCOPE_SELF_CONTAINED_ACTIVE.
#   gpuscope_make_self_contained(<target>) the extension's static link.

include_guard(GLOBAL)
include(CheckCXXSourceCompiles)

# The shared libraries among the absl:: targets the gpuscope library links,
# transitively.
function(_gpuscope_shared_absl out)
  set(seen)
  set(shared)
  get_target_property(todo gpuscope LINK_LIBRARIES)
  while(todo)
    list(POP_FRONT todo t)
    if(NOT t MATCHES "^absl::" OR NOT TARGET ${t} OR t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "SHARED_LIBRARY")
      list(APPEND shared ${t})
    endif()
    get_target_property(deps ${t} INTERFACE_LINK_LIBRARIES)
    if(deps)
      list(APPEND todo ${deps})
    endif()
  endwhile()
  set(${out} ${shared} PARENT_SCOPE)
endfunction()

function(gpuscope_resolve_self_contained)
  set(GPUSCOPE_SELF_CONTAINED_ACTIVE OFF PARENT_SCOPE)
  if(GPUSCOPE_SELF_CONTAINED STREQUAL "OFF" OR NOT GPUSCOPE_BUILD_PYTHON)
    return()
  endif()
  set(problems)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    list(APPEND problems
      "the compiler is ${CMAKE_CXX_COMPILER_ID}; the self-contained link is made and tested with g++ only")
  else()
    # Linked as the extension is: a shared object, position-independent.
    set(CMAKE_REQUIRED_FLAGS -fPIC)
    set(CMAKE_REQUIRED_LINK_OPTIONS -shared -static-libstdc++)
    set(CMAKE_REQUIRED_QUIET ON)
    check_cxx_source_compiles(
      "#include <string>\nint main() { std::string s(\"x\"); return static_cast<int>(s.size()) - 1; }"
      GPUSCOPE_HAVE_STATIC_LIBSTDCXX)
    if(NOT GPUSCOPE_HAVE_STATIC_LIBSTDCXX)
      list(APPEND problems
        "no libstdc++.a that links into a shared object (Debian/Ubuntu: it comes with g++; "
        "Fedora/RHEL: dnf install libstdc++-static)")
    endif()
  endif()
  _gpuscope_shared_absl(shared)
  if(shared)
    list(GET shared 0 first)
    get_target_property(where ${first} LOCATION)
    list(APPEND problems
      "Abseil is shared libraries (${where}): set GPUSCOPE_ABSEIL_SOURCE_DIR to an abseil-cpp "
      "source tree (`bash scripts/fetch-abseil.sh DIR` fetches Debian's), or point CMAKE_PREFIX_PATH "
      "at an Abseil built with -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON")
  endif()
  if(problems)
    list(JOIN problems "; " problems_text)
    if(GPUSCOPE_SELF_CONTAINED STREQUAL "ON")
      message(FATAL_ERROR "GPUSCOPE_SELF_CONTAINED=ON, but ${problems_text}.")
    endif()
    message(STATUS "gpuscope: the Python extension links Abseil and the C++ runtime as found, "
                   "not self-contained: ${problems_text}")
    return()
  endif()
  message(STATUS "gpuscope: the Python extension is self-contained "
                 "(static Abseil and libstdc++, their symbols hidden)")
  set(GPUSCOPE_SELF_CONTAINED_ACTIVE ON PARENT_SCOPE)
endfunction()

function(gpuscope_make_self_contained target)
  if(NOT GPUSCOPE_SELF_CONTAINED_ACTIVE)
    return()
  endif()
  get_target_property(name ${target} OUTPUT_NAME)
  if(NOT name)
    set(name ${target})
  endif()
  set(map "${CMAKE_CURRENT_BINARY_DIR}/${target}.exports.map")
  # Written only when it changes, so that configuring again relinks nothing.
  file(CONFIGURE OUTPUT "${map}" CONTENT "{\n  global: PyInit_${name};\n  local: *;\n};\n")
  target_link_options(${target} PRIVATE -static-libstdc++
                      LINKER:--version-script=${map} LINKER:--gc-sections)
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${map}")
endfunction()
