# The CMake package: `cmake --install` into a fresh prefix, then tests/consumer (find_package(vocablens))
# configured, built and run against it. Included by the top-level CMakeLists.txt.
add_test(NAME package_consumer
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DWORK_DIR=${PROJECT_BINARY_DIR}/package_consumer
                 -DFIXTURES=${PROJECT_SOURCE_DIR}/../shared/fixtures
                 -P ${PROJECT_SOURCE_DIR}/tests/consumer/run.cmake)
set_tests_properties(package_consumer PROPERTIES TIMEOUT 600 LABELS "package"
                     ENVIRONMENT "VOCABLENS_THREADS=1;OMP_NUM_THREADS=1")
