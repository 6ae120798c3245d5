#pragma once
// LibTorch modules as the executor's chain layers: remat::libtorch::layer adapts one module (a
// torch::nn::AnyModule), layers_of(net[, loss]) a whole Sequential, and tensor_traits<at::Tensor>
// sizes tensors by the memory they hold. F_none / F_ck run under NoGradGuard, F_all keeps the
// module's local autograd graph as the context, B runs torch::autograd::backward; the generator's
// state and the module's buffers are the replayed random state, so dropout and batch norm
// recompute as plain training. Modules that cannot be chain layers are refused by name.
// docs/executor.md, "The LibTorch adapter"; docs/guide/libtorch.md.

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/Type.h>
#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <remat/core/units.hpp>
#include <remat/exec/concepts.hpp>
#include <remat/torch/backend.hpp>

namespace remat::exec {
/// LibTorch tensors: the bytes of the storage they keep alive (a view keeps its whole base).
template <>
struct tensor_traits<at::Tensor> {
  static bytes size(const at::Tensor& t) {
    if (!t.defined()) return 0;
    if (t.has_storage()) return static_cast<bytes>(t.storage().nbytes());
    return static_cast<bytes>(t.nbytes());
  }
  static double item(const at::Tensor& t) { return t.item<double>(); }
  static void add(at::Tensor& acc, const at::Tensor& c) {
    const ::torch::NoGradGuard no_grad;
    acc.add_(c);
  }
};
}  // namespace remat::exec

namespace remat::libtorch {

/// What forward_save keeps for the backward: the local autograd graph.
struct context {
  at::Tensor x;           ///< the input as autograd's leaf (shares the input's storage)
  at::Tensor y;           ///< the output in the graph (shares the output's storage)
  remat::bytes held = 0;  ///< bytes the forward left allocated besides its output
  [[nodiscard]] remat::bytes bytes() const noexcept { return held; }
};

/// A layer's replayed state: the default CPU generator's and the module's buffers (copies kept
/// outside the budget).
struct replay_state {
  std::vector<std::uint8_t> generator;
  std::vector<at::Tensor> buffers;
};

namespace detail {
/// "torch::nn::Conv2dImpl" -> "Conv2d"; "my::BlockImpl" -> "Block", "my::block_impl" -> "block".
inline std::string short_type(const ::torch::nn::Module& m) {
  std::string s = m.name();
  if (const auto colon = s.rfind("::"); colon != std::string::npos) s.erase(0, colon + 2);
  for (const std::string suffix : {"Impl", "_impl"})
    if (s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0)
      s.erase(s.size() - suffix.size());
  return s;
}
inline std::string shape(const at::Tensor& t) {
  std::string s = "[";
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.dim()); ++i)
    s += (i ? ", " : "") + std::to_string(t.size(static_cast<std::int64_t>(i)));
  return s + "]";
}
}  // namespace detail

/// One LibTorch module as a chain layer (see the top of this file). Copies share the module.
class layer {
 public:
  using context = libtorch::context;

  /// `name` appears in profiles and errors; `loss`: the last layer, whose output is the scalar
  /// loss (its forward takes (x) or (x, targets)).
  /// `input_gradient`: whether the backward computes the gradient of the input (layers_of makes
  /// the model's first layer without it by default: layers_options).
  layer(::torch::nn::AnyModule module, std::string name, bool loss = false,
        bool input_gradient = true)
      : module_(std::move(module)),
        name_(std::move(name)),
        loss_(loss),
        input_gradient_(input_gradient) {
    if (module_.is_empty())
      throw std::invalid_argument("remat::libtorch::layer '" + name_ + "': the module is empty");
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] bool is_loss() const noexcept { return loss_; }
  [[nodiscard]] std::shared_ptr<::torch::nn::Module> module() const { return module_.ptr(); }

  // --- the executor's calls (exec/concepts.hpp) --------------------------------------------------

