# Runs as `cmake -P` from the ctest `consumer_find_package`:
#   1. cmake --install the oar build tree into a scratch prefix,
#   2. configure tests/consumer against that prefix (find_package(oar)), twice: `core` with
#      simdjson and xtensor hidden (only oar::oar) and `json` (oar::json),
#   3. build each, 4. run what each built.
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
file(REMOVE_RECURSE "${_prefix}" "${OAR_WORK_DIR}/build")
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

# Two configurations of tests/consumer (see its CMakeLists.txt): `core` with simdjson and xtensor
# hidden, so that a program using only oar::oar is shown not to need them, and `json` through oar::json.
foreach(_part core json)
  set(_build "${OAR_WORK_DIR}/build-${_part}")
  file(REMOVE_RECURSE "${_build}")
  set(_hide "")
  if(_part STREQUAL "core")
    set(_hide -DCMAKE_DISABLE_FIND_PACKAGE_simdjson=ON -DCMAKE_DISABLE_FIND_PACKAGE_xtensor=ON)
  endif()
  _oar_step("configure ${_part}"
    "${CMAKE_COMMAND}" -S "${OAR_CONSUMER_SOURCE}" -B "${_build}"
    -G "${OAR_GENERATOR}"
    "-DCMAKE_BUILD_TYPE=${OAR_CONFIG}"
    "-DCMAKE_CXX_COMPILER=${OAR_CXX_COMPILER}"
    "-DCMAKE_CXX_FLAGS=${OAR_CXX_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${OAR_EXE_LINKER_FLAGS}"
    "-DCMAKE_PREFIX_PATH=${_prefix}"
    "-DOAR_CONSUMER_PART=${_part}" ${_hide}
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

  _oar_step("build ${_part}" "${CMAKE_COMMAND}" --build "${_build}" --config "${OAR_CONFIG}")

  if(_part STREQUAL "core")
    set(_exes oar_consumer oar_consumer_kernels oar_consumer_mpi)
    set(_must oar_consumer oar_consumer_kernels)
  else()
    set(_exes oar_consumer_json)
    set(_must oar_consumer_json)
  endif()
  foreach(_exe IN LISTS _exes)
    set(_found "")
    foreach(_cand "${_build}/${_exe}" "${_build}/${OAR_CONFIG}/${_exe}")
      if(EXISTS "${_cand}")
        set(_found "${_cand}")
        break()
      endif()
    endforeach()
    if(_found)
      # Run in the build folder: oar_consumer_json writes its small input file there.
      _oar_step("run ${_exe}" "${CMAKE_COMMAND}" -E chdir "${_build}" "${_found}")
      if(_exe MATCHES "^oar_consumer(_kernels)?$")  # their CNN lines must be equal, bit for bit
        execute_process(COMMAND "${_found}" WORKING_DIRECTORY "${_build}" OUTPUT_VARIABLE _out)
        string(REGEX MATCH "cnn loss [^\n]*" _cnn_${_exe} "${_out}")
      endif()
    elseif(_exe IN_LIST _must)
      message(FATAL_ERROR "consumer: ${_exe} was not built in ${_build}")
    endif()
  endforeach()
  if(_part STREQUAL "core")
    if(NOT _cnn_oar_consumer OR NOT _cnn_oar_consumer STREQUAL _cnn_oar_consumer_kernels)
      message(FATAL_ERROR "consumer: header-only and oar::kernels builds differ:\n"
        "  oar::oar:     ${_cnn_oar_consumer}\n  oar::kernels: ${_cnn_oar_consumer_kernels}")
    endif()
    message(STATUS "consumer: oar::oar and oar::kernels agree: ${_cnn_oar_consumer}")
  endif()
endforeach()
message(STATUS "consumer: all steps passed")
