#pragma once
// remat for LibTorch (CMake target remat::torch, Debian's libtorch-dev 1.13, CPU):
// train a torch::nn::Sequential by a plan under a memory budget, with exactly plain LibTorch's
// gradients. Opt-in: <remat/remat.hpp> and <remat/exec.hpp> never include LibTorch.
//   remat::libtorch::backend   counts LibTorch's own CPU allocations against a budget
//                              (torch/backend.hpp)
//   remat::libtorch::layer     one module as a chain layer; layers_of(net[, loss]) a Sequential's
//                              children as a chain model (torch/layer.hpp)
// with remat::exec's profile_chain, executor and train_step (exec.hpp). The namespace is
// remat::libtorch, not remat::torch, so that `using namespace remat;` leaves ::torch unambiguous.

#include <remat/exec.hpp>
#include <remat/torch/backend.hpp>
#include <remat/torch/layer.hpp>