  template <class B>
  at::Tensor forward(const at::Tensor& x, B& b) {
    return run(x, nullptr, nullptr, b);
  }
  template <class B>
  at::Tensor forward(const at::Tensor& x, const at::Tensor& targets, B& b) {
    return run(x, &targets, nullptr, b);
  }
  template <class B>
  at::Tensor forward_save(const at::Tensor& x, context& ctx, B& b) {
    return run(x, nullptr, &ctx, b);
  }
  template <class B>
  at::Tensor forward_save(const at::Tensor& x, const at::Tensor& targets, context& ctx, B& b) {
    return run(x, &targets, &ctx, b);
  }
  /// The backward; for the loss (with targets, which are then the fourth argument: the executor
  /// tells the two apart by the layer's place) the output gradient is 1.
  template <class B>
  at::Tensor backward(const at::Tensor& x, const at::Tensor&, const context& ctx,
                      const at::Tensor& dy, B&) {
    return run_backward(x, ctx, loss_ ? nullptr : &dy);
  }
  /// The loss's backward in a run without targets.
  template <class B>
  at::Tensor backward(const at::Tensor& x, const at::Tensor&, const context& ctx, B&) {
    if (!loss_)
      throw std::logic_error(
          where() + ": backward without an output gradient, but the layer is not the loss");
    return run_backward(x, ctx, nullptr);
  }

