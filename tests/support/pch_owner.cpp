// The one file of vl_tests_pch (tests/CMakeLists.txt): a target needs a source to build the precompiled header
// that the LibTorch test programs share. Nothing else is compiled here.
