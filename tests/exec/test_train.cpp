// The batch's targets reach the loss (run(schedule, input, targets), profile_* with sample
// targets), the loss value comes back (run_result::loss), train_step zeroes, runs and updates,
// for_each_layer visits every layer, and a chain layer trains inside a DAG model through
// as_graph_layer, with bitwise the gradients of store-all.
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <doctest/doctest.h>

#include <remat/exec.hpp>
#include <remat/remat.hpp>

#include "graph_schedules.hpp"

using namespace remat;
using remat::exec::host_backend;

namespace {

/// A tensor with the optional members: item() (the loss value) and += (as_graph_layer's sums).
struct vec {
  host_backend::buffer buf;
  int n = 0;
  static vec make(host_backend& b, int n) { return {b.allocate(remat::bytes{4} * n), n}; }
  [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
  [[nodiscard]] float* data() const { return buf.as<float>(); }
  float& operator[](int i) const { return data()[i]; }
  [[nodiscard]] float item() const { return (*this)[0]; }
  vec& operator+=(const vec& c) {
    for (int i = 0; i < n; ++i) (*this)[i] = (*this)[i] + c[i];
    return *this;
  }
};

using targets = std::vector<float>;

struct no_context {
  [[nodiscard]] remat::bytes bytes() const { return 0; }
};

/// y = tanh(w x), a chain layer with a parameter, zero_grad and an SGD step.
struct scale {
  float w = 0.5f, gw = 0.0f;
  int zeroed = 0, updated = 0;
  using context = no_context;
  vec forward(const vec& x, host_backend& b) {
    vec y = vec::make(b, x.n);
    for (int i = 0; i < x.n; ++i) y[i] = std::tanh(w * x[i]);
    return y;
  }
  vec forward_save(const vec& x, context&, host_backend& b) { return forward(x, b); }
  vec backward(const vec& x, const vec& y, const context&, const vec& dy, host_backend& b) {
    vec dx = vec::make(b, x.n);
    for (int i = 0; i < x.n; ++i) {
      const float g = dy[i] * (1 - y[i] * y[i]);
      gw += g * x[i];
      dx[i] = g * w;
    }
    return dx;
  }
  void zero_grad() {
    gw = 0;
    ++zeroed;
  }
  void sgd(float lr) {
    w -= lr * gw;
    ++updated;
  }
};

/// L = sum (x - t)^2 / n: takes the batch's targets only (no forward without them).
struct mse {
  int backward_calls = 0;
  using context = no_context;
  static vec loss(const vec& x, const targets& t, host_backend& b) {
    vec y = vec::make(b, 1);
    float s = 0;
    for (int i = 0; i < x.n; ++i)
      s += (x[i] - t[static_cast<std::size_t>(i)]) * (x[i] - t[static_cast<std::size_t>(i)]);
    y[0] = s / static_cast<float>(x.n);
    return y;
  }
  vec forward(const vec& x, const targets& t, host_backend& b) { return loss(x, t, b); }
  vec forward_save(const vec& x, const targets& t, context&, host_backend& b) {
    return loss(x, t, b);
  }
  vec backward(const vec& x, const vec&, const context&, const targets& t, host_backend& b) {
    ++backward_calls;
    vec dx = vec::make(b, x.n);
    for (int i = 0; i < x.n; ++i)
      dx[i] = 2 * (x[i] - t[static_cast<std::size_t>(i)]) / static_cast<float>(x.n);
    return dx;
  }
};

/// The graph loss with targets: sum over its inputs of mse(x_j, t).
struct graph_mse {
  using context = no_context;
  using inputs = std::span<const vec* const>;
  vec forward(inputs x, const targets& t, host_backend& b) { return mse::loss(*x[0], t, b); }
  vec forward_save(inputs x, const targets& t, context&, host_backend& b) {
    return mse::loss(*x[0], t, b);
  }
  void backward(inputs x, const vec*, const context& c, const targets& t,
                std::span<std::optional<vec>> dx, host_backend& b) {
    vec d = mse{}.backward(*x[0], *x[0], c, t, b);
    if (dx[0])
      *dx[0] += d;
    else
      dx[0] = std::move(d);
  }
  [[nodiscard]] exec::backward_needs backward_reads() const { return {true, false}; }
};

/// y = x_0 + x_1, a graph layer whose backward reads nothing.
struct graph_add {
  using context = no_context;
  using inputs = std::span<const vec* const>;
  vec forward(inputs x, host_backend& b) {
    vec y = vec::make(b, x[0]->n);
    for (int i = 0; i < y.n; ++i) y[i] = (*x[0])[i] + (*x[1])[i];
    return y;
  }
  vec forward_save(inputs x, context&, host_backend& b) { return forward(x, b); }
  void backward(inputs, const vec*, const context&, const vec& dy, std::span<std::optional<vec>> dx,
                host_backend& b) {
    for (auto& g : dx) {
      if (!g) {
        g = vec::make(b, dy.n);
        for (int i = 0; i < dy.n; ++i) (*g)[i] = dy[i];
      } else {
        for (int i = 0; i < dy.n; ++i) (*g)[i] = (*g)[i] + dy[i];
      }
    }
  }
  [[nodiscard]] exec::backward_needs backward_reads() const { return {false, false}; }
};

constexpr int width = 6;

vec input(host_backend& b) {
  vec x = vec::make(b, width);
  for (int i = 0; i < width; ++i) x[i] = 0.25f * static_cast<float>(i) - 0.6f;
  return x;
}
targets batch_targets(float shift) {
  targets t;
  for (int i = 0; i < width; ++i) t.push_back(shift + 0.1f * static_cast<float>(i));
  return t;
}
std::vector<float> values(const vec& v) { return {v.data(), v.data() + v.n}; }

using chain_model = std::tuple<scale, scale, scale, mse>;
chain_model make_chain() { return {scale{0.9f}, scale{-0.7f}, scale{1.3f}, mse{}}; }

/// The parameter gradients and the input gradient of one run.
struct grads {
  std::vector<float> gw, dx;
  double loss = 0;
  friend bool operator==(const grads&, const grads&) = default;
};
template <class Model>
grads gradients_of(Model& m, const vec& dx, double loss) {
  grads g{{}, values(dx), loss};
  exec::for_each_layer(m, [&](auto& layer) {
    if constexpr (requires { layer.gw; }) g.gw.push_back(layer.gw);
  });
  return g;
}

}  // namespace

TEST_CASE(
    "train: the targets reach a chain model's loss, forward and backward; the loss value comes "
    "back") {
  host_backend prof;
  chain_model pm = make_chain();
  const vec sample = input(prof);
  auto c =
      exec::profile_chain(pm, sample, batch_targets(0.0f), prof, {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(c.ok(), c.message());
  const auto full = *store_all{}.solve(*c, unlimited_bytes);
  // A budget that makes rotor recompute: below store-all's peak.
  const bytes budget = full.predicted_peak - 4 * width;
  auto plan = rotor{.slots = 0}.solve(*c, budget);
  REQUIRE_MESSAGE(plan.ok(), plan.message());
  CHECK(plan->ops.size() > full.ops.size());

  auto step = [&](const schedule& s, const targets& t, bytes b_budget) {
    chain_model m = make_chain();
    host_backend b(b_budget);
    exec::executor ex(m, *c, b);
    auto r = ex.run(s, input(b), t);
    REQUIRE_MESSAGE(r.ok(), r.message());
    REQUIRE(r->loss.has_value());
    CHECK(r->measured_peak <= b_budget);
    return gradients_of(m, r->input_gradient, *r->loss);
  };
  const targets t1 = batch_targets(0.0f), t2 = batch_targets(0.5f);
  const grads ref1 = step(full, t1, unlimited_bytes), ref2 = step(full, t2, unlimited_bytes);
  // The recomputing plan gives store-all's bits, for each batch's targets.
  CHECK(step(*plan, t1, budget) == ref1);
  CHECK(step(*plan, t2, budget) == ref2);
  // The targets did reach the loss: other targets, other loss and gradients.
  CHECK(ref1.loss != ref2.loss);
  CHECK(ref1.gw != ref2.gw);
  // The loss value is the loss's output: computed here by hand for the first targets.
  {
    host_backend b;
    chain_model m = make_chain();
    vec x = input(b);
    vec a = std::get<0>(m).forward(x, b), y = std::get<1>(m).forward(a, b),
        z = std::get<2>(m).forward(y, b);
    CHECK(ref1.loss == static_cast<double>(mse::loss(z, t1, b).item()));
  }
}

TEST_CASE("train: a tensor without item() gives no loss value") {
  struct plain {
    host_backend::buffer buf;
    [[nodiscard]] remat::bytes bytes() const { return buf.size(); }
  };
  static_assert(!exec::ScalarTensor<plain>);
  static_assert(exec::ScalarTensor<vec>);
  static_assert(exec::AddableTensor<vec>);
}

TEST_CASE(
    "train: train_step zeroes the gradients, runs the plan and updates every layer once per step") {
  host_backend prof;
  chain_model pm = make_chain();
  auto c = exec::profile_chain(pm, input(prof), batch_targets(0.0f), prof,
                               {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  const auto full = *store_all{}.solve(*c, unlimited_bytes);
  const auto plan = *rotor{.slots = 0}.solve(*c, full.predicted_peak - 4 * width);
  chain_model m = make_chain();
  host_backend b(full.predicted_peak);
  exec::executor ex(m, *c, b);
  // A reference model stepped by hand: zero, store-all run, SGD.
  chain_model ref = make_chain();
  host_backend rb;
  exec::executor rex(ref, *c, rb);
  const float lr = 0.1f;
  auto sgd = [&](auto& layer) {
    if constexpr (requires { layer.sgd(lr); }) layer.sgd(lr);
  };
  std::vector<double> losses;
  for (int s = 1; s <= 3; ++s) {
    const targets t = batch_targets(0.2f * static_cast<float>(s));
    auto r = exec::train_step(ex, plan, input(b), t, sgd);
    REQUIRE_MESSAGE(r.ok(), r.message());
    losses.push_back(*r->loss);
    exec::zero_grad(ref);
    auto rr = rex.run(full, input(rb), t);
    REQUIRE(rr.ok());
    exec::for_each_layer(ref, sgd);
    CHECK(gradients_of(m, r->input_gradient, *r->loss) ==
          gradients_of(ref, rr->input_gradient, *rr->loss));
    // Each scale layer: zeroed once per step (profiling used another model), updated once.
    exec::for_each_layer(m, [&](auto& layer) {
      if constexpr (requires { layer.zeroed; }) {
        CHECK(layer.zeroed == s);
        CHECK(layer.updated == s);
      }
    });
  }
  CHECK(std::get<0>(m).w == std::get<0>(ref).w);
  CHECK(std::get<0>(m).w != 0.9f);
  // A failed run updates nothing: a budget below the plan's peak.
  b.set_budget(plan.predicted_peak - 1);
  const float w = std::get<0>(m).w;
  auto failed = exec::train_step(ex, plan, input(b), batch_targets(0.0f), sgd);
  CHECK_FALSE(failed.ok());
  CHECK(std::get<0>(m).w == w);
  CHECK(std::get<0>(m).updated == 3);
}

namespace {
/// A host backend that behaves as if its work were queued, as the CUDA backend's is: every
/// allocation marks work pending, synchronize() finishes it (a SynchronizingBackend).
struct queued_backend : host_backend {
  using host_backend::host_backend;
  static inline bool pending = false;
  static inline int syncs = 0;
  [[nodiscard]] buffer allocate(bytes n) {
    pending = true;
    return host_backend::allocate(n);
  }
  void synchronize() {
    pending = false;
    ++syncs;
  }
};
static_assert(exec::SynchronizingBackend<queued_backend>);
static_assert(!exec::SynchronizingBackend<host_backend>);

/// A scale layer whose host-side hooks check that no work is pending when they run.
struct host_hook_scale : scale {
  void zero_grad() {
    CHECK_FALSE(queued_backend::pending);
    scale::zero_grad();
  }
};
}  // namespace

TEST_CASE("train: the profiler and train_step call zero_grad and update with no work pending") {
  using model = std::tuple<host_hook_scale, host_hook_scale, mse>;
  auto make = [] { return model{{{0.9f}}, {{-0.7f}}, {}}; };
  queued_backend prof;
  model pm = make();
  auto c = exec::profile_chain(pm, input(prof), batch_targets(0.0f), prof,
                               {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(c.ok(), c.message());
  CHECK(std::get<0>(pm).zeroed == 1);
  const auto plan = *rotor{.slots = 0}.solve(*c, unlimited_bytes);
  model m = make();
  queued_backend b;
  exec::executor ex(m, *c, b);
  int updates = 0;
  for (int s = 0; s < 2; ++s) {
    queued_backend::pending = true;  // the last step's update queued work
    auto r = exec::train_step(ex, plan, input(b), batch_targets(0.1f), [&](auto& layer) {
      CHECK_FALSE(queued_backend::pending);
      if constexpr (requires { layer.sgd(0.1f); }) layer.sgd(0.1f), ++updates;
    });
    REQUIRE_MESSAGE(r.ok(), r.message());
  }
  CHECK(updates == 4);
  CHECK(std::get<1>(m).zeroed == 2);
}

namespace {
/// L = sum x^2 / 2 against no targets.
struct half_square {
  using context = no_context;
  vec forward(const vec& x, host_backend& b) {
    vec y = vec::make(b, 1);
    y[0] = 0;
    for (int i = 0; i < x.n; ++i) y[0] += x[i] * x[i] / 2;
    return y;
  }
  vec forward_save(const vec& x, context&, host_backend& b) { return forward(x, b); }
  vec backward(const vec& x, const vec&, const context&, host_backend& b) {
    vec dx = vec::make(b, x.n);
    for (int i = 0; i < x.n; ++i) dx[i] = x[i];
    return dx;
  }
};
}  // namespace

TEST_CASE("train: train_step without targets, for a loss that takes none") {
  using model = std::tuple<scale, scale, half_square>;
  host_backend b;
  model m{scale{0.9f}, scale{-0.7f}, {}};
  auto c = exec::profile_chain(m, input(b), b, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  const auto plan = *store_all{}.solve(*c, unlimited_bytes);
  exec::executor ex(m, *c, b);
  double last = 1e30;
  for (int s = 1; s <= 3; ++s) {
    auto r = exec::train_step(ex, plan, input(b), [](auto& layer) {
      if constexpr (requires { layer.sgd(0.5f); }) layer.sgd(0.5f);
    });
    REQUIRE_MESSAGE(r.ok(), r.message());
    REQUIRE(r->loss.has_value());
    CHECK(*r->loss < last);  // the same batch each step: SGD lowers its loss
    last = *r->loss;
    CHECK(std::get<1>(m).updated == s);
    CHECK(std::get<1>(m).zeroed == s + 1);  // the profiler zeroed it once too
  }
}

TEST_CASE(
    "train: for_each_layer visits every layer of tuples, vectors, unique_ptrs and DAG models") {
  std::vector<scale> v(3);
  std::vector<std::unique_ptr<scale>> p;
  for (int i = 0; i < 4; ++i) p.push_back(std::make_unique<scale>());
  int seen = 0;
  exec::for_each_layer(v, [&](scale& s) {
    s.gw = 1;
    ++seen;
  });
  exec::for_each_layer(p, [&](scale& s) {
    s.gw = 1;
    ++seen;
  });
  CHECK(seen == 7);
  exec::zero_grad(v);
  exec::zero_grad(p);
  for (const auto& s : v) CHECK((s.gw == 0 && s.zeroed == 1));
  for (const auto& s : p) CHECK((s->gw == 0 && s->zeroed == 1));
  chain_model t = make_chain();
  exec::zero_grad(t);  // mse has no zero_grad: skipped
  CHECK(std::get<2>(t).zeroed == 1);
  using owned = exec::as_graph_layer<std::unique_ptr<scale>>;
  exec::dag_model<std::tuple<exec::as_graph_layer<scale>, owned, graph_mse>> d{
      {exec::as_graph_layer<scale>{}, owned{std::make_unique<scale>()}, graph_mse{}},
      {{"a", {"input"}}, {"b", {"a"}}, {"loss", {"b"}}}};
  int kinds = 0;
  exec::for_each_layer(d, [&](auto& layer) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(layer)>, scale>) ++kinds;
  });
  CHECK(kinds == 2);
  exec::zero_grad(d);
  CHECK(std::get<1>(d.layers).layer->zeroed == 1);
}

namespace {
// a = scale(input), b = scale(a), c = add(a, b), loss = mse(c, targets): a's gradient has two
// contributions, one from the chain layer's backward through the adapter (added with +=).
using dag = exec::dag_model<
    std::tuple<exec::as_graph_layer<scale>, exec::as_graph_layer<scale>, graph_add, graph_mse>>;
dag make_dag() {
  return {{{scale{0.8f}}, {scale{-1.1f}}, {}, {}},
          {{"a", {"input"}}, {"b", {"a"}}, {"c", {"a", "b"}}, {"loss", {"c"}}}};
}
}  // namespace

TEST_CASE(
    "train: a chain layer trains in a DAG model (as_graph_layer), bitwise as store-all, with "
    "targets") {
  host_backend prof;
  dag pm = make_dag();
  auto f = exec::profile_dag(pm, input(prof), batch_targets(0.0f), prof,
                             {.repetitions = 1, .warmup = 0});
  REQUIRE_MESSAGE(f.ok(), f.message());
  // The adapter's backward reads its input and its output.
  CHECK(f->ops[1].backward_reads == std::vector<std::string>{"a", "output"});
  const graph g = *build_graph(*f);
  const schedule full{store_all_program(g), 0, 0};
  const schedule recompute = toy::recompute_all(g, 0);
  REQUIRE(sim::simulate(g, recompute).valid);
  REQUIRE(toy::recomputes(g, recompute));
  auto step = [&](const schedule& s, const targets& t) {
    dag m = make_dag();
    host_backend b;
    exec::executor ex(m, g, b);
    auto r = ex.run(s, input(b), t);
    REQUIRE_MESSAGE(r.ok(), r.message());
    REQUIRE(r->loss.has_value());
    return gradients_of(m, r->input_gradient, *r->loss);
  };
  const targets t1 = batch_targets(0.0f), t2 = batch_targets(-0.4f);
  const grads ref1 = step(full, t1), ref2 = step(full, t2);
  CHECK(ref1.gw.size() == 2);
  CHECK(step(recompute, t1) == ref1);
  CHECK(step(recompute, t2) == ref2);
  CHECK(ref1.gw != ref2.gw);
  CHECK(ref1.loss != ref2.loss);
}

TEST_CASE(
    "train: an update that says it updated no layer fails the step, and says what update gets") {
  host_backend prof;
  dag pm = make_dag();
  auto f = exec::profile_dag(pm, input(prof), batch_targets(0.0f), prof,
                             {.repetitions = 1, .warmup = 0});
  REQUIRE(f.ok());
  const graph g = *build_graph(*f);
  const schedule full{store_all_program(g), 0, 0};
  dag m = make_dag();
  host_backend b;
  exec::executor ex(m, g, b);
  // Written for the adapter (as_graph_layer::layer): update receives the scale inside, so it
  // matches no layer, and before the check five such steps trained nothing without a word.
  auto for_the_adapter = [&](auto& layer) {
    if constexpr (requires { layer.layer.sgd(0.1f); }) {
      layer.layer.sgd(0.1f);
      return true;
    }
    return false;
  };
  auto wrong = exec::train_step(ex, full, input(b), batch_targets(0.1f), for_the_adapter);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.code() == status::execution_error);
  CHECK(wrong.message().find("returned false for every layer") != std::string::npos);
  CHECK(wrong.message().find("not the adapter") != std::string::npos);
  CHECK(std::get<0>(m.layers).layer.updated == 0);
  // The same update written for the layer itself trains, and the check passes.
  auto right = [&](auto& layer) {
    if constexpr (requires { layer.sgd(0.1f); }) {
      layer.sgd(0.1f);
      return true;
    }
    return false;
  };
  auto ok = exec::train_step(ex, full, input(b), batch_targets(0.1f), right);
  REQUIRE_MESSAGE(ok.ok(), ok.message());
  CHECK(std::get<0>(m.layers).layer.updated == 1);
  CHECK(std::get<1>(m.layers).layer.updated == 1);
}

TEST_CASE(
    "train: an op that gives a chain layer (as_graph_layer) two inputs is refused, naming the op") {
  dag m = make_dag();
  m.ops[1].inputs = {"input", "a"};
  host_backend b;
  auto f = exec::profile_dag(m, input(b), batch_targets(0.0f), b);
  REQUIRE_FALSE(f.ok());
  CHECK(f.err().code == status::invalid_problem);
  CHECK(f.message().find(
            "op 'b' (ops[1]) runs a chain layer (as_graph_layer), which takes one input, but it "
            "lists 2") != std::string::npos);
}

namespace named_reads {
// After a using-declaration, a member named backward_reads() of the type backward_needs compiles
// (the type used to be named backward_reads, which this declaration would have redeclared).
using remat::exec::backward_needs;
struct op {
  [[nodiscard]] backward_needs backward_reads() const { return {false, true}; }
};
}  // namespace named_reads

TEST_CASE(
    "train: a graph layer declares `backward_needs backward_reads() const` after a "
    "using-declaration") {
  CHECK(named_reads::op{}.backward_reads() == exec::backward_needs{false, true});
}

namespace {
/// scale with a name shared by every layer of its kind, which throws once `armed`.
struct twin : scale {
  static inline bool armed = false;
  [[nodiscard]] std::string_view name() const { return "twin"; }
  vec forward(const vec& x, host_backend& b) {
    if (armed) throw std::runtime_error("twin failed");
    return scale::forward(x, b);
  }
  vec forward_save(const vec& x, context& c, host_backend& b) {
    if (armed) throw std::runtime_error("twin failed");
    return scale::forward_save(x, c, b);
  }
};
}  // namespace

TEST_CASE("train: executor errors name the layer by its name(), also when names repeat") {
  using model = std::tuple<twin, twin, mse>;
  host_backend b;
  model m{};
  twin::armed = false;
  auto c =
      exec::profile_chain(m, input(b), batch_targets(0.0f), b, {.repetitions = 1, .warmup = 0});
  REQUIRE(c.ok());
  // Repeated names: the chain numbers its stages ("stage 1", "stage 2"), the message adds the
  // layer's own.
  const auto plan = *store_all{}.solve(*c, unlimited_bytes);
  exec::executor ex(m, *c, b);
  twin::armed = true;
  auto r = ex.run(plan, input(b), batch_targets(0.0f));
  twin::armed = false;
  REQUIRE_FALSE(r.ok());
  CHECK(r.message().find("of layer 'twin'") != std::string::npos);
  CHECK(r.message().find("twin failed") != std::string::npos);
}
