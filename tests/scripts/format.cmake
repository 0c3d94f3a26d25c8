# The C++ follows .clang-format (scripts/format.sh --check: clang-format 14 on every tracked .cpp / .hpp / .h;
# scripts/setup.sh installs it). A failure names each file that differs and the command that formats it.
add_test(NAME format_check COMMAND ${PROJECT_SOURCE_DIR}/scripts/format.sh --check)
set_tests_properties(format_check PROPERTIES LABELS "core")
