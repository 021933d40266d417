# ctest script for cpp_host_example: install this build into a prefix, move
# the prefix elsewhere (a relocatable install), then configure the example
# against the moved prefix with the base interpreter (not this build's venv)
# and build and run both of its hosts. Any failing step fails the test.
function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cpp_host: ${name} failed (${rc})\n${out}\n${err}")
  endif()
  message(STATUS "cpp_host: ${name} ok\n${out}")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
step(install "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
file(RENAME "${WORK_DIR}/prefix" "${WORK_DIR}/moved")
set(prefix "${WORK_DIR}/moved")

# The installed CMake files name no path of this machine's build: not the build
# tree, not the source tree, not the interpreter or pybind11 it was built with.
get_filename_component(build_python_dir "${Python_EXECUTABLE}" DIRECTORY)
file(GLOB_RECURSE config_files "${prefix}/*.cmake")
foreach(file ${config_files})
  file(READ "${file}" text)
  foreach(path "${BUILD_DIR}" "${SOURCE_DIR}" "${build_python_dir}" "${pybind11_DIR}")
    string(FIND "${text}" "${path}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "cpp_host: ${file} names ${path}")
    endif()
  endforeach()
endforeach()

# A host names its own interpreter: the base one behind this build's venv.
execute_process(COMMAND "${Python_EXECUTABLE}" -c
                "import sys; print(getattr(sys, '_base_executable', sys.executable))"
                OUTPUT_VARIABLE base_python OUTPUT_STRIP_TRAILING_WHITESPACE)
step(configure "${CMAKE_COMMAND}" -S "${EXAMPLE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     "-DCMAKE_PREFIX_PATH=${prefix}" "-DPython_EXECUTABLE=${base_python}"
     "-Dpybind11_DIR=${pybind11_DIR}")
step(build "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" -j2)
step(run_in_process "${WORK_DIR}/build/cpp_host")
step(run_repl "${CMAKE_COMMAND}" -E env "DOLSOT_CACHE_DIR=${WORK_DIR}/cache"
     "${WORK_DIR}/build/repl_host")
string(FIND "${step_output}" "worker: ${prefix}/libexec/dolsot/dolsot-worker" at)
if(at EQUAL -1)
  message(FATAL_ERROR "cpp_host: repl_host did not take the moved prefix's worker:\n${step_output}")
endif()
