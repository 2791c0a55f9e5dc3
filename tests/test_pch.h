// The precompiled header of every test executable that links the LibTorch path (tests/CMakeLists.txt): LibTorch
// and GoogleTest parse once per build instead of once per test file.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>
