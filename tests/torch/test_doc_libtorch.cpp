// docs/guide/libtorch.md's program, verbatim between the markers: test_torch compiles it and
// trains its five steps (without LibTorch, REMAT_HAS_TORCH unset, it compiles to nothing), and
// test_doc_snippets.cpp checks that the page shows the text below.
#if defined(REMAT_HAS_TORCH)
// LibTorch first: Debian's LibTorch logs with glog, whose CHECK macros doctest's replace.
#include <torch/torch.h>
#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_GT
#undef CHECK_GE
#undef CHECK_LT
#undef CHECK_LE

#include <iostream>

#include <doctest/doctest.h>

#include <remat/remat.hpp>
#include <remat/torch.hpp>

// The program's own includes are all included above, so they add nothing inside the namespace;
// its main is doc_libtorch::main.
namespace doc_libtorch {
// --- doc docs/guide/libtorch.md begin ---
#include <iostream>

#include <torch/torch.h>

#include <remat/remat.hpp>  // the planners
#include <remat/torch.hpp>  // remat::libtorch, the executor and the profiler

int main() {
  namespace nn = torch::nn;
  nn::Sequential net(nn::Linear(784, 1024), nn::ReLU(), nn::Dropout(0.1), nn::Linear(1024, 1024),
                     nn::ReLU(), nn::Linear(1024, 1024), nn::ReLU(), nn::Linear(1024, 10));
  nn::CrossEntropyLoss loss;
  auto model = remat::libtorch::layers_of(net, loss);  // its children, then the loss: a chain
  remat::libtorch::backend backend;                    // counts LibTorch's CPU allocations
  const torch::Tensor x = torch::randn({512, 784}), labels = torch::randint(0, 10, {512});

  auto chain = remat::exec::profile_chain(model, x, labels, backend);
  if (!chain) return std::cerr << chain.message() << "\n", 1;
  const remat::bytes budget = remat::fraction_of_store_all(*chain, 0.6);
  auto plan = remat::rotor{}.solve(*chain, budget);
  if (!plan) return std::cerr << plan.message() << "\n", 1;

  // From here on every counted byte is capped: the batch, already in use, and the plan's budget.
  backend.set_budget(backend.in_use() + budget);
  remat::exec::executor ex(model, *chain, backend);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-3));
  for (int step = 0; step < 5; ++step) {
    adam.zero_grad();
    auto run = ex.run(*plan, x, labels);  // forward and backward by the plan
    if (!run) return std::cerr << run.message() << "\n", 1;
    {
      // Adam's moments, made at its first step, are model state, not the plan's activations.
      remat::libtorch::uncounted outside_the_budget;
      adam.step();  // the parameters' .grad() are plain LibTorch's, bit for bit
    }
    std::cout << "loss " << *run->loss << ", peak " << run->measured_peak << " of "
              << plan->predicted_peak << " planned bytes\n";
  }
  return 0;
}
// --- doc end ---
}  // namespace doc_libtorch

TEST_CASE("docs/guide/libtorch.md: the program trains its five steps") {
  CHECK(doc_libtorch::main() == 0);
}
#endif
