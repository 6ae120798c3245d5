#pragma once
// exec::adam: the Adam optimizer [Kingma15, Alg. 1] over float parameters, written once so that
// a program that manages the parameters (managed_training, exec/managed_training.hpp) and plain
// training update with the same operations in the same order, bit for bit: on the device
// (a ParameterBackend's device_adam) and on the host (the CPU's steps of an OFFMATE plan, and
// plain training's update). A parameter of n floats keeps 2n floats of state: the first moment m
// then the second v, one buffer (the k = 2 state bytes per trainable byte of a parameter plan).
// docs/executor.md, "Programs that manage parameters".

#include <cmath>
#include <cstddef>
#include <string>

// update_one is a host-and-device function where nvcc compiles it (the CUDA backend's kernel,
// exec/cuda/adam.cuh).
#if defined(__CUDACC__)
#define REMAT_HOST_DEVICE __host__ __device__
#else
#define REMAT_HOST_DEVICE
#endif

namespace remat::exec {

/// The arithmetic of Adam's step on the host: IEEE single precision, each operation rounded on
/// its own (the device's is exec/cuda/adam.cuh's, with the round-to-nearest intrinsics). A host
/// compiler that fuses a * b + c (-ffp-contract=fast with FMA instructions, e.g. -march=native)
/// may round differently: build without fusing (-ffp-contract=off) for bitwise equality.
struct adam_arithmetic {
  REMAT_HOST_DEVICE static float add(float a, float b) noexcept { return a + b; }
  REMAT_HOST_DEVICE static float sub(float a, float b) noexcept { return a - b; }
  REMAT_HOST_DEVICE static float mul(float a, float b) noexcept { return a * b; }
  REMAT_HOST_DEVICE static float div(float a, float b) noexcept { return a / b; }
  REMAT_HOST_DEVICE static float sqrt(float a) noexcept { return std::sqrt(a); }
};

/// Adam's hyperparameters, and one step over a parameter's floats. The step is PyTorch's
/// (torch.optim.Adam without amsgrad): m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
/// w -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps), with L2 weight decay
/// (g += weight_decay w) first when weight_decay > 0.
struct adam {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;

  /// State floats per parameter float (m and v).
  static constexpr int states_per_value = 2;

  /// Why these hyperparameters cannot train (empty when they can).
  [[nodiscard]] std::string problem() const {
    auto finite = [](float x) { return std::isfinite(x); };
    if (!finite(lr) || lr < 0) return "adam: lr must be a finite number >= 0";
    if (!finite(beta1) || beta1 < 0 || beta1 >= 1 || !finite(beta2) || beta2 < 0 || beta2 >= 1)
      return "adam: beta1 and beta2 must be in [0, 1)";
    if (!finite(eps) || eps <= 0) return "adam: eps must be a finite number > 0";
    if (!finite(weight_decay) || weight_decay < 0)
      return "adam: weight_decay must be a finite number >= 0";
    return {};
  }

  /// The bias corrections of step t (t >= 1): 1 - beta1^t and 1 - beta2^t, computed in double
  /// and rounded once, so every caller divides by the same floats.
  [[nodiscard]] float correction1(long t) const noexcept {
    return static_cast<float>(1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t)));
  }
  [[nodiscard]] float correction2(long t) const noexcept {
    return static_cast<float>(1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t)));
  }

  /// Step t (t >= 1, counted per parameter) on n floats: w the weight, g its gradient, states
  /// its 2n floats (m, then v). Element i depends on element i only, in a fixed order of
  /// operations: a device kernel that runs update_one per element in the same arithmetic gives
  /// the same bits.
  void step(float* w, const float* g, float* states, std::size_t n, long t) const noexcept {
    const float c1 = correction1(t), c2 = correction2(t);
    float* m = states;
    float* v = states + n;
    for (std::size_t i = 0; i < n; ++i) update_one(w[i], g[i], m[i], v[i], c1, c2);
  }

  /// One element of a step whose bias corrections are c1 and c2, in the arithmetic Ops (the
  /// host's, or the device's: one formula for both).
  template <class Ops = adam_arithmetic>
  REMAT_HOST_DEVICE void update_one(float& w, float g, float& m, float& v, float c1,
                                    float c2) const noexcept {
    if (weight_decay > 0) g = Ops::add(g, Ops::mul(weight_decay, w));
    m = Ops::add(Ops::mul(beta1, m), Ops::mul(Ops::sub(1.0f, beta1), g));
    v = Ops::add(Ops::mul(beta2, v), Ops::mul(Ops::sub(1.0f, beta2), Ops::mul(g, g)));
    const float mhat = Ops::div(m, c1);
    const float vhat = Ops::div(v, c2);
    w = Ops::sub(w, Ops::div(Ops::mul(lr, mhat), Ops::add(Ops::sqrt(vhat), eps)));
  }
};

}  // namespace remat::exec
