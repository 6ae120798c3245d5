// remat-plan --simulate: replays a given program (the chain notation or a program over the
// training graph) in the simulator within the budget, on the machine of the bandwidth options,
// and reports whether it is valid, its peak, its makespan and the first violation.

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include <remat/io/json.hpp>
#include <remat/io/solution_json.hpp>
#include <remat/io/trace.hpp>
#include <remat/schedule/notation.hpp>
#include <remat/sim/simulate.hpp>

#include "remat_plan.hpp"

namespace remat_plan {

namespace {

/// The most bytes --simulate @FILE reads: 16 MiB, millions of instructions.
constexpr std::uintmax_t max_program_bytes = std::uintmax_t{16} << 20;

/// The text of --simulate: the argument itself, or the content of the file it names after '@'.
remat::result<std::string> program_text(const std::string& arg) {
  if (arg.empty() || arg.front() != '@') return arg;
  const std::filesystem::path path = arg.substr(1);
  const std::string cannot = "cannot read program file '" + path.string() + "': ";
  auto bad = [&](const std::string& why) {
    return remat::error{remat::status::invalid_problem, cannot + why, {}};
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return bad("it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad(std::filesystem::exists(path, ec) ? "it cannot be opened" : "no such file");
  std::string text;
  std::array<char, 1 << 16> buf{};
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    text.append(buf.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_program_bytes)
      return bad("it holds more than the " + std::to_string(max_program_bytes >> 20) +
                 " MiB a program may have");
  }
  if (in.bad()) return bad("read error");
  return text;
}

/// A program --simulate replays: chain ops (the chain notation, given a chain) or instructions
/// over the training graph.
struct program {
  std::optional<std::vector<remat::chain_op>> ops;
  remat::schedule s;
};

/// The program --simulate replays: with a chain, text with an F or B word is in the chain notation;
/// any other text is a program over the graph.
remat::result<program> read_program(std::string_view text, const remat::chain* c) {
  const auto words = remat::words_of(text);
  auto invalid = [](std::string msg) {
    return remat::error{remat::status::invalid_problem, std::move(msg), {}};
  };
  const bool chain_words = std::any_of(words.begin(), words.end(), [](std::string_view w) {
    return w.front() == 'F' || w.front() == 'B';
  });
  program p;
  if (chain_words && c) {
    p.ops = remat::parse_chain_ops(text);
    if (!p.ops) return remat::parse_chain_program(c->length(), text).err();  // names the bad word
    return p;
  }
  for (std::size_t k = 0; k < words.size(); ++k) {
    const auto ins = remat::parse_instruction(words[k]);
    if (!ins) {
      std::string msg = "word " + std::to_string(k) + " '" + std::string(words[k]) +
                        "' is not an instruction of a program (C<c>, C<c>_ff, D<d>, O<d>, P<d>, "
                        "W<d>, with 0-based "
                        "node indices into the training graph)";
      if (chain_words)
        msg += "; the chain notation (F<l>_ck, B<l>, ...) needs --chain";
      else if (c)
        msg += " nor of the chain notation (F<l>_none, F<l>_ck, F<l>_all, B<l>, O<k>, P<k>, W<k>)";
      return invalid(std::move(msg));
    }
    p.s.ops.push_back(*ins);
  }
  return p;
}

/// What --simulate found, printed as text or JSON. `violation` is the first violation, or why
/// the program could not be read (then nothing ran: peak and makespan are 0).
struct replay_report {
  remat::sim::report replay;  ///< the simulator's (empty when the program was not read)
  bool valid = false;
  remat::bytes peak = 0, host_peak = 0;
  double makespan = 0;
  std::optional<std::string> violation;
  bool read = false;                        ///< the program was read (else violation says why not)
  std::optional<std::size_t> instructions;  ///< once lowered, for the chain notation
  std::optional<std::size_t> chain_ops;     ///< with a program in the chain notation
  std::optional<std::string> picture;       ///< --svg: the summary's line about the file
};

/// The machine of --simulate: instantaneous transfers, or those of the bandwidth options.
remat::machine simulated_machine(const options& o) { return o.machine_from(remat::machine{}); }

int print_replay(const options& o, const remat::chain* c, const remat::graph* g,
                 const replay_report& r) {
  if (!r.valid)
    std::cerr << "remat-plan: the program is invalid: " << r.violation.value_or("?") << '\n';
  if (o.json) {
    nlohmann::ordered_json j;
    j["status"] = r.valid ? "ok" : "invalid_schedule";
    const nlohmann::ordered_json replay = remat::io::to_json(r.replay);
    for (const auto& [key, value] : replay.items()) j[key] = value;
    if (!r.read) j["violation"] = r.violation.value_or("");
    if (c) j["chain"] = c->name;
    if (g) j["graph"] = g->name;
    j["budget_bytes"] = o.budget;
    if (o.bandwidth) j["bandwidth"] = o.bandwidth->value;
    if (o.bandwidth_d2h) j["bandwidth_d2h"] = o.bandwidth_d2h->value;
    if (o.bandwidth_h2d) j["bandwidth_h2d"] = o.bandwidth_h2d->value;
    if (r.chain_ops) j["chain_ops"] = *r.chain_ops;
    if (r.instructions) j["instructions"] = *r.instructions;
    print_json_line(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    if (c)
      std::cout << "chain     " << c->name << " (" << c->length()
                << " stages), replayed on its training graph\n";
    else if (g)
      std::cout << "graph     " << g->name << " (" << g->compute_count() << " compute nodes, "
                << g->data_count() << " data nodes)\n";
    if (r.read) {
      std::cout << "program   ";
      if (r.chain_ops) {
        std::cout << *r.chain_ops << " ops of the chain notation";
        if (r.instructions)
          std::cout << " (" << *r.instructions << " instructions on the training graph)";
      } else {
        std::cout << r.instructions.value_or(0) << " instructions";
      }
      std::cout << '\n';
    } else {
      std::cout << "program   not read\n";
    }
    std::cout << "budget    " << remat::format_bytes(o.budget) << '\n'
              << "transfers "
              << (o.bandwidth || o.bandwidth_d2h || o.bandwidth_h2d
                      ? describe_rates(simulated_machine(o).device_to_host,
                                       simulated_machine(o).host_to_device)
                      : std::string("instantaneous"))
              << '\n'
              << "valid     " << (r.valid ? "yes" : "no") << '\n';
    if (r.read) {
      std::cout << "makespan  " << remat::format_seconds(r.makespan) << " simulated\n"
                << "peak      " << remat::format_bytes(r.peak) << " simulated";
      if (r.host_peak > 0)
        std::cout << "; the host holds up to " << remat::format_bytes(r.host_peak);
      std::cout << '\n';
    }
    if (r.violation) std::cout << "violation " << *r.violation << '\n';
    if (r.picture) std::cout << *r.picture << '\n';
  }
  return r.valid ? exit_ok : exit_failed;
}

}  // namespace

/// --simulate: loads the chain or graph, reads the program and replays it.
int run_simulate(const options& o) {
  const loaded_problem lp = load_problem(o);
  const std::optional<remat::chain>& c = lp.chain;
  if (!lp.graph) return fail(o, c ? &*c : nullptr, lp.graph.err());
  const remat::graph& g = *lp.graph;
  const remat::chain* chain = c ? &*c : nullptr;
  const remat::graph* graph = c ? nullptr : &g;

  auto text = program_text(*o.simulate);
  if (!text) return fail(o, chain, text.err());
  replay_report rep;
  const auto p = read_program(*text, chain);
  if (!p) {
    rep.violation = p.err().message;
    return print_replay(o, chain, graph, rep);
  }
  const remat::sim::options opt{
      .budget = o.budget, .record_timeline = !o.svg.empty(), .hw = simulated_machine(o)};
  remat::sim::report r;
  if (p->ops) {
    // In the chain's own terms: violations name the chain op and a_k, delta_k; a break of the
    // notation's rules (lower()) is a violation too, before anything runs.
    r = remat::sim::simulate(*c, *p->ops, opt);
    rep.chain_ops = p->ops->size();
    if (const auto lowered = remat::lower(c->length(), *p->ops))
      rep.instructions = lowered->ops.size();
  } else {
    r = remat::sim::simulate(g, p->s, opt);
    rep.instructions = p->s.ops.size();
  }
  rep.read = true;
  if (o.trace) {
    // What ran, instruction by instruction (the replay in chain terms above has a point per
    // chain op): the program lowered onto the training graph, replayed with its timeline.
    remat::schedule s = p->s;
    if (p->ops) {
      // A break of the notation's rules stops the replay at its op: what ran is the ops before.
      remat::lowering_failure failure;
      auto lowered = remat::lower(c->length(), *p->ops, nullptr, &failure);
      if (!lowered) lowered = remat::lower(c->length(), std::span(*p->ops).first(failure.op));
      s = lowered ? *lowered : remat::schedule{};
    }
    remat::sim::options traced = opt;
    traced.record_timeline = true;
    const auto t = remat::sim::simulate(g, s, traced);
    if (auto e = write_trace_text(
            o,
            remat::io::chrome_trace(chain ? remat::io::trace_of(*c, s, t, "simulated", o.budget)
                                          : remat::io::trace_of(g, s, t, "simulated", o.budget))))
      return fail(o, chain, *e);
  }
  rep.replay = r;
  rep.valid = r.valid;
  rep.peak = r.peak;
  rep.host_peak = r.host_peak;
  rep.makespan = r.makespan;
  if (r.first_violation) rep.violation = r.first_violation->message;
  if (!o.svg.empty()) {
    // Also of an invalid program: the picture shows where it goes over the budget.
    // A program's replay has a point per instruction; a chain notation's, one per chain op.
    const remat::io::timeline_labels named{c ? c->name : g.name, "program"};
    auto w = write_timeline(o, r, p->ops ? named : named.with_program(g, p->s));
    if (!w) return fail(o, chain, w.err());
    rep.picture = *w;
  }
  return print_replay(o, chain, graph, rep);
}

}  // namespace remat_plan
