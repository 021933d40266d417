# ctest script for cpp_host_example: install, configure, build, run; any
# failing step fails the test with its output.
function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cpp_host: ${name} failed (${rc})\n${out}\n${err}")
  endif()
  message(STATUS "cpp_host: ${name} ok\n${out}")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
step(install "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
step(configure "${CMAKE_COMMAND}" -S "${EXAMPLE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DPython_EXECUTABLE=${Python_EXECUTABLE}"
     "-Dpybind11_DIR=${pybind11_DIR}")
step(build "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" -j2)
step(run "${WORK_DIR}/build/cpp_host")
