#pragma once
// Plain LibTorch training, the reference of remat-torch-demo and tests/torch: a step without any
// plan, a deep copy of a model, and a bit-for-bit comparison of tensors.
#include <cstring>
#include <memory>

#include <torch/nn.h>

namespace remat_examples::torch_models {

/// A deep copy of a Sequential: its own parameters and buffers (every module must be Cloneable).
inline torch::nn::Sequential copy_of(const torch::nn::Sequential& net) {
  return torch::nn::Sequential(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(net->clone()));
}

/// One plain training step's forward and backward: zeroes the gradients, runs the whole model
/// with autograd, backpropagates the loss; returns the loss.
inline double plain_step(torch::nn::Sequential& net, torch::nn::AnyModule& loss,
                         const torch::Tensor& x, const torch::Tensor& targets) {
  net->zero_grad();
  torch::Tensor l = loss.forward(net->forward(x), targets);
  l.backward();
  return l.item<double>();
}

/// Same shape, type and bits (not just equal values: -0 and +0 differ, NaNs compare).
inline bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const torch::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<std::size_t>(ca.nbytes())) == 0;
}

/// Every parameter's gradient and every buffer of two copies of a model, bit for bit.
inline bool same_state(const torch::nn::Module& a, const torch::nn::Module& b) {
  const auto pa = a.parameters(), pb = b.parameters();
  const auto ba = a.buffers(), bb = b.buffers();
  if (pa.size() != pb.size() || ba.size() != bb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (!same_bits(pa[i].grad(), pb[i].grad())) return false;
  for (std::size_t i = 0; i < ba.size(); ++i)
    if (!same_bits(ba[i], bb[i])) return false;
  return true;
}

}  // namespace remat_examples::torch_models
