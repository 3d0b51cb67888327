# Runs as `cmake -P` from the ctest `consumer_find_package`:
#   1. cmake --install the oar build tree into a scratch prefix,
#   2. configure tests/consumer against that prefix (find_package(oar)),
#   3. build it, 4. run it.
# Any failing step fails the test.
#
# Inputs (-D): OAR_BINARY_DIR, OAR_CONSUMER_SOURCE, OAR_WORK_DIR, OAR_CONFIG,
#              OAR_GENERATOR, OAR_CXX_COMPILER, OAR_CXX_FLAGS, OAR_EXE_LINKER_FLAGS
cmake_minimum_required(VERSION 3.25)

foreach(_v OAR_BINARY_DIR OAR_CONSUMER_SOURCE OAR_WORK_DIR OAR_GENERATOR OAR_CXX_COMPILER)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer_test: ${_v} is not set")
  endif()
endforeach()
if(NOT OAR_CONFIG)
  set(OAR_CONFIG Release)
endif()

set(_prefix "${OAR_WORK_DIR}/prefix")
set(_build  "${OAR_WORK_DIR}/build")
file(REMOVE_RECURSE "${_prefix}" "${_build}")
file(MAKE_DIRECTORY "${OAR_WORK_DIR}")

function(_oar_step name)
  string(TIMESTAMP _t0 "%s")
  list(JOIN ARGN " " _cmdline)
  message(STATUS "consumer: ${name}: ${_cmdline}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc COMMAND_ECHO NONE)
  string(TIMESTAMP _t1 "%s")
  math(EXPR _dt "${_t1} - ${_t0}")
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "consumer: step '${name}' failed (${_rc}) after ${_dt}s")
  endif()
  message(STATUS "consumer: ${name} ok (${_dt}s)")
endfunction()

_oar_step(install
  "${CMAKE_COMMAND}" --install "${OAR_BINARY_DIR}" --prefix "${_prefix}"
  --config "${OAR_CONFIG}" --component oar_development)

if(NOT EXISTS "${_prefix}/include/oar/oar.hpp")
  message(FATAL_ERROR "consumer: ${_prefix}/include/oar/oar.hpp was not installed")
endif()
file(GLOB_RECURSE _cfg "${_prefix}/*/oarConfig.cmake")
if(NOT _cfg)
  message(FATAL_ERROR "consumer: no oarConfig.cmake under ${_prefix}")
endif()

_oar_step(configure
  "${CMAKE_COMMAND}" -S "${OAR_CONSUMER_SOURCE}" -B "${_build}"
  -G "${OAR_GENERATOR}"
  "-DCMAKE_BUILD_TYPE=${OAR_CONFIG}"
  "-DCMAKE_CXX_COMPILER=${OAR_CXX_COMPILER}"
  "-DCMAKE_CXX_FLAGS=${OAR_CXX_FLAGS}"
  "-DCMAKE_EXE_LINKER_FLAGS=${OAR_EXE_LINKER_FLAGS}"
  "-DCMAKE_PREFIX_PATH=${_prefix}"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)

# find_package must have used the scratch prefix, not some other oar.
file(STRINGS "${_build}/CMakeCache.txt" _dir REGEX "^oar_DIR:")
string(REGEX REPLACE "^oar_DIR:[A-Z]+=" "" _dir "${_dir}")
file(REAL_PATH "${_dir}" _dir_real)
file(REAL_PATH "${_prefix}" _prefix_real)
string(FIND "${_dir_real}" "${_prefix_real}/" _pos)
if(NOT _pos EQUAL 0)
  message(FATAL_ERROR "consumer: oar was found at '${_dir}', not under ${_prefix}")
endif()

_oar_step(build "${CMAKE_COMMAND}" --build "${_build}" --config "${OAR_CONFIG}")

set(_ran 0)
foreach(_exe oar_consumer oar_consumer_mpi)
  foreach(_cand "${_build}/${_exe}" "${_build}/${OAR_CONFIG}/${_exe}")
    if(EXISTS "${_cand}")
      _oar_step("run ${_exe}" "${_cand}")
      math(EXPR _ran "${_ran} + 1")
      break()
    endif()
  endforeach()
endforeach()
if(_ran EQUAL 0)
  message(FATAL_ERROR "consumer: no oar_consumer executable was built")
endif()
message(STATUS "consumer: all steps passed")
