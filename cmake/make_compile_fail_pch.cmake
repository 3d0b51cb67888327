# Runs as `cmake -P` from the ctest fixture compile_fail.precompile_oar_hpp: precompiles
# <oar/oar.hpp> into PCH_DIR/oar/oar.hpp.gch with the flags cmake/run_compile_fail.cmake compiles
# with (g++ only). A compile-fail test whose first include is <oar/oar.hpp> and that searches
# PCH_DIR first then reads the header's declarations from it instead of parsing them again; g++
# falls back to include/oar/oar.hpp where the file is absent or does not fit.
# Inputs: CXX (compiler), INCLUDE_DIR, PCH_DIR.
file(REMOVE_RECURSE "${PCH_DIR}")
file(MAKE_DIRECTORY "${PCH_DIR}/oar")
execute_process(
  COMMAND "${CXX}" -std=c++20 -x c++-header -I "${INCLUDE_DIR}"
          "${INCLUDE_DIR}/oar/oar.hpp" -o "${PCH_DIR}/oar/oar.hpp.gch"
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "precompiling oar/oar.hpp failed (${rc}):\n${err}")
endif()
