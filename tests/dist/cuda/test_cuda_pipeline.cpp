// The MPI pipeline with device tensors (remat/dist/cuda.hpp, remat/dist/nccl.hpp) under mpirun,
// one mode per CTest entry (tests/CMakeLists.txt). The model is the Eigen residual stack with
// dropout, each layer wrapped to take and give tensors in the CUDA backend's device memory (it
// copies them to the host, runs the Eigen layer, copies the result back): the tensors that
// travel between ranks and stages are device memory, moved by the transport.
//   staged contiguous   2 ranks, cuda_staged_transport, stages {1}, {2}: two steps' gradients and
//                       parameters bit for bit those of one process on the host
//   staged local        2 ranks, stages {1, 2} on rank 0 (a device-to-device hand-over), {3} on 1
//   nccl contiguous     the same with nccl_transport (a GPU per rank; skipped with fewer)
//   nccl shared         nccl_transport with both ranks on device 0: every rank's error says that
//                       NCCL needs one GPU per rank
// Without a usable CUDA device every rank says so and exits 77 (CTest: skipped).

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <eigen/models.hpp>

#include <remat/dist/cuda.hpp>
#include <remat/dist/mpi.hpp>
#if defined(REMAT_HAS_NCCL)
#include <remat/dist/nccl.hpp>
#endif
#include <remat/exec/cuda/backend.hpp>
#include <remat/exec/cuda/device.hpp>
#include <remat/exec/profiler.hpp>
#include <remat/policy/one_f_one_b.hpp>
#include <remat/problem/pipeline.hpp>
#include <remat/schedule/pipeline.hpp>

namespace {

namespace cu = remat::cuda;
constexpr eg::index dv_width = 16, dv_hidden = 32, dv_batch = 4;
constexpr int dv_micro_batches = 4;

/// A row-major float matrix in the backend's device pool.
struct dv_tensor {
  cu::device_buffer buf;
  eg::index rows = 0, cols = 0;
  [[nodiscard]] remat::bytes bytes() const noexcept { return buf.size(); }
};

eg::tensor dv_to_host(const dv_tensor& x, cu::backend& b, eg::backend& hb) {
  eg::tensor h = eg::tensor::uninitialized(hb, x.rows, x.cols);
  if (x.bytes() > 0) {
    REMAT_CUDA_CHECK(cudaMemcpyAsync(h.data(), x.buf.data(), static_cast<std::size_t>(x.bytes()),
                                     cudaMemcpyDeviceToHost, b.stream()));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  }
  return h;
}

dv_tensor dv_to_device(const eg::tensor& h, cu::backend& b) {
  dv_tensor d{b.allocate(h.bytes()), h.rows(), h.cols()};
  if (h.bytes() > 0) {
    REMAT_CUDA_CHECK(cudaMemcpyAsync(d.buf.data(), h.data(), static_cast<std::size_t>(h.bytes()),
                                     cudaMemcpyHostToDevice, b.stream()));
    REMAT_CUDA_CHECK(cudaStreamSynchronize(b.stream()));
  }
  return d;
}

/// An Eigen layer on device tensors: the same arithmetic, the data copied to the host and back.
class dv_layer {
 public:
  using context = eg::context;
  explicit dv_layer(std::unique_ptr<eg::layer> l) : l_(std::move(l)) {}
  [[nodiscard]] eg::layer& inner() noexcept { return *l_; }
  [[nodiscard]] std::string name() const { return l_->name(); }

  dv_tensor forward(const dv_tensor& x, cu::backend& b) {
    return dv_to_device(l_->forward(dv_to_host(x, b, hb_), hb_), b);
  }
  dv_tensor forward_save(const dv_tensor& x, context& ctx, cu::backend& b) {
    return dv_to_device(l_->forward_save(dv_to_host(x, b, hb_), ctx, hb_), b);
  }
  dv_tensor backward(const dv_tensor& x, const dv_tensor& y, const context& ctx,
                     const dv_tensor& dy, cu::backend& b) {
    return dv_to_device(l_->backward(dv_to_host(x, b, hb_), dv_to_host(y, b, hb_), ctx,
                                     dv_to_host(dy, b, hb_), hb_),
                        b);
  }
  dv_tensor backward(const dv_tensor& x, const dv_tensor& y, const context& ctx, cu::backend& b) {
    return dv_to_device(l_->backward(dv_to_host(x, b, hb_), dv_to_host(y, b, hb_), ctx, hb_), b);
  }
  [[nodiscard]] eg::rng_state random_state() const { return l_->random_state(); }
  void set_random_state(const eg::rng_state& s) { l_->set_random_state(s); }
  void zero_grad() { l_->zero_grad(); }

