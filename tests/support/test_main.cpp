// The shared main() of every test program (Catch2 v2).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
