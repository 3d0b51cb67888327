# Runs as `cmake -P` from the ctest `main_job_configure_minimal`: configures this source tree the
# way scripts/run_main.sh does (the release preset's options) into a scratch folder, with every
# package that only the tests, benchmarks or optional targets use hidden
# (CMAKE_DISABLE_FIND_PACKAGE_<name>), as on a machine that ran only `scripts/setup.sh --main`.
# Passes when the configure succeeds, says the tests are off for want of doctest, and defines
# train_mnist (checked with a dry run of its build, which compiles nothing).
#
# Inputs (-D): OAR_SOURCE_DIR, OAR_WORK_DIR, OAR_GENERATOR, OAR_CXX_COMPILER
cmake_minimum_required(VERSION 3.25)

foreach(_v OAR_SOURCE_DIR OAR_WORK_DIR OAR_GENERATOR OAR_CXX_COMPILER)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "run_main_job_configure: ${_v} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${OAR_WORK_DIR}")
set(_hidden doctest xtensor benchmark BLAS Torch MPI ONNX PNG JPEG CUDAToolkit)
set(_hide "")
foreach(_p IN LISTS _hidden)
  list(APPEND _hide "-DCMAKE_DISABLE_FIND_PACKAGE_${_p}=ON")
endforeach()
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${OAR_SOURCE_DIR}" -B "${OAR_WORK_DIR}" -G "${OAR_GENERATOR}"
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${OAR_CXX_COMPILER}"
    -DOAR_BUILD_TESTS=ON -DOAR_BUILD_EXAMPLES=ON -DOAR_BUILD_BENCHMARKS=ON --no-warn-unused-cli ${_hide}
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "main job configure: failed (${_rc}) with ${_hidden} hidden:\n${_out}\n${_err}")
endif()
foreach(_line "oar: tests OFF \\(doctest not found" "oar: json \\(simdjson\\) ON")
  if(NOT _out MATCHES "${_line}")
    message(FATAL_ERROR "main job configure: no line matching '${_line}' in:\n${_out}")
  endif()
endforeach()
execute_process(
  COMMAND "${CMAKE_COMMAND}" --build "${OAR_WORK_DIR}" --target train_mnist -- -n
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "main job configure: train_mnist is not buildable there (${_rc}):\n${_out}\n${_err}")
endif()
file(REMOVE_RECURSE "${OAR_WORK_DIR}")
message(STATUS "main job configure: ok without ${_hidden}")
