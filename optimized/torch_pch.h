// Precompiled header for every LibTorch translation unit (builds run on 2 cores).
#pragma once
#include <torch/torch.h>
