# The layers of the source tree (docs/architecture.md): no #include may run from a lower layer to a higher
# one. tests/scripts/check_layers.py holds the table and prints every folder-to-folder arrow.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME layers COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/scripts/check_layers.py ${PROJECT_SOURCE_DIR})
  set_tests_properties(layers PROPERTIES TIMEOUT 60 LABELS "layers")
else()
  message(FATAL_ERROR "python3 is needed by the layers test (scripts/setup.sh installs it)")
endif()