  /// The state to replay (see the top of this file).
  [[nodiscard]] replay_state random_state() const {
    const uncounted outside_budget;
    const ::torch::NoGradGuard no_grad;
    replay_state s;
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      const std::lock_guard lock(gen.mutex());
      const at::Tensor st = gen.get_state();
      s.generator.resize(static_cast<std::size_t>(st.nbytes()));
      std::memcpy(s.generator.data(), st.data_ptr(), s.generator.size());
    }
    for (const auto& buf : module_.ptr()->buffers()) s.buffers.push_back(buf.clone());
    armed_ = false;
    return s;
  }
  /// Puts the state back; the next forward is a replay, after which the generator returns to
  /// where it was before this call.
  void set_random_state(const replay_state& s) {
    const uncounted outside_budget;
    const ::torch::NoGradGuard no_grad;
    auto gen = at::detail::getDefaultCPUGenerator();
    {
      const std::lock_guard lock(gen.mutex());
      resume_ = generator_bytes(gen);
      set_generator(gen, s.generator);
    }
    armed_ = true;
    auto buffers = module_.ptr()->buffers();
    if (buffers.size() != s.buffers.size())
      throw std::logic_error(where() + ": the module's buffers changed between two forwards");
    for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(s.buffers[i]);
  }

  /// Zeroes the parameters' gradients in place, as LibTorch's Module::zero_grad().
  void zero_grad() { module_.ptr()->zero_grad(); }

 private:
  [[nodiscard]] std::string where() const { return "module '" + name_ + "'"; }

  static std::vector<std::uint8_t> generator_bytes(at::Generator& gen) {
    const at::Tensor st = gen.get_state();
    std::vector<std::uint8_t> v(static_cast<std::size_t>(st.nbytes()));
    std::memcpy(v.data(), st.data_ptr(), v.size());
    return v;
  }
  static void set_generator(at::Generator& gen, const std::vector<std::uint8_t>& v) {
    at::Tensor st =
        at::empty({static_cast<std::int64_t>(v.size())}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(st.data_ptr(), v.data(), v.size());
    gen.set_state(st);
  }
  /// After a replay's forward: the generator goes back to where it was before the replay.
  void resume() {
    if (!armed_) return;
    armed_ = false;
    const uncounted outside_budget;
    auto gen = at::detail::getDefaultCPUGenerator();
    const std::lock_guard lock(gen.mutex());
    set_generator(gen, resume_);
  }

  /// The module's forward on x (and the targets), as a tensor.
  at::Tensor call(const at::Tensor& x, const at::Tensor* targets) {
    ::torch::nn::AnyValue v = [&] {
      try {
        return targets ? module_.any_forward(x, *targets) : module_.any_forward(x);
      } catch (const c10::Error& e) {
        std::string hint;
        const std::string what = e.what_without_backtrace();
        if (what.find("argument") != std::string::npos)
          hint = loss_ ? (targets ? "; this loss is called as forward(x, targets): a loss without "
                                    "targets runs "
                                    "without them (run(schedule, input), profile_chain(model, "
                                    "sample, backend))"
                                  : "; this loss is called as forward(x): a loss that takes "
                                    "targets needs them "
                                    "(run(schedule, input, targets), profile_chain(model, sample, "
                                    "targets, backend))")
                       : "; a chain stage's forward takes one tensor (the previous stage's output)";
        throw std::runtime_error(where() + ": " + what + hint);
      }
    }();
    if (auto* t = v.try_get<at::Tensor>()) return *t;
    throw std::runtime_error(
        where() + ": its forward returns " + c10::demangle(v.type_info().name()) +
        ", not a tensor; a chain stage maps one tensor to one tensor: wrap the module in one "
        "whose forward returns the tensor the next stage reads (for a tuple, the element it "
        "needs)");
  }

  /// A view of x (or of x's storage) is copied: the output must own its memory.
  static at::Tensor own(at::Tensor y, const at::Tensor& x) {
    if (y.has_storage() && x.has_storage() && y.storage().is_alias_of(x.storage()))
      return y.clone();
    return y;
  }

  template <class B>
  at::Tensor run(const at::Tensor& x, const at::Tensor* targets, context* ctx, B& b) {
    if (!x.defined()) throw std::runtime_error(where() + ": its input is an undefined tensor");
    const auto version = x._version();
    at::Tensor y;
    if (ctx == nullptr) {
      const ::torch::NoGradGuard no_grad;
      const auto uses = x.use_count();
      const auto storage_uses = x.has_storage() ? x.storage().use_count() : 0;
      y = own(call(x, targets), x);
      resume();
      if (x.use_count() > uses || (x.has_storage() && x.storage().use_count() > storage_uses))
        throw std::runtime_error(
            where() +
            " keeps a reference to its input after its forward (a member holding x, "
            "or an output that is a view of it held elsewhere): the executor frees inputs as "
            "the plan says, so a module must not keep them; copy what it needs");
    } else {
      const ::torch::AutoGradMode grad_on(true);
      const bytes before = b.in_use();
      // The input needs a gradient unless it is the model's input (input_gradient = false), as
      // plain LibTorch's input, or not of a floating type (token ids).
      at::Tensor leaf = x.detach();
      if (input_gradient_ && leaf.is_floating_point()) leaf.requires_grad_(true);
      at::Tensor out = call(leaf, targets);
      resume();
      y = own(out.detach(), x);
      const bytes made = b.in_use() - before;
      ctx->x = std::move(leaf);
      ctx->y = std::move(out);
      ctx->held = std::max<bytes>(0, made - exec::tensor_traits<at::Tensor>::size(y));
    }
    if (x._version() != version)
      throw std::runtime_error(
          where() +
          " changed its input in place (an in-place operation such as "
          "ReLU(inplace=true) on its input): the executor keeps inputs for recomputations, "
          "so a stage must not modify its input; use the out-of-place form");
    if (loss_ && y.numel() != 1)
      throw std::runtime_error(where() + " is the loss but returns a tensor of shape " +
                               detail::shape(y) + ", not one number; reduce it (mean or sum)");
    return y;
  }

  /// The backward. The parameters' gradients are model state, not the op's memory: they are
  /// made in a state_window (torch/backend.hpp). A gradient already there (zeroed by the
  /// optimizer, or accumulated) is set aside, autograd makes the new one in place of nothing (it
  /// takes the computed tensor, no copy), and the one set aside is added into it: old + new, the
  /// sum AccumulateGrad forms, bit for bit, without a transient the size of the gradient counted
  /// as the op's.
  at::Tensor run_backward(const at::Tensor& x, const context& ctx, const at::Tensor* dy) {
    if (!ctx.y.defined())
      throw std::logic_error(where() + ": backward without the context of a forward_save");
    std::vector<at::Tensor> params = module_.ptr()->parameters(), before(params.size());
    bytes credit = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!params[i].requires_grad()) continue;
      credit += exec::tensor_traits<at::Tensor>::size(params[i]);
      before[i] = std::exchange(params[i].mutable_grad(), at::Tensor());
    }
    state_window window(credit);
    // Puts the set-aside gradients back into the new ones; the new ones are model state.
    auto settle = [&] {
      const ::torch::NoGradGuard no_grad;
      std::vector<at::Tensor> made;
      for (std::size_t i = 0; i < params.size(); ++i) {
        at::Tensor& g = params[i].mutable_grad();
        if (!before[i].defined()) {
          if (g.defined()) made.push_back(g);
        } else if (!g.defined()) {
          g = std::move(before[i]);
        } else {
          g.add_(before[i]);  // new + old: the bits of AccumulateGrad's old + new
          made.push_back(g);
          before[i] = at::Tensor();
        }
      }
      window.close(made);
    };
    if (ctx.y.requires_grad()) try {
        if (dy)
          ::torch::autograd::backward({ctx.y}, {*dy});
        else
          ::torch::autograd::backward({ctx.y});
      } catch (const c10::Error& e) {
        settle();
        throw std::runtime_error(where() + ": its backward failed: " + e.what_without_backtrace());
      }
    settle();
    if (!ctx.x.requires_grad()) return {};  // no input gradient asked for (see input_gradient)
    at::Tensor dx = ctx.x.grad();
    ctx.x.mutable_grad() = at::Tensor();
    if (!dx.defined()) {  // the output does not depend on the input
      const ::torch::NoGradGuard no_grad;
      dx = at::zeros_like(x);
    }
    return dx;
  }

  ::torch::nn::AnyModule module_;
  std::string name_;
  bool loss_ = false;
  bool input_gradient_ = true;
  mutable bool armed_ = false;        // the next forward is a replay (set_random_state)
  std::vector<std::uint8_t> resume_;  // the generator's state to return to after it
};

