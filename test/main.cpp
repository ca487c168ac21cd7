// The Catch2 test runner's entry point.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
