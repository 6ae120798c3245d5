// The model zoo (include/remat/zoo/): op counts, sizes against hand formulas, times against the
// roofline rule, the DAGs validate and build, round-trip through JSON with their cost model,
// the shipped examples/graphs files are what the generators and examples/graphs/README.md's
// remat-zoo commands make today, and bad configurations come back as invalid_problem.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <remat/io/graph_json.hpp>
#include <remat/policy/store_all.hpp>
#include <remat/problem/builder.hpp>
#include <remat/sim/simulate.hpp>
#include <remat/zoo/gpt2.hpp>
#include <remat/zoo/llama.hpp>
#include <remat/zoo/resnet.hpp>
#include <remat/zoo/roofline.hpp>
#include <remat/zoo/transformer.hpp>
#include <remat/zoo/unet.hpp>

#include "support/io_checks.hpp"

#ifndef _WIN32
#include <sys/wait.h>
#endif

using namespace remat;
using nlohmann::json;
using remat::testing::says;

namespace {

const forward_op& op_named(const forward_dag& f, const std::string& name) {
  const auto it =
      std::find_if(f.ops.begin(), f.ops.end(), [&](const forward_op& o) { return o.name == name; });
  REQUIRE_MESSAGE(it != f.ops.end(), "no op " << name);
  return *it;
}

using names = std::vector<std::string>;

/// Every time is the roofline of the op's recorded work on the DAG's recorded device.
void check_roofline(const forward_dag& f) {
  REQUIRE(f.costs.has_value());
  CHECK(f.costs->rule == zoo::roofline_rule);
  for (const forward_op& o : f.ops) {
    CAPTURE(o.name);
    REQUIRE(
        (o.forward_flops && o.backward_flops && o.forward_bytes_moved && o.backward_bytes_moved));
    const zoo::device_model d{f.costs->device, f.costs->peak_flops, f.costs->memory_bandwidth};
    CHECK(o.forward_time ==
          zoo::roofline_time({*o.forward_flops, double(*o.forward_bytes_moved)}, d));
    CHECK(o.backward_time ==
          zoo::roofline_time({*o.backward_flops, double(*o.backward_bytes_moved)}, d));
    CHECK(o.forward_time > 0);
    CHECK(o.backward_time > 0);
  }
}

std::filesystem::path graphs_dir() {
#ifdef REMAT_EXAMPLES_DIR
  return std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs";
#else
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "examples" /
         "graphs";
#endif
}

using remat::testing::slurp;

}  // namespace

TEST_CASE("gpt2: op counts, names and the sizes of the ops against hand formulas") {
  for (int layers : {1, 4, 12}) {
    CAPTURE(layers);
    const auto f = zoo::gpt2({.layers = layers}, zoo::devices::v100());
    REQUIRE_MESSAGE(f.ok(), f.message());
    CHECK(f->ops.size() == std::size_t(3 + 17 * layers + 3));
    const auto no_dropout = zoo::gpt2({.layers = layers, .dropout = 0}, zoo::devices::v100());
    REQUIRE(no_dropout.ok());
    CHECK(no_dropout->ops.size() == std::size_t(2 + 14 * layers + 3));
    CHECK(f->ops.back().name == "loss");
  }

  const zoo::gpt2_config c{.layers = 2,
                           .width = 64,
                           .heads = 4,
                           .sequence = 32,
                           .batch = 3,
                           .vocab = 101,
                           .dtype_bytes = 4,
                           .dropout = 0.1};
  const auto f = zoo::gpt2(c, zoo::devices::a100());
  REQUIRE_MESSAGE(f.ok(), f.message());
  const bytes B = 3, T = 32, D = 64, H = 4, V = 101, e = 4, N = B * T, U = N * D * e;
  CHECK(f->input_bytes == 8 * N);  // int64 token ids
  CHECK(f->costs->device == "A100");
  CHECK(f->costs->peak_flops == 19.5e12);

  const forward_op& scores = op_named(*f, "h1.attn.scores");
  CHECK(scores.output_bytes == B * H * T * T * e);
  CHECK(scores.inputs == names{"h1.attn.q", "h1.attn.k"});
  CHECK(scores.backward_reads == names{"h1.attn.q", "h1.attn.k"});
  CHECK(scores.phantom_bytes == 0);
  CHECK(scores.forward_overhead_bytes == B * H * T * T * e);
  CHECK(*scores.forward_flops == double(2 * B * H * T * T * (D / H) + 2 * B * H * T * T));

  const forward_op& softmax = op_named(*f, "h1.attn.softmax");
  CHECK(softmax.backward_reads == names{"output"});
  CHECK(softmax.output_bytes == B * H * T * T * e);

  const forward_op& attn_drop = op_named(*f, "h1.attn.attn_drop");
  CHECK(attn_drop.phantom_bytes == B * H * T * T);  // a 1-byte mask an element
  CHECK(attn_drop.backward_reads.empty());
  CHECK(attn_drop.forward_overhead_bytes == B * H * T * T);  // the fast-forward's mask
  CHECK(attn_drop.forward_save_overhead_bytes == 0);

  const forward_op& context = op_named(*f, "h1.attn.context");
  CHECK(context.inputs == names{"h1.attn.attn_drop", "h1.attn.v"});
  CHECK(context.backward_reads == names{"h1.attn.attn_drop", "h1.attn.v"});
  CHECK(context.output_bytes == U);

  for (const char* p : {"q", "k", "v"}) {
    const forward_op& lin = op_named(*f, std::string("h0.attn.") + p);
    CHECK(lin.inputs == names{"h0.ln_1"});
    CHECK(lin.backward_reads == names{"h0.ln_1"});
    CHECK(lin.output_bytes == U);
    CHECK(*lin.forward_flops == double(2 * N * D * D + N * D));
    CHECK(*lin.backward_flops == double(4 * N * D * D + N * D));
  }
  const forward_op& ln = op_named(*f, "h0.ln_2");
  CHECK(ln.phantom_bytes == 2 * N * 4);  // mean and rstd in fp32
  CHECK(ln.backward_reads == names{"h0.add_1"});
  CHECK(op_named(*f, "h0.mlp.c_fc").output_bytes == 4 * U);
  CHECK(op_named(*f, "h0.mlp.gelu").backward_reads == names{"h0.mlp.c_fc"});
  const forward_op& add = op_named(*f, "h1.add_1");
  CHECK(add.inputs == names{"h0.add_2", "h1.attn.resid_drop"});
  CHECK(add.backward_reads.empty());
  CHECK(op_named(*f, "h1.ln_1").inputs == names{"h0.add_2"});
  CHECK(op_named(*f, "h0.ln_1").inputs == names{"drop"});
  CHECK(op_named(*f, "wte").backward_reads == names{"input"});
  CHECK(op_named(*f, "lm_head").output_bytes == N * V * e);
  CHECK(*op_named(*f, "lm_head").backward_flops == double(4 * N * D * V));  // no bias
  const forward_op& loss = f->ops.back();
  CHECK(loss.name == "loss");
  CHECK(loss.output_bytes == e);
  CHECK(loss.phantom_bytes == N * V * e + 8 * N);  // log-probabilities and int64 targets
  CHECK(loss.backward_overhead_bytes == N * V * e);
  check_roofline(*f);

  // dtype: fp16 halves every activation; layer norm's statistics stay fp32; fp64 doubles them.
  auto half = c;
  half.dtype_bytes = 2;
  const auto h = zoo::gpt2(half, zoo::devices::a100_tensor_cores());
  REQUIRE(h.ok());
  CHECK(op_named(*h, "h1.attn.scores").output_bytes == B * H * T * T * 2);
  CHECK(op_named(*h, "h0.ln_2").phantom_bytes == 2 * N * 4);
  auto dbl = c;
  dbl.dtype_bytes = 8;
  const auto d = zoo::gpt2(dbl, zoo::devices::v100());
  REQUIRE(d.ok());
  CHECK(op_named(*d, "h0.ln_2").phantom_bytes == 2 * N * 8);
}