/// How layers_of makes a chain model.
struct layers_options {
  /// Whether the first layer computes the gradient of the model's input (plain LibTorch does not
  /// for an input that does not require one; run_result::input_gradient is then undefined).
  bool input_gradient = false;
  std::string loss_name = "loss";  ///< the loss module's name, when given apart from the Sequential
};

/// A chain model of a Sequential's children, in order; the last child is the loss.
inline std::vector<layer> layers_of(const ::torch::nn::Sequential& net,
                                    const layers_options& opt = {}) {
  std::vector<layer> out;
  const auto named = net->named_children();
  if (named.size() != net->size())
    throw std::invalid_argument(
        "remat::libtorch::layers_of: the Sequential's children and modules differ");
  const auto keys = named.keys();
  const auto modules = named.values();
  for (std::size_t i = 0; i < net->size(); ++i) {
    const std::string label = keys[i] + " (" + detail::short_type(*modules[i]) + ")";
    out.emplace_back(*(net->begin() + static_cast<std::ptrdiff_t>(i)), label, i + 1 == net->size(),
                     i > 0 || opt.input_gradient);
  }
  if (out.empty())
    throw std::invalid_argument("remat::libtorch::layers_of: the Sequential has no module");
  return out;
}

/// A chain model of a Sequential's children followed by the loss module (forward(x, targets), as
/// torch::nn::CrossEntropyLoss, or forward(x)).
template <class Loss>
requires std::constructible_from<::torch::nn::AnyModule, const Loss&> std::vector<layer> layers_of(
    const ::torch::nn::Sequential& net, const Loss& loss, const layers_options& opt = {}) {
  std::vector<layer> out;
  if (net->size() > 0) {
    out = layers_of(net, opt);
    out.back() = layer(*(net->begin() + static_cast<std::ptrdiff_t>(net->size() - 1)),
                       out.back().name(), false, net->size() > 1 || opt.input_gradient);
  }
  ::torch::nn::AnyModule any(loss);
  const std::string label = opt.loss_name + " (" + detail::short_type(*any.ptr()) + ")";
  out.emplace_back(std::move(any), label, true);
  return out;
}

}  // namespace remat::libtorch
