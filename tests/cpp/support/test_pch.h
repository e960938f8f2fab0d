// The headers nearly every test includes, precompiled once per build tree
// (tests/CMakeLists.txt, gpuscope_test_pch) and reused by every test binary.
// Each test still includes what it uses; this only makes those includes
// free.

#ifndef GPUSCOPE_TESTS_CPP_SUPPORT_TEST_PCH_H_
#define GPUSCOPE_TESTS_CPP_SUPPORT_TEST_PCH_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"

#endif  // GPUSCOPE_TESTS_CPP_SUPPORT_TEST_PCH_H_