TEST_CASE("resnet: op counts per depth and the sizes of the ops against hand formulas") {
  const std::map<int, std::size_t> ops{{18, 69}, {34, 125}, {50, 175}, {101, 345}, {152, 515}};
  for (const auto& depth_ops : ops) {  // no structured binding: CAPTURE is a lambda (clang < 16)
    const int depth = depth_ops.first;
    CAPTURE(depth);
    const auto f = zoo::resnet({.depth = depth, .batch = 2, .image = 64}, zoo::devices::v100());
    REQUIRE_MESSAGE(f.ok(), f.message());
    CHECK(f->ops.size() == depth_ops.second);
  }
  const auto f = zoo::resnet({}, zoo::devices::v100());  // ResNet-50, batch 32, 224, fp32
  REQUIRE_MESSAGE(f.ok(), f.message());
  const bytes B = 32, e = 4;
  CHECK(f->input_bytes == B * 3 * 224 * 224 * e);
  const forward_op& conv1 = op_named(*f, "conv1");
  CHECK(conv1.output_bytes == B * 64 * 112 * 112 * e);
  CHECK(*conv1.forward_flops == 2.0 * B * 64 * 112 * 112 * 3 * 7 * 7);
  CHECK(*conv1.backward_flops == *conv1.forward_flops);  // reads the image: no data gradient
  const forward_op& c2 = op_named(*f, "layer1.0.conv2");
  CHECK(*c2.backward_flops == 2 * *c2.forward_flops);
  CHECK(op_named(*f, "bn1").phantom_bytes == 2 * 64 * 4);
  CHECK(op_named(*f, "bn1").backward_reads == names{"conv1"});
  CHECK(op_named(*f, "relu").backward_reads == names{"output"});
  const forward_op& pool = op_named(*f, "maxpool");
  CHECK(pool.output_bytes == B * 64 * 56 * 56 * e);
  CHECK(pool.phantom_bytes == B * 64 * 56 * 56 * 8);  // int64 indices
  CHECK(pool.backward_reads == names{"relu"});
  // v1.5: the stride is in the 3x3 convolution; the downsample branch of layer 2 halves too.
  CHECK(op_named(*f, "layer2.0.conv1").output_bytes == B * 128 * 56 * 56 * e);
  CHECK(op_named(*f, "layer2.0.conv2").output_bytes == B * 128 * 28 * 28 * e);
  CHECK(op_named(*f, "layer2.0.downsample.1").output_bytes == B * 512 * 28 * 28 * e);
  CHECK(op_named(*f, "layer2.0.add").inputs == names{"layer2.0.bn3", "layer2.0.downsample.1"});
  CHECK(op_named(*f, "layer2.1.add").inputs == names{"layer2.1.bn3", "layer2.0.relu"});
  CHECK(op_named(*f, "layer4.2.relu").output_bytes == B * 2048 * 7 * 7 * e);
  CHECK(op_named(*f, "avgpool").output_bytes == B * 2048 * e);
  CHECK(op_named(*f, "fc").output_bytes == B * 1000 * e);
  CHECK(f->ops.back().phantom_bytes == B * 1000 * e + 8 * B);
  check_roofline(*f);
  // A basic-block net has no downsample in layer 1 (64 -> 64, stride 1).
  const auto r18 = zoo::resnet({.depth = 18}, zoo::devices::v100());
  REQUIRE(r18.ok());
  CHECK(op_named(*r18, "layer1.0.add").inputs == names{"layer1.0.bn2", "maxpool"});
  CHECK(op_named(*r18, "layer2.0.downsample.0").output_bytes == B * 128 * 28 * 28 * e);
}

