#pragma once
// eg::tensor on the wire (remat::dist::wire_traits, <remat/dist/wire.hpp>): its shape is
// {rows, cols}, its bytes its buffer's, and a received tensor is made through the rank's backend
// (counted, as every tensor). The empty shape makes a 1 x 1 tensor (a scalar), zero.

#include <cstdint>
#include <stdexcept>
#include <vector>

#include <eigen/tensor.hpp>

#include <remat/dist/wire.hpp>

template <>
struct remat::dist::wire_traits<eg::tensor> {
  static std::vector<std::int64_t> shape(const eg::tensor& t) {
    return {static_cast<std::int64_t>(t.rows()), static_cast<std::int64_t>(t.cols())};
  }
  static eg::tensor make(const std::vector<std::int64_t>& s, eg::backend& b) {
    if (s.empty()) return eg::tensor::zeros(b, 1, 1);
    if (s.size() != 2)
      throw std::invalid_argument("eg::tensor: a shape of 2 dimensions on the wire");
    return eg::tensor::uninitialized(b, static_cast<eg::index>(s[0]), static_cast<eg::index>(s[1]));
  }
  static void* data(eg::tensor& t) { return t.data(); }
  static const void* data(const eg::tensor& t) { return t.data(); }
  static remat::bytes size(const eg::tensor& t) { return t.bytes(); }
};