 private:
  std::unique_ptr<eg::layer> l_;
  eg::backend hb_;  // the host temporaries of the Eigen layer
};

using dv_model = std::vector<std::unique_ptr<dv_layer>>;

dv_model dv_wrap(eg::model m) {
  dv_model out;
  for (auto& l : m) out.push_back(std::make_unique<dv_layer>(std::move(l)));
  return out;
}

eg::model dv_host_model() {
  return eg::make_residual_stack(2, dv_width, dv_hidden, dv_batch, 7, 0.1f);
}

eg::tensor dv_input(int step, int m, eg::backend& b) {
  return eg::make_input(b, dv_batch, dv_width, static_cast<std::uint64_t>(1000 + 100 * step + m));
}

int dv_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace

template <>
struct remat::dist::wire_traits<dv_tensor> {
  static constexpr bool on_device = true;
  static std::vector<std::int64_t> shape(const dv_tensor& t) { return {t.rows, t.cols}; }
  static dv_tensor make(const std::vector<std::int64_t>& s, cu::backend& b) {
    if (s.empty()) {  // a scalar, zero
      dv_tensor t{b.allocate(sizeof(float)), 1, 1};
      REMAT_CUDA_CHECK(cudaMemsetAsync(t.buf.data(), 0, sizeof(float), b.stream()));
      return t;
    }
    if (s.size() != 2) throw std::invalid_argument("dv_tensor: a shape of 2 dimensions");
    const auto rows = static_cast<eg::index>(s[0]), cols = static_cast<eg::index>(s[1]);
    return {b.allocate(static_cast<remat::bytes>(rows * cols) *
                       static_cast<remat::bytes>(sizeof(float))),
            rows, cols};
  }
  static void* data(dv_tensor& t) { return t.buf.data(); }
  static const void* data(const dv_tensor& t) { return t.buf.data(); }
  static remat::bytes size(const dv_tensor& t) { return t.bytes(); }
};

namespace {

/// Two steps of a plan over `lasts` (stage s on rank `ranks[s - 1]`) with transport X, against one
/// process on the host: true when every gradient and parameter of this rank's layers is bitwise
/// the reference's.
template <class X, class MakeTransport>
bool dv_bitwise(std::vector<int> lasts, std::vector<int> ranks, MakeTransport make_transport,
                int device) {
  const int rank = dv_rank();
  eg::model host = dv_host_model();
  eg::model ref = dv_host_model();
  eg::backend hb;
  remat::exec::profile_options same;
  same.fixed_times.assign(host.size(), {1e-3, 2e-3});
  auto c = remat::exec::profile_chain(host, eg::make_input(hb, dv_batch, dv_width, 1), hb, same);
  if (!c) throw std::runtime_error(c.message());
  remat::pipeline_problem problem;
  problem.layers = *c;
  problem.processors = 2;
  std::vector<remat::pipeline_stage> stages = remat::contiguous_stages(lasts);
  for (std::size_t s = 0; s < stages.size(); ++s) stages[s].processor = ranks[s];
  auto plan = remat::one_f_one_b_star_fit(problem, stages);
  if (!plan) throw std::runtime_error(plan.message());

  cu::backend b(64 << 20, device);
  dv_model m = dv_wrap(std::move(host));
  remat::dist::mpi_pipeline<cu::backend, dv_model, dv_tensor, X> pipe(
      MPI_COMM_WORLD, m, problem, *plan, dv_micro_batches, b, {}, make_transport(b));
  bool ok = true;
  for (int step = 0; step < 2; ++step) {
    auto r =
        pipe.step([&](int mb, cu::backend& bb) { return dv_to_device(dv_input(step, mb, hb), bb); },
                  remat::dist::no_targets_fn{}, [](dv_layer& l) { l.inner().sgd_step(0.05f); });
    if (!r) {
      std::printf("rank %d: step %d failed: %s\n", rank, step, r.message().c_str());
      return false;
    }
    REMAT_CUDA_CHECK(cudaDeviceSynchronize());
    eg::zero_grad(ref);
    for (int mb = 0; mb < dv_micro_batches; ++mb)
      (void)eg::backprop(ref, dv_input(step, mb, hb), hb);
    bool same_bits = true;
    std::size_t floats = 0;
    for (int s : r->stages) {
      const auto& st = plan->stages[static_cast<std::size_t>(s - 1)];
      for (int l = st.first; l <= st.last; ++l) {
        const auto i = static_cast<std::size_t>(l - 1);
        auto pg = m[i]->inner().parameters();
        auto rg = ref[i]->parameters();
        for (std::size_t k = 0; k < pg.size(); ++k) {
          same_bits = same_bits && eg::bitwise_equal(pg[k].grad, rg[k].grad);
          floats += static_cast<std::size_t>(pg[k].grad.size());
        }
      }
    }
    eg::sgd_step(ref, 0.05f);
    for (int s : r->stages) {
      const auto& st = plan->stages[static_cast<std::size_t>(s - 1)];
      for (int l = st.first; l <= st.last; ++l) {
        const auto i = static_cast<std::size_t>(l - 1);
        auto pv = m[i]->inner().parameters();
        auto rv = ref[i]->parameters();
        for (std::size_t k = 0; k < pv.size(); ++k)
          same_bits = same_bits && eg::bitwise_equal(pv[k].value, rv[k].value);
      }
    }
    std::printf("rank %d: step %d: %zu gradient floats %s; %d messages, %lld bytes sent\n", rank,
                step, floats, same_bits ? "bitwise equal" : "DIFFER", r->messages_sent,
                static_cast<long long>(r->bytes_sent));
    ok = ok && same_bits && floats > 0;
  }
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s\n", all ? "all ranks bitwise equal" : "some rank differs");
  return all == 1;
}

}  // namespace

int main(int argc, char** argv) {
  remat::dist::mpi_session mpi(argc, argv);
  const int rank = dv_rank();
  const std::string transport = argc > 1 ? argv[1] : "";
  const std::string layout = argc > 2 ? argv[2] : "";
  const int devices = cu::device_count();
  if (devices == 0) {
    std::printf("SKIP: no usable CUDA device (rank %d)\n", rank);
    return 77;
  }
  try {
    auto staged = [](cu::backend& b) { return remat::dist::cuda_staged_transport(b); };
    if (transport == "staged" && layout == "contiguous")
      return dv_bitwise<remat::dist::cuda_staged_transport>({4, 7}, {0, 1}, staged, rank % devices)
                 ? 0
                 : 1;
    if (transport == "staged" && layout == "local")
      return dv_bitwise<remat::dist::cuda_staged_transport>({2, 4, 7}, {0, 0, 1}, staged,
                                                            rank % devices)
                 ? 0
                 : 1;
#if defined(REMAT_HAS_NCCL)
    auto nccl = [](cu::backend& b) { return remat::dist::nccl_transport(b); };
    if (transport == "nccl" && layout == "contiguous") {
      if (devices < 2) {
        std::printf("SKIP: NCCL needs a GPU per rank; this machine has %d (rank %d)\n", devices,
                    rank);
        return 77;
      }
      return dv_bitwise<remat::dist::nccl_transport>({4, 7}, {0, 1}, nccl, rank % devices) ? 0 : 1;
    }
    if (transport == "nccl" && layout == "shared") {
      // Both ranks on device 0: the step must fail on every rank, saying why (the test's
      // PASS_REGULAR_EXPRESSION), not hang in NCCL.
      return dv_bitwise<remat::dist::nccl_transport>({4, 7}, {0, 1}, nccl, 0) ? 1 : 0;
    }
#endif
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    return 1;
  }
  std::printf("unknown mode '%s %s'\n", transport.c_str(), layout.c_str());
  return 2;
}
