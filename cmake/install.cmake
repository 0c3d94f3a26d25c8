# Install rules and the CMake package. Included by the top-level CMakeLists.txt.
#
#   cmake --install build --prefix P      # P/include/vocablens/*.hpp, P/lib/libvocablens{,_core}.a,
#                                         # P/bin/vocablens, P/lib/libvocablens-cli.so (what bin/vocablens
#                                         # loads: src/cli/main.cpp), P/lib/cmake/vocablens/vocablensConfig.cmake
# A consumer (tests/consumer/ is one):
#   find_package(vocablens CONFIG REQUIRED)              # with -DCMAKE_PREFIX_PATH=P
#   target_link_libraries(app PRIVATE vocablens::vocablens)   # or vocablens::core (no LibTorch)
# vocablensConfig.cmake finds the dependencies the static libraries need (find_dependency: Torch, Eigen3,
# fmt, nlohmann_json, Threads; PCRE2 through pkg-config), so a consumer lists none of them.
include(CMakePackageConfigHelpers)

set(VOCABLENS_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/vocablens)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vocablens DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(TARGETS vocablens_core vocablens EXPORT vocablensTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS vocablens_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS vocablens_cli_lib LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT vocablensTargets NAMESPACE vocablens:: FILE vocablensTargets.cmake
        DESTINATION ${VOCABLENS_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vocablensConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vocablensConfig.cmake INSTALL_DESTINATION ${VOCABLENS_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vocablensConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vocablensConfig.cmake ${PROJECT_BINARY_DIR}/vocablensConfigVersion.cmake
        DESTINATION ${VOCABLENS_INSTALL_CMAKEDIR})