TEST_CASE("llama: op counts, weights and the sizes of the ops against hand formulas") {
  for (int layers : {1, 4, 32}) {
    CAPTURE(layers);
    const auto f = zoo::llama({.layers = layers}, zoo::devices::rtx3060());
    REQUIRE_MESSAGE(f.ok(), f.message());
    CHECK(f->ops.size() == std::size_t(1 + 17 * layers + 3));
    CHECK(f->parameters.size() == std::size_t(3 + 9 * layers));
    bytes total = 0;
    for (const auto& w : f->parameters) total += w.size;
    const bytes D = 4096, F = 11008, V = 32000, e = 4;
    CHECK(total == 2 * V * D * e + layers * (4 * D * D + 3 * D * F + 2 * D) * e + D * e);
  }
  // Llama 2 7B: 6.74 billion values.
  const auto full = zoo::llama({}, zoo::devices::rtx3060());
  REQUIRE(full.ok());
  bytes values = 0;
  for (const auto& w : full->parameters) values += w.size / 4;
  CHECK(values == 6'738'415'616);

  const zoo::llama_config c{.layers = 2,
                            .width = 64,
                            .heads = 4,
                            .ffn = 160,
                            .vocab = 101,
                            .sequence = 32,
                            .batch = 3,
                            .dtype_bytes = 2};
  const auto f = zoo::llama(c, zoo::devices::a100());
  REQUIRE_MESSAGE(f.ok(), f.message());
  const bytes B = 3, T = 32, D = 64, H = 4, F = 160, e = 2, N = B * T, U = N * D * e;
  CHECK(f->input_bytes == 8 * N);
  const forward_op& q = op_named(*f, "layers.1.self_attn.q_proj");
  CHECK(q.parameters == names{"layers.1.self_attn.q_proj.weight"});
  CHECK(q.output_bytes == U);
  CHECK(q.backward_reads == names{"layers.1.input_layernorm"});
  const forward_op& norm = op_named(*f, "layers.0.post_attention_layernorm");
  CHECK(norm.phantom_bytes == N * 4);
  CHECK(norm.parameters == names{"layers.0.post_attention_layernorm.weight"});
  const forward_op& scores = op_named(*f, "layers.1.self_attn.scores");
  CHECK(scores.output_bytes == B * H * T * T * e);
  CHECK(scores.inputs == names{"layers.1.self_attn.rotary_q", "layers.1.self_attn.rotary_k"});
  const forward_op& act = op_named(*f, "layers.0.mlp.act");
  CHECK(act.output_bytes == N * F * e);
  CHECK(act.backward_reads == names{"layers.0.mlp.gate_proj", "layers.0.mlp.up_proj"});
  CHECK(op_named(*f, "layers.0.self_attn.rotary_k").backward_reads.empty());
  CHECK(op_named(*f, "lm_head").parameters == names{"lm_head.weight"});
  for (const auto& w : f->parameters) {
    CHECK(w.dtype == "bf16");
    CHECK(w.trainable);
  }
  // The weights reach the training graph: one user each, a forward node.
  const auto g = build_graph(*f);
  REQUIRE(g.ok());
  CHECK(g->parameters().size() == f->parameters.size());
  for (int p = 0; p < static_cast<int>(g->parameters().size()); ++p) {
    REQUIRE(g->parameter_users(p).size() == 1);
    CHECK(g->compute(g->parameter_users(p)[0]).kind == compute_kind::forward);
  }
  CHECK(says(zoo::llama({.heads = 33}, zoo::devices::v100()), {"not divisible by heads 33"}));
  CHECK(says(zoo::llama({.ffn = 0}, zoo::devices::v100()), {"ffn is 0"}));
}

TEST_CASE("encoder_decoder: op counts, weights, cross-attention and sizes against hand formulas") {
  struct depth {
    int encoder, decoder;
  };
  for (const depth d : {depth{1, 1}, depth{2, 3}, depth{6, 6}}) {
    CAPTURE(d.encoder);
    CAPTURE(d.decoder);
    const auto f = zoo::encoder_decoder({.encoder_layers = d.encoder, .decoder_layers = d.decoder},
                                        zoo::devices::v100());
    REQUIRE_MESSAGE(f.ok(), f.message());
    CHECK(f->ops.size() == std::size_t(10 + 17 * d.encoder + 28 * d.decoder));
    const auto no_dropout = zoo::encoder_decoder(
        {.encoder_layers = d.encoder, .decoder_layers = d.decoder, .dropout = 0},
        zoo::devices::v100());
    REQUIRE(no_dropout.ok());
    CHECK(no_dropout->ops.size() == std::size_t(8 + 14 * d.encoder + 23 * d.decoder));
    CHECK(f->ops.back().name == "loss");
    // One shared embedding table; per encoder layer 2 norms, 4 attention and 2 FFN linears
    // (weight and bias each), per decoder layer 3 norms, 8 attention and 2 FFN linears; the two
    // final norms.
    CHECK(f->parameters.size() == std::size_t(5 + 16 * d.encoder + 26 * d.decoder));
    bytes total = 0;
    for (const auto& w : f->parameters) total += w.size;
    const bytes D = 512, F = 2048, V = 32000, e = 4;
    const bytes attention = 4 * (D * D + D), ffn = 2 * D * F + F + D, norm = 2 * D;
    CHECK(total == (V * D + d.encoder * (attention + ffn + 2 * norm) +
                    d.decoder * (2 * attention + ffn + 3 * norm) + 2 * norm) *
                       e);
  }
  // The base model: 60,524,544 values with a 32000-token vocabulary.
  const auto base = zoo::encoder_decoder({}, zoo::devices::v100());
  REQUIRE(base.ok());
  bytes values = 0;
  for (const auto& w : base->parameters) values += w.size / 4;
  CHECK(values == 60'524'544);

  const zoo::encoder_decoder_config c{.encoder_layers = 2,
                                      .decoder_layers = 3,
                                      .width = 64,
                                      .heads = 4,
                                      .ffn = 96,
                                      .source_sequence = 24,
                                      .target_sequence = 16,
                                      .batch = 3,
                                      .vocab = 101,
                                      .dtype_bytes = 4,
                                      .dropout = 0.1};
  const auto f = zoo::encoder_decoder(c, zoo::devices::a100());
  REQUIRE_MESSAGE(f.ok(), f.message());
  const bytes B = 3, Ts = 24, Tt = 16, D = 64, H = 4, F = 96, V = 101, e = 4, Ns = B * Ts,
              Nt = B * Tt, Us = Ns * D * e, Ut = Nt * D * e;
  CHECK(f->input_bytes == 8 * (Ns + Nt));  // both int64 id tensors
  CHECK(f->costs->device == "A100");
  for (const char* embed : {"src_embed", "tgt_embed"}) {
    const forward_op& o = op_named(*f, embed);
    CHECK(o.inputs == names{"input"});
    CHECK(o.backward_reads == names{"input"});
    CHECK(o.parameters == names{"embed_tokens.weight"});
  }
  CHECK(op_named(*f, "src_embed").output_bytes == Us);
  CHECK(op_named(*f, "tgt_embed").output_bytes == Ut);
  const forward_op& pos = op_named(*f, "tgt_pos");
  CHECK(pos.backward_reads.empty());
  CHECK(pos.forward_overhead_bytes == Ut);  // the scaled embedding while the add runs
  CHECK(*pos.forward_bytes_moved == 4 * Ut + Tt * D * e);
  CHECK(op_named(*f, "src_drop").phantom_bytes == Ns * D);

  // Encoder self-attention: T_s^2 scores, the source's key-padding mask (B T_s bytes).
  const forward_op& enc = op_named(*f, "encoder.1.attn.scores");
  CHECK(enc.output_bytes == B * H * Ts * Ts * e);
  CHECK(enc.inputs == names{"encoder.1.attn.q", "encoder.1.attn.k"});
  CHECK(*enc.forward_bytes_moved == 2 * Us + 5 * B * H * Ts * Ts * e + B * Ts);
  CHECK(op_named(*f, "encoder.0.attn.k").inputs == names{"encoder.0.ln_1"});
  CHECK(op_named(*f, "encoder.1.ln_1").inputs == names{"encoder.0.add_2"});
  CHECK(op_named(*f, "encoder.0.ln_1").inputs == names{"src_drop"});
  CHECK(op_named(*f, "encoder.ln_f").inputs == names{"encoder.1.add_2"});
  // Decoder self-attention: causal, a T_t^2 mask.
  const forward_op& self = op_named(*f, "decoder.2.self_attn.scores");
  CHECK(self.output_bytes == B * H * Tt * Tt * e);
  CHECK(*self.forward_bytes_moved == 2 * Ut + 5 * B * H * Tt * Tt * e + Tt * Tt);
  CHECK(op_named(*f, "decoder.0.ln_1").inputs == names{"tgt_drop"});
  // Cross-attention: every decoder layer's k and v read the encoder's final output.
  for (int l = 0; l < c.decoder_layers; ++l) {
    const std::string h = "decoder." + std::to_string(l) + ".cross_attn.";
    CAPTURE(h);
    CHECK(op_named(*f, h + "q").inputs == names{"decoder." + std::to_string(l) + ".ln_2"});
    for (const char* p : {"k", "v"}) {
      const forward_op& kv = op_named(*f, h + p);
      CHECK(kv.inputs == names{"encoder.ln_f"});
      CHECK(kv.backward_reads == names{"encoder.ln_f"});
      CHECK(kv.output_bytes == Us);
      CHECK(*kv.forward_flops == double(2 * Ns * D * D + Ns * D));
    }
    const forward_op& scores = op_named(*f, h + "scores");
    CHECK(scores.output_bytes == B * H * Tt * Ts * e);
    CHECK(*scores.forward_flops == double(2 * B * H * Tt * Ts * (D / H) + 2 * B * H * Tt * Ts));
    CHECK(*scores.forward_bytes_moved == Ut + Us + 5 * B * H * Tt * Ts * e + B * Ts);
    const forward_op& context = op_named(*f, h + "context");
    CHECK(context.inputs == names{h + "attn_drop", h + "v"});
    CHECK(context.output_bytes == Ut);
    CHECK(*context.backward_bytes_moved == 2 * B * H * Tt * Ts * e + 4 * Ut + 2 * Us);
    CHECK(op_named(*f, "decoder." + std::to_string(l) + ".add_2").inputs ==
          names{"decoder." + std::to_string(l) + ".add_1", h + "resid_drop"});
  }
  std::size_t readers = 0;
  for (const forward_op& o : f->ops)
    readers +=
        static_cast<std::size_t>(std::count(o.inputs.begin(), o.inputs.end(), "encoder.ln_f"));
  CHECK(readers == std::size_t(2 * c.decoder_layers));
  // FFN: ReLU reads its output; the norms save 2 fp32 values a token.
  CHECK(op_named(*f, "decoder.1.ffn.fc1").output_bytes == Nt * F * e);
  CHECK(op_named(*f, "encoder.0.ffn.relu").backward_reads == names{"output"});
  CHECK(op_named(*f, "encoder.0.ffn.relu").output_bytes == Ns * F * e);
  CHECK(op_named(*f, "decoder.1.ln_3").phantom_bytes == 2 * Nt * 4);
  CHECK(op_named(*f, "decoder.1.ln_3").parameters ==
        names{"decoder.1.ln_3.weight", "decoder.1.ln_3.bias"});
  CHECK(op_named(*f, "decoder.1.add_3").inputs == names{"decoder.1.add_2", "decoder.1.ffn.drop"});
  // Head: tied to the embedding, no bias; the loss over the target tokens.
  const forward_op& head = op_named(*f, "lm_head");
  CHECK(head.inputs == names{"decoder.ln_f"});
  CHECK(head.parameters == names{"embed_tokens.weight"});
  CHECK(head.output_bytes == Nt * V * e);
  CHECK(*head.backward_flops == double(4 * Nt * D * V));
  const forward_op& loss = f->ops.back();
  CHECK(loss.phantom_bytes == Nt * V * e + 8 * Nt);
  check_roofline(*f);

  // The shared table reaches the training graph with its three users.
  const auto g = build_graph(*f);
  REQUIRE_MESSAGE(g.ok(), g.message());
  CHECK(validate(*g).ok());
  CHECK(g->parameters().size() == f->parameters.size());
  CHECK(g->parameters()[0].name == "embed_tokens.weight");
  CHECK(g->parameter_users(0).size() == 3);
}

TEST_CASE("unet: op counts, weights, the skips and sizes against hand formulas") {
  for (int levels = 1; levels <= 5; ++levels) {
    CAPTURE(levels);
    const auto f =
        zoo::unet({.levels = levels, .base_channels = 8, .image = 64}, zoo::devices::v100());
    REQUIRE_MESSAGE(f.ok(), f.message());
    CHECK(f->ops.size() == std::size_t(15 * levels + 8));
    CHECK(f->parameters.size() == std::size_t(14 * levels + 8));
    CHECK(f->ops.back().name == "loss");
  }
  const auto f = zoo::unet({}, zoo::devices::v100());  // 4 levels, 64 channels, 256x256, batch 8
  REQUIRE_MESSAGE(f.ok(), f.message());
  const bytes B = 8, I = 256, e = 4, K = 2;
  CHECK(f->input_bytes == B * 3 * I * I * e);
  // Weights: per double convolution two 3x3 convolutions without bias and two batch norms.
  bytes total = 0;
  for (const auto& w : f->parameters) total += w.size;
  auto double_conv = [](bytes cin, bytes cout) {
    return 9 * cin * cout + 9 * cout * cout + 4 * cout;
  };
  bytes values = double_conv(3, 64) + K * 64 + K;  // the first level, the head
  for (bytes l = 1; l <= 4; ++l) values += double_conv(64 << (l - 1), 64 << l);
  for (bytes l = 0; l < 4; ++l)
    values += 4 * (64 << (l + 1)) * (64 << l) + (64 << l) + double_conv(2 * (64 << l), 64 << l);
  CHECK(total == values * e);
  CHECK(values == 31'037'698);

  const forward_op& conv1 = op_named(*f, "down0.conv1");
  CHECK(conv1.output_bytes == B * 64 * I * I * e);
  CHECK(*conv1.forward_flops == 2.0 * B * 64 * I * I * 3 * 9);
  CHECK(*conv1.backward_flops == *conv1.forward_flops);  // reads the image: no data gradient
  CHECK(conv1.parameters == names{"down0.conv1.weight"});
  const forward_op& c2 = op_named(*f, "down1.conv1");
  CHECK(*c2.backward_flops == 2 * *c2.forward_flops);
  CHECK(c2.inputs == names{"down0.pool"});
  CHECK(op_named(*f, "down0.bn1").phantom_bytes == 2 * 64 * 4);
  CHECK(op_named(*f, "down0.bn1").parameters == names{"down0.bn1.weight", "down0.bn1.bias"});
  CHECK(op_named(*f, "down0.relu2").backward_reads == names{"output"});
  const forward_op& pool = op_named(*f, "down0.pool");
  CHECK(pool.output_bytes == B * 64 * 128 * 128 * e);
  CHECK(pool.phantom_bytes == B * 64 * 128 * 128 * 8);  // int64 indices
  CHECK(pool.backward_reads == names{"down0.relu2"});
  CHECK(op_named(*f, "bottleneck.conv1").inputs == names{"down3.pool"});
  CHECK(op_named(*f, "bottleneck.relu2").output_bytes == B * 1024 * 16 * 16 * e);
  const forward_op& up = op_named(*f, "up3.upconv");
  CHECK(up.inputs == names{"bottleneck.relu2"});
  CHECK(up.output_bytes == B * 512 * 32 * 32 * e);
  CHECK(*up.forward_flops == 2.0 * B * 1024 * 16 * 16 * 512 * 4 + B * 512 * 32 * 32);
  CHECK(up.parameters == names{"up3.upconv.weight", "up3.upconv.bias"});
  // The long skips: each level's concatenation reads the skip of the same level, and that skip
  // is read by its max-pool and its concatenation only.
  for (int l = 0; l < 4; ++l) {
    const std::string down = "down" + std::to_string(l) + ".",
                      up_l = "up" + std::to_string(l) + ".";
    CAPTURE(l);
    const bytes ch = 64 << l, side = I >> l;
    const forward_op& cat = op_named(*f, up_l + "concat");
    CHECK(cat.inputs == names{down + "relu2", up_l + "upconv"});
    CHECK(cat.output_bytes == B * 2 * ch * side * side * e);
    CHECK(cat.backward_reads.empty());
    CHECK(op_named(*f, down + "relu2").output_bytes == B * ch * side * side * e);
    CHECK(op_named(*f, up_l + "conv1").inputs == names{up_l + "concat"});
    names readers;
    for (const forward_op& o : f->ops)
      if (std::find(o.inputs.begin(), o.inputs.end(), down + "relu2") != o.inputs.end())
        readers.push_back(o.name);
    CHECK(readers == names{down + "pool", up_l + "concat"});
  }
  const forward_op& head = op_named(*f, "head");
  CHECK(head.inputs == names{"up0.relu2"});
  CHECK(head.output_bytes == B * K * I * I * e);
  CHECK(*head.forward_flops == double(2 * B * K * I * I * 64 + B * K * I * I));  // with bias
  const forward_op& loss = f->ops.back();
  CHECK(loss.phantom_bytes == B * I * I * K * e + 8 * B * I * I);  // per pixel
  check_roofline(*f);
  const auto g = build_graph(*f);
  REQUIRE_MESSAGE(g.ok(), g.message());
  CHECK(validate(*g).ok());
  CHECK(g->parameters().size() == f->parameters.size());
}

TEST_CASE("graph JSON: parameters, and ops that read them") {
  const char* text = R"({"name": "t", "input_bytes": 8,
    "parameters": [{"name": "w", "bytes": 400}, {"name": "b", "bytes": 4, "trainable": false,
                    "dtype": "bf16"}],
    "ops": [{"name": "a", "inputs": ["input"], "forward_time": 1, "backward_time": 2,
             "output_bytes": 8, "phantom_bytes": 0, "backward_reads": [],
             "parameters": ["w", "b"]},
            {"name": "l", "inputs": ["a"], "forward_time": 1, "backward_time": 1,
             "output_bytes": 4, "phantom_bytes": 0, "backward_reads": [], "parameters": ["w"]}]})";
  const auto f = io::parse_forward_dag(text);
  REQUIRE_MESSAGE(f.ok(), f.message());
  CHECK(f->parameters[0] == parameter{"w", 400, true, "fp32"});
  CHECK(f->parameters[1] == parameter{"b", 4, false, "bf16"});
  CHECK(f->ops[0].parameters == names{"w", "b"});
  CHECK(io::forward_dag_from_json(io::to_json(*f)).value() == *f);
  const auto g = build_graph(*f);
  REQUIRE(g.ok());
  CHECK(g->parameter_users(0).size() == 2);  // tied: a and l
  CHECK(g->parameters_of(g->parameter_users(1)[0]).size() == 2);
  auto edited = [&](auto edit) {
    json j = json::parse(text);
    edit(j);
    return io::forward_dag_from_json(j);
  };
  CHECK(says(edited([](json& j) { j["parameters"][0]["bytes"] = -1; }),
             {"parameter 'w'", "negative"}));
  CHECK(says(edited([](json& j) { j["parameters"][0].erase("bytes"); }),
             {"parameters[0]", "missing field \"bytes\""}));
  CHECK(says(edited([](json& j) { j["parameters"][1]["trainable"] = "no"; }),
             {"parameters[1]", "true or false"}));
  CHECK(says(edited([](json& j) { j["parameters"][1]["name"] = "w"; }),
             {"parameters[1]", "must be unique"}));
  CHECK(says(edited([](json& j) { j["ops"][0]["parameters"] = {"v"}; }),
             {"op 'a'", "parameter 'v'", "not in the DAG's parameters"}));
  CHECK(says(edited([](json& j) { j["ops"][0]["parameters"] = {"w"}; }),
             {"parameter 'b' is read by no op"}));
  CHECK(says(edited([](json& j) { j["parameters"] = 3; }), {"\"parameters\" is an integer"}));
  CHECK(says(edited([](json& j) { j["parameters"][0]["size"] = 3; }), {"unknown field \"size\""}));
}

