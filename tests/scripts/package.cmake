# The CMake package: `cmake --install` into a fresh prefix, then tests/consumer (find_package(vocablens))
# configured, built and run against it; the installed Python module imported from the prefix.
# Included by the top-level CMakeLists.txt.
# Not under the sanitizers: the installed static libraries would need the consumer to link the ASan runtime.
if(VOCABLENS_SANITIZE)
  return()
endif()
set(VOCABLENS_PACKAGE_TEST_PYTHON)
if(TARGET vocablens_python)
  set(VOCABLENS_PACKAGE_TEST_PYTHON -DPYTHON=${VOCABLENS_PYTHON_EXECUTABLE})
endif()
add_test(NAME package_consumer
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DWORK_DIR=${PROJECT_BINARY_DIR}/package_consumer
                 -DFIXTURES=${PROJECT_SOURCE_DIR}/../shared/fixtures ${VOCABLENS_PACKAGE_TEST_PYTHON}
                 -P ${PROJECT_SOURCE_DIR}/tests/consumer/run.cmake)
set_tests_properties(package_consumer PROPERTIES TIMEOUT 600 LABELS "package"
                     ENVIRONMENT "VOCABLENS_THREADS=1;OMP_NUM_THREADS=1")
