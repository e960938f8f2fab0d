# Warning flags and sanitizer builds.

include_guard(GLOBAL)

# gpuscope_set_warnings(<target>): the warning set every gpuscope target uses.
function(gpuscope_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      -Wall -Wextra -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor
      -Woverloaded-virtual -Wpedantic)
    if(GPUSCOPE_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()

# Sanitizers apply to everything built in this tree (library, tests,
# examples), so that instrumented and uninstrumented code never mix in one
# binary except for the prebuilt system libraries (Abseil, GoogleTest).
if(GPUSCOPE_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(GPUSCOPE_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