TEST_CASE("zoo DAGs validate, build, run store-all and round-trip through JSON") {
  std::vector<forward_dag> dags;
  dags.push_back(
      zoo::gpt2({.layers = 2, .sequence = 128, .batch = 2}, zoo::devices::h100()).value());
  dags.push_back(
      zoo::gpt2({.layers = 2, .sequence = 128, .dropout = 0}, zoo::devices::v100()).value());
  dags.push_back(zoo::resnet({.depth = 18, .batch = 4, .image = 96}, zoo::devices::a100()).value());
  dags.push_back(zoo::llama({.layers = 2,
                             .width = 256,
                             .heads = 4,
                             .ffn = 688,
                             .vocab = 1000,
                             .sequence = 64,
                             .batch = 2},
                            zoo::devices::rtx3060())
                     .value());
  dags.push_back(zoo::resnet({.depth = 50, .batch = 2, .image = 64, .dtype_bytes = 2},
                             zoo::devices::h100_tensor_cores())
                     .value());
  dags.push_back(zoo::encoder_decoder({.encoder_layers = 2,
                                       .decoder_layers = 2,
                                       .width = 128,
                                       .heads = 4,
                                       .ffn = 256,
                                       .source_sequence = 64,
                                       .target_sequence = 48,
                                       .batch = 2,
                                       .vocab = 1000},
                                      zoo::devices::h100())
                     .value());
  dags.push_back(zoo::encoder_decoder({.encoder_layers = 1,
                                       .decoder_layers = 2,
                                       .width = 64,
                                       .heads = 2,
                                       .ffn = 128,
                                       .source_sequence = 32,
                                       .target_sequence = 32,
                                       .batch = 2,
                                       .vocab = 500,
                                       .dtype_bytes = 2,
                                       .dropout = 0},
                                      zoo::devices::a100_tensor_cores())
                     .value());
  dags.push_back(
      zoo::unet({.levels = 2, .base_channels = 8, .image = 32, .batch = 2}, zoo::devices::a100())
          .value());
  dags.push_back(zoo::unet({.levels = 3,
                            .base_channels = 4,
                            .image = 24,
                            .in_channels = 1,
                            .classes = 5,
                            .batch = 1,
                            .dtype_bytes = 8},
                           zoo::devices::rtx3060())
                     .value());
  for (const forward_dag& f : dags) {
    CAPTURE(f.name);
    CHECK(validate(f).ok());
    const auto g = build_graph(f);
    REQUIRE_MESSAGE(g.ok(), g.message());
    CHECK(validate(*g).ok());
    const auto r = sim::simulate(*g, schedule{store_all_program(*g), 0, 0});
    CHECK_MESSAGE(r.valid, (r.first_violation ? r.first_violation->message : ""));
    CHECK(r.makespan == doctest::Approx(g->ideal_time()));
    const json j = io::to_json(f);
    CHECK(j.at("cost_model").at("device") == f.costs->device);
    const auto back = io::forward_dag_from_json(j);
    REQUIRE_MESSAGE(back.ok(), back.message());
    CHECK(*back == f);
    const auto text = io::parse_forward_dag(j.dump());
    REQUIRE(text.ok());
    CHECK(*text == f);
  }
}

