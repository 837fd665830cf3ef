# `cmake --install`: the public headers (kiln.h and backends/extension.h with everything they
# include), libkiln, the kiln command, a CMake package (find_package(Kiln CONFIG), target
# Kiln::kiln, components cpu/opencl/vulkan for the backends built in) and kiln.pc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The headers `root` includes with quotes, transitively, as paths from the source root.
function(kiln_header_closure out)
  set(todo ${ARGN})
  set(seen "")
  while(todo)
    list(POP_FRONT todo h)
    if(h IN_LIST seen OR NOT EXISTS ${PROJECT_SOURCE_DIR}/${h})
      continue()
    endif()
    list(APPEND seen ${h})
    file(STRINGS ${PROJECT_SOURCE_DIR}/${h} lines REGEX "^#include \"[^\"]+\"")
    foreach(line ${lines})
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
      list(APPEND todo ${inc})
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

kiln_header_closure(kiln_public_headers kiln.h backends/extension.h)
foreach(h ${kiln_public_headers})
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/${dir})
endforeach()

# Headers include each other from the source root ("graph/array.h"), so include/kiln is on the
# path too; users write #include "kiln.h" or <kiln/kiln.h>.
target_include_directories(kiln PUBLIC
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/kiln> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# The public headers are C++17 (tests/boundary/user_misuse.cpp checks it); Kiln builds as C++20.
target_compile_features(kiln INTERFACE cxx_std_17)
set_target_properties(kiln PROPERTIES EXPORT_NAME kiln VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR})
install(TARGETS kiln EXPORT KilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET kiln_cli)
  set_target_properties(kiln_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(KILN_COMPONENTS "")
foreach(c cpu opencl vulkan)
  if(TARGET kiln_${c})
    list(APPEND KILN_COMPONENTS ${c})
  endif()
endforeach()
set(kiln_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Kiln)
install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${kiln_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/KilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/KilnConfig.cmake INSTALL_DESTINATION ${kiln_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/KilnConfig.cmake ${PROJECT_BINARY_DIR}/KilnConfigVersion.cmake
  DESTINATION ${kiln_cmake_dir})

# The .pc file finds the prefix from its own place, so `cmake --install --prefix P` works.
file(RELATIVE_PATH KILN_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
