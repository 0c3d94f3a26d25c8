// Force-included into every test: the source and build directories as functions, not macros on the
// compiler's command line, so that a test's object file does not depend on where the checkout lives
// (ccache shares objects between checkouts; only tests/support/fixtures.cpp sees the real paths).
#pragma once
namespace vl_test {
const char* source_dir_path();
const char* binary_dir_path();
}  // namespace vl_test
#ifndef VOCABLENS_TEST_PATHS_DEFINED
#define VOCABLENS_SOURCE_DIR (::vl_test::source_dir_path())
#define VOCABLENS_BINARY_DIR (::vl_test::binary_dir_path())
#endif