TEST_CASE("the shipped zoo graphs are what the generators make today") {
  struct shipped {
    const char* file;
    result<forward_dag> made;
  };
  const shipped files[] = {
      {"gpt2_small.json",
       zoo::gpt2(
           {.layers = 12, .width = 768, .heads = 12, .sequence = 512, .batch = 8, .dtype_bytes = 4},
           zoo::devices::v100())},
      {"gpt2_4layer.json",
       zoo::gpt2(
           {.layers = 4, .width = 768, .heads = 12, .sequence = 512, .batch = 8, .dtype_bytes = 4},
           zoo::devices::v100())},
      {"resnet50.json", zoo::resnet({.depth = 50, .batch = 32, .image = 224, .dtype_bytes = 4},
                                    zoo::devices::v100())},
      {"llama2_7b.json", zoo::llama({}, zoo::devices::rtx3060())},
      {"llama_4layer.json", zoo::llama({.layers = 4}, zoo::devices::rtx3060())},
      {"encoder_decoder_6layer.json", zoo::encoder_decoder({.encoder_layers = 6,
                                                            .decoder_layers = 6,
                                                            .width = 512,
                                                            .heads = 8,
                                                            .ffn = 2048,
                                                            .source_sequence = 512,
                                                            .target_sequence = 512,
                                                            .batch = 8,
                                                            .vocab = 32000,
                                                            .dtype_bytes = 4,
                                                            .dropout = 0.1},
                                                           zoo::devices::v100())},
      {"unet.json", zoo::unet({}, zoo::devices::v100())},
  };
  for (const auto& s : files) {
    CAPTURE(s.file);
    REQUIRE_MESSAGE(s.made.ok(), s.made.message());
    const auto f = io::load_forward_dag(graphs_dir() / s.file);
    REQUIRE_MESSAGE(f.ok(), f.message());
    CHECK(*f == *s.made);
  }
  const auto small = io::load_forward_dag(graphs_dir() / "gpt2_small.json");
  REQUIRE(small.ok());
  CHECK(small->ops.size() == 210);
  CHECK(small->costs->device == "V100");
  const auto pair = io::load_forward_dag(graphs_dir() / "encoder_decoder_6layer.json");
  REQUIRE(pair.ok());
  CHECK(pair->ops.size() == 280);
  CHECK(pair->parameters.size() == 257);
  const auto u = io::load_forward_dag(graphs_dir() / "unet.json");
  REQUIRE(u.ok());
  CHECK(u->ops.size() == 68);
  CHECK(u->parameters.size() == 64);
}

