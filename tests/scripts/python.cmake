# The Python module's tests (tests/python/test_*.py, unittest: the notebooks, `pip install .` into a venv), run with the
# interpreter the module was built for (Debian's /usr/bin/python3). Included by the top-level CMakeLists.txt.
if(TARGET vocablens_python)
  file(GLOB VOCABLENS_PY_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/python/test_*.py)
  foreach(t ${VOCABLENS_PY_TESTS})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME python_${name} COMMAND ${VOCABLENS_PYTHON_EXECUTABLE} ${t}
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/python)
    set_tests_properties(python_${name} PROPERTIES TIMEOUT 600 LABELS "python"
      ENVIRONMENT "PYTHONPATH=${PROJECT_BINARY_DIR}/python;VOCABLENS_BUILD_DIR=${PROJECT_BINARY_DIR};${VOCABLENS_CLI_FOR_TESTS};VOCABLENS_THREADS=1;OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")
    if(TEST cli_server_start)  # the CLI through the fork server (tests/CMakeLists.txt)
      set_tests_properties(python_${name} PROPERTIES FIXTURES_REQUIRED vl_fork_servers)
    endif()
  endforeach()
endif()
