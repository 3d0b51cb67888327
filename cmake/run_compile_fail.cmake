# Runs one compile-fail test: compiles SRC (which must fail), then checks the diagnostics.
#   // expect: REGEX      each such line in SRC must match somewhere in the compiler's output
#   // first-error: REGEX the first line containing "error" must match it (default: "oar:")
# Inputs: CXX (compiler), SRC, INCLUDE_DIR; PCH_DIR (optional): searched first, for the
# precompiled <oar/oar.hpp> of cmake/make_compile_fail_pch.cmake.
file(STRINGS "${SRC}" lines)
set(expects "")
set(first_error "oar:")
foreach(line IN LISTS lines)
  if(line MATCHES "^// expect: (.*)$")
    list(APPEND expects "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^// first-error: (.*)$")
    set(first_error "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT expects)
  message(FATAL_ERROR "${SRC}: no '// expect:' line; a compile-fail test must say what it expects")
endif()

set(pch_include "")
if(PCH_DIR)
  set(pch_include -I "${PCH_DIR}")
endif()
execute_process(
  COMMAND "${CXX}" -std=c++20 -fsyntax-only ${pch_include} -I "${INCLUDE_DIR}" "${SRC}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "${SRC} compiled, but it must not")
endif()

string(REGEX MATCH "[^\n]* error: [^\n]*" first_line "${all}")
message(STATUS "first error line: ${first_line}")
if(NOT first_line MATCHES "${first_error}")
  message(FATAL_ERROR "the first error line does not match '${first_error}':\n${first_line}\n--- full output ---\n${all}")
endif()
foreach(e IN LISTS expects)
  if(NOT all MATCHES "${e}")
    message(FATAL_ERROR "expected '${e}' in the diagnostics:\n${all}")
  endif()
endforeach()
message(STATUS "failed to compile as expected, diagnostics match")