TEST_CASE("zoo: bad configurations and devices are invalid_problem naming the field") {
  const auto v100 = zoo::devices::v100();
  CHECK(says(zoo::gpt2({.layers = 0}, v100), {"layers is 0", "from 1 to 10000"}));
  CHECK(says(zoo::gpt2({.layers = -3}, v100), {"layers is -3"}));
  CHECK(says(zoo::gpt2({.width = 100}, v100), {"width 100 is not divisible by heads 12"}));
  CHECK(says(zoo::gpt2({.heads = 0}, v100), {"heads is 0"}));
  CHECK(says(zoo::gpt2({.sequence = 0}, v100), {"sequence is 0"}));
  CHECK(says(zoo::gpt2({.batch = -1}, v100), {"batch is -1"}));
  CHECK(says(zoo::gpt2({.vocab = 0}, v100), {"vocab is 0"}));
  CHECK(says(zoo::gpt2({.dtype_bytes = 3}, v100),
             {"dtype_bytes is 3", "2 (fp16 or bf16), 4 (fp32) or 8"}));
  CHECK(says(zoo::gpt2({.dropout = 1}, v100), {"dropout is 1", "[0, 1)"}));
  CHECK(says(zoo::gpt2({.dropout = -0.5}, v100), {"dropout is -0.5"}));
  CHECK(says(zoo::gpt2({.sequence = 1 << 24, .batch = 1 << 24}, v100),
             {"attention scores", "batch * heads * sequence^2 * dtype_bytes", "2^48",
              "reduce batch or sequence"}));
  CHECK(says(zoo::gpt2({.heads = 1, .sequence = 1 << 10, .batch = 1 << 24}, v100),
             {"logits", "batch * sequence * vocab * dtype_bytes"}));
  CHECK(says(zoo::resnet({.depth = 51}, v100), {"depth is 51", "18, 34, 50, 101, 152"}));
  CHECK(says(zoo::resnet({.batch = 0}, v100), {"batch is 0"}));
  CHECK(says(zoo::resnet({.image = 0}, v100), {"image is 0"}));
  CHECK(says(zoo::resnet({.dtype_bytes = 16}, v100), {"dtype_bytes is 16"}));
  CHECK(says(zoo::resnet({.batch = 1 << 24, .image = 1 << 20}, v100), {"input images", "2^48"}));
  using ed = zoo::encoder_decoder_config;
  CHECK(says(zoo::encoder_decoder({.encoder_layers = 0}, v100),
             {"encoder_decoder_config", "encoder_layers is 0", "from 1 to 10000"}));
  CHECK(says(zoo::encoder_decoder({.decoder_layers = -1}, v100), {"decoder_layers is -1"}));
  CHECK(
      says(zoo::encoder_decoder({.width = 100}, v100), {"width 100 is not divisible by heads 8"}));
  CHECK(says(zoo::encoder_decoder({.heads = 0}, v100), {"heads is 0"}));
  CHECK(says(zoo::encoder_decoder({.ffn = 0}, v100), {"ffn is 0"}));
  CHECK(says(zoo::encoder_decoder({.source_sequence = 0}, v100), {"source_sequence is 0"}));
  CHECK(says(zoo::encoder_decoder(ed{.target_sequence = -2}, v100), {"target_sequence is -2"}));
  CHECK(says(zoo::encoder_decoder(ed{.batch = 0}, v100), {"batch is 0"}));
  CHECK(says(zoo::encoder_decoder(ed{.vocab = 0}, v100), {"vocab is 0"}));
  CHECK(says(zoo::encoder_decoder(ed{.dtype_bytes = 3}, v100), {"dtype_bytes is 3"}));
  CHECK(says(zoo::encoder_decoder(ed{.dropout = 1}, v100), {"dropout is 1", "[0, 1)"}));
  CHECK(says(zoo::encoder_decoder({.source_sequence = 1 << 24, .batch = 1 << 24}, v100),
             {"encoder's attention scores", "batch * heads * source_sequence^2 * dtype_bytes",
              "2^48", "reduce batch or source_sequence"}));
  CHECK(says(zoo::encoder_decoder({.target_sequence = 1 << 22}, v100),
             {"decoder's attention scores", "reduce batch or target_sequence"}));
  CHECK(says(zoo::unet({.levels = 0}, v100), {"unet_config", "levels is 0", "from 1 to 16"}));
  CHECK(says(zoo::unet({.levels = 17}, v100), {"levels is 17"}));
  CHECK(says(zoo::unet({.base_channels = 0}, v100), {"base_channels is 0"}));
  CHECK(says(zoo::unet({.image = 250}, v100),
             {"image 250 is not divisible by 2^levels = 16", "256 with 4 levels"}));
  CHECK(says(zoo::unet({.levels = 5, .image = 48}, v100), {"image 48", "2^levels = 32"}));
  CHECK(says(zoo::unet({.image = 0}, v100), {"image is 0"}));
  CHECK(says(zoo::unet({.in_channels = 0}, v100), {"in_channels is 0"}));
  CHECK(says(zoo::unet({.classes = 0}, v100), {"classes is 0"}));
  CHECK(says(zoo::unet({.batch = -1}, v100), {"batch is -1"}));
  CHECK(says(zoo::unet({.dtype_bytes = 16}, v100), {"dtype_bytes is 16"}));
  CHECK(says(zoo::unet({.levels = 12, .base_channels = 1 << 16, .image = 4096, .batch = 1}, v100),
             {"bottleneck's convolution weight", "reduce base_channels or levels"}));
  CHECK(says(zoo::unet({.image = 1 << 16, .batch = 1 << 10}, v100),
             {"first level's concatenation", "2^48"}));
  CHECK(says(zoo::gpt2({}, zoo::device_model{"broken", 0, 900e9}), {"peak_flops is 0", "> 0"}));
  CHECK(says(zoo::resnet({}, zoo::device_model{"broken", 1e12, -1}), {"memory_bandwidth is -1"}));
  // A device so slow that the times pass remat's limit: refused by validate(forward_dag).
  CHECK(says(zoo::gpt2({.layers = 1}, zoo::device_model{"abacus", 1e-9, 1e-9}),
             {"gpt2: forward DAG", "1e+15"}));
  // Presets.
  CHECK(zoo::find_device("v100") == zoo::devices::v100());
  CHECK(zoo::find_device("H100-TC") == zoo::devices::h100_tensor_cores());
  CHECK_FALSE(zoo::find_device("B200").has_value());
  CHECK(zoo::device_presets().size() == 7);
}

