# Installs headers, static libraries, executables and the CMake package that
# C++ hosts use with find_package(dolsot CONFIG REQUIRED).
include(CMakePackageConfigHelpers)

set(DOLSOT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/dolsot")
set(DOLSOT_EXPORTED_TARGETS dolsot dolsot_core dolsot_embedded dolsot_sandbox dolsot_sandbox_kernel
    dolsot_typecheck dolsot_inprocess dolsot_checkpoint_format dolsot_subprocess dolsot_tree_sitter)

if(NOT SKBUILD)
  foreach(dir core embedded sandbox typecheck backend_inprocess backend_subprocess)
    install(DIRECTORY "${PROJECT_SOURCE_DIR}/${dir}/"
            DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/dolsot/${dir}"
            FILES_MATCHING PATTERN "*.h")
  endforeach()
  install(TARGETS ${DOLSOT_EXPORTED_TARGETS} EXPORT dolsotTargets
          ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
          INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
  install(EXPORT dolsotTargets NAMESPACE dolsot:: DESTINATION "${DOLSOT_INSTALL_CMAKEDIR}")
  # What the config asks for: this build's CPython minor version and pybind11
  # version, no paths of this machine (a consumer finds its own).
  set(DOLSOT_PYTHON_VERSION "${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}")
  set(DOLSOT_INSTALL_WORKER "${CMAKE_INSTALL_LIBEXECDIR}/dolsot/dolsot-worker")
  configure_package_config_file(
    "${PROJECT_SOURCE_DIR}/cmake/dolsotConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/dolsotConfig.cmake"
    INSTALL_DESTINATION "${DOLSOT_INSTALL_CMAKEDIR}"
    PATH_VARS DOLSOT_INSTALL_WORKER)
  write_basic_package_version_file("${PROJECT_BINARY_DIR}/dolsotConfigVersion.cmake"
    COMPATIBILITY SameMinorVersion)
  install(FILES "${PROJECT_BINARY_DIR}/dolsotConfig.cmake"
                "${PROJECT_BINARY_DIR}/dolsotConfigVersion.cmake"
          DESTINATION "${DOLSOT_INSTALL_CMAKEDIR}")
endif()
