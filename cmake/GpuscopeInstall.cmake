# Install rules and the relocatable CMake package:
#   find_package(gpuscope CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE gpuscope::gpuscope)

include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GPUSCOPE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/gpuscope")

install(TARGETS gpuscope EXPORT gpuscopeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/gpuscope"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES "${PROJECT_BINARY_DIR}/include/gpuscope/version.h"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpuscope)

install(EXPORT gpuscopeTargets
  NAMESPACE gpuscope::
  DESTINATION ${GPUSCOPE_INSTALL_CMAKEDIR})

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/gpuscopeConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/gpuscopeConfig.cmake"
  INSTALL_DESTINATION ${GPUSCOPE_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/gpuscopeConfigVersion.cmake"
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/gpuscopeConfig.cmake"
  "${PROJECT_BINARY_DIR}/gpuscopeConfigVersion.cmake"
  DESTINATION ${GPUSCOPE_INSTALL_CMAKEDIR})