TEST_CASE("graph JSON: the cost model and the ops' work fields") {
  const char* text = R"({"name": "t", "input_bytes": 8,
    "cost_model": {"device": "X", "peak_flops": 1e12, "memory_bandwidth": 1e11, "rule": "r"},
    "ops": [{"name": "a", "inputs": ["input"], "forward_time": 1, "backward_time": 2,
             "output_bytes": 8, "phantom_bytes": 0, "backward_reads": [],
             "forward_flops": 3.5, "backward_flops": 7, "forward_bytes_moved": 16,
             "backward_bytes_moved": 24},
            {"name": "l", "inputs": ["a"], "forward_time": 1, "backward_time": 1,
             "output_bytes": 4, "phantom_bytes": 0, "backward_reads": []}]})";
  const auto f = io::parse_forward_dag(text);
  REQUIRE_MESSAGE(f.ok(), f.message());
  REQUIRE(f->costs.has_value());
  CHECK(*f->costs == cost_model{"X", 1e12, 1e11, "r"});
  CHECK(f->ops[0].forward_flops == 3.5);
  CHECK(f->ops[0].backward_bytes_moved == 24);
  CHECK_FALSE(f->ops[1].forward_flops.has_value());
  const json out = io::to_json(*f);
  CHECK_FALSE(out["ops"][1].contains("forward_flops"));
  CHECK(io::forward_dag_from_json(out).value() == *f);

  auto edited = [&](auto edit) {
    json j = json::parse(text);
    edit(j);
    return io::forward_dag_from_json(j);
  };
  CHECK(says(edited([](json& j) { j["cost_model"]["peek_flops"] = 1; }),
             {"cost_model: unknown field \"peek_flops\"", "did you mean \"peak_flops\""}));
  CHECK(says(edited([](json& j) { j["cost_model"].erase("device"); }),
             {"cost_model: missing field \"device\""}));
  CHECK(says(edited([](json& j) { j["cost_model"]["peak_flops"] = -1; }),
             {"cost_model: peak_flops is -1"}));
  CHECK(says(edited([](json& j) { j["cost_model"]["memory_bandwidth"] = "fast"; }),
             {"\"memory_bandwidth\" is a string"}));
  CHECK(says(edited([](json& j) { j["cost_model"] = 3; }), {"cost_model is an integer"}));
  CHECK(says(edited([](json& j) { j["ops"][0]["forward_flops"] = -2; }),
             {"op 'a'", "forward_flops is -2"}));
  CHECK(says(edited([](json& j) { j["ops"][0]["backward_bytes_moved"] = 1.5; }),
             {"\"backward_bytes_moved\" is a floating-point number", "JSON integers"}));
  CHECK(says(edited([](json& j) { j["ops"][0]["flops"] = 1; }), {"unknown field \"flops\""}));
  CHECK(says(edited([](json& j) { j["costmodel"] = json::object(); }),
             {"unknown field \"costmodel\"", "cost_model"}));
  // Without a rule it reads as empty.
  const auto no_rule = edited([](json& j) { j["cost_model"].erase("rule"); });
  REQUIRE(no_rule.ok());
  CHECK(no_rule->costs->rule.empty());
}
