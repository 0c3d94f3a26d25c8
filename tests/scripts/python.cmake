# The Python module's tests (tests/python/test_*.py, unittest: the notebooks, `pip install .` into a venv), run with the
# interpreter the module was built for (Debian's /usr/bin/python3). Included by tests/CMakeLists.txt.
if(TARGET vocablens_python)
  set(py_env "PYTHONPATH=${PROJECT_BINARY_DIR}/python;VOCABLENS_BUILD_DIR=${PROJECT_BINARY_DIR};${VOCABLENS_CLI_FOR_TESTS};VOCABLENS_THREADS=1;OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")
  set(py_run ${VOCABLENS_PYTHON_EXECUTABLE})
  if(TARGET vl_test_client)
    # Each file through the Python fork server (tests/python/fork_server.py, docs/testing.md): `import vocablens`
    # (~1.4 s of CPU: torch and LibTorch) once, not once per file. Same environment as the tests.
    set(py_sock ${CMAKE_CURRENT_BINARY_DIR}/python.sock)
    add_test(NAME python_server_start COMMAND ${VOCABLENS_PYTHON_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/python/fork_server.py
             start ${py_sock} ${py_sock}.pid 300)
    add_test(NAME python_server_stop COMMAND vl_test_client --stop ${py_sock} ${py_sock}.pid ${VOCABLENS_PYTHON_EXECUTABLE})
    set_tests_properties(python_server_start PROPERTIES FIXTURES_SETUP vl_fork_servers LABELS "python" ENVIRONMENT "${py_env}")
    set_tests_properties(python_server_stop PROPERTIES FIXTURES_CLEANUP vl_fork_servers LABELS "python")
    set(py_run vl_test_client ${py_sock} ${VOCABLENS_PYTHON_EXECUTABLE})
  endif()
  file(GLOB VOCABLENS_PY_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/python/test_*.py)
  foreach(t ${VOCABLENS_PY_TESTS})
    get_filename_component(name ${t} NAME_WE)
    add_test(NAME python_${name} COMMAND ${py_run} ${t} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/python)
    set_tests_properties(python_${name} PROPERTIES TIMEOUT 600 LABELS "python" ENVIRONMENT "${py_env}")
    if(TEST cli_server_start)  # the CLI through the fork server (tests/CMakeLists.txt)
      set_tests_properties(python_${name} PROPERTIES FIXTURES_REQUIRED vl_fork_servers)
    endif()
  endforeach()
endif()
