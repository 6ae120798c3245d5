// remat-plan: plan a chain's or a graph's training within a memory budget from the command line.
//
//   remat-plan --chain examples/chains/resnet_like.json --budget 1GiB --policy rotor [--json]
//   remat-plan --graph examples/graphs/residual_net.json --budget 4MiB --policy checkmate
//   remat-plan --chain FILE --policy auto --budget 1GiB      (a portfolio of every policy)
//   remat-plan --chain FILE --policy rotor --find-minimum    (the smallest budget)
//   remat-plan --chain FILE --budget 1GiB --simulate "F1_ck F2_all B2 F1_all B1"
//   remat-plan --chain FILE --sweep [--svg curve.svg]
//   remat-plan --multi-chain examples/multi_chains/toy.json --budget 11MiB --policy multi_chain
//   remat-plan --chain FILE --policy madpipe --processors 4 --memory 8GiB --bandwidth 12e9
//
// One command per run: plan (plan.cpp), find the minimum (find_minimum.cpp), replay a program
// (simulate.cpp), sweep every chain policy (sweep.cpp), plan chains joined at a loss
// (multi_chain.cpp) or a pipeline on several processors (pipeline.cpp); the options are read in
// options.cpp.
// docs/cli.md is the guide; --help lists every option, generated from the policy catalogue.
// Exit status: 0 planned (or a valid program), 1 planning failed or the program is invalid
// (reason on stderr), 2 usage error.

#include <exception>
#include <iostream>
#include <variant>

#include "cli.hpp"
#include "remat_plan.hpp"

int main(int argc, char** argv) {
  using namespace remat_plan;
  const auto parsed = parse_args(argc, argv);
  if (const auto* u = std::get_if<usage_error>(&parsed)) {
    std::cerr << "remat-plan: " << u->reason << "\n"
              << "usage: remat-plan (--chain FILE | --graph FILE) --budget BYTES (--policy NAME | "
                 "--simulate PROGRAM) [options], remat-plan (--chain FILE | --graph FILE) "
                 "--policy NAME --find-minimum [options], or remat-plan --chain FILE --sweep "
                 "[options]; see --help\n";
    return exit_usage;
  }
  const options& o = std::get<options>(parsed);
  if (o.help) {
    std::cout << help_text();
    return exit_ok;
  }
  try {
    // Before a solve that may be long: a trace that cannot be written fails now.
    if (o.trace)
      if (auto why = remat_cli::unwritable(*o.trace))
        return fail(o, nullptr,
                    remat::error{remat::status::invalid_problem, "--trace: " + *why, {}});
    if (!o.multi_chain_path.empty()) return run_multi_chain(o);
    if (o.processors) return run_pipeline(o);
    if (o.sweep) return run_sweep(o);
    if (o.simulate) return run_simulate(o);
    if (o.finds_minimum()) return run_find_minimum(o);
    return run_plan(o);
  } catch (const std::exception& e) {
    // Planning failures come back in result<T>; an exception here is a bug or out-of-memory.
    std::cerr << "remat-plan: internal error: " << e.what() << '\n';
    return exit_failed;
  }
}
