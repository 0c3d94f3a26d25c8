// tests/support/torch_test.hpp — force-included first into every test that links LibTorch (CMakeLists).
// Debian's LibTorch pulls in glog, whose CHECK macro would silently replace Catch2's CHECK (a failing
// glog CHECK aborts the program and a passing one is not counted). Including ATen first, dropping glog's
// CHECK and then including Catch2 makes CHECK Catch2's in every test, whatever the test includes later.
#pragma once
#include <ATen/ATen.h>
#undef CHECK
#include <catch2/catch.hpp>
#ifndef CHECK
#error "Catch2 was included before tests/support/torch_test.hpp; CHECK would be glog's"
#endif
