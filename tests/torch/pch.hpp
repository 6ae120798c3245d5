#pragma once
// test_torch's precompiled header (REMAT_PCH): LibTorch first, its glog CHECK macros undone before
// doctest defines its own (as each test file does), then doctest and remat.
#include <torch/torch.h>
#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_GT
#undef CHECK_GE
#undef CHECK_LT
#undef CHECK_LE

#include <doctest/doctest.h>

#include <remat/remat.hpp>
#include <remat/torch.hpp>
