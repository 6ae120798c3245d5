// remat-zoo, the command: the README's commands of examples/graphs/ write the shipped files, and
// bad flags exit 2 with a message that names them (REMAT_ZOO_EXE and REMAT_EXAMPLES_DIR come
// from tests/CMakeLists.txt when the tools are built).

#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include "support/io_checks.hpp"

#ifndef _WIN32
#include <sys/wait.h>
#endif

using remat::testing::slurp;

namespace {
std::filesystem::path graphs_dir() { return std::filesystem::path(REMAT_EXAMPLES_DIR) / "graphs"; }
}  // namespace

#if defined(REMAT_ZOO_EXE) && !defined(_WIN32)
TEST_CASE("remat-zoo: the README's commands write the shipped files; bad flags exit 2") {
  static const std::string tag = std::to_string(std::random_device{}());
  auto run = [](const std::string& args, const std::string& out_name) {
    const auto out =
        std::filesystem::temp_directory_path() / ("remat_zoo_test_" + tag + "_" + out_name);
    const std::string cmd =
        std::string("'") + REMAT_ZOO_EXE + "' " + args + " >'" + out.string() + "' 2>&1";
    const int raw = std::system(cmd.c_str());
    std::string text = slurp(out);
    std::filesystem::remove(out);
    return std::pair{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text};
  };
  // Each "remat-zoo ... -o examples/graphs/X.json" line of the README, run into a scratch file.
  std::istringstream readme(slurp(graphs_dir() / "README.md"));
  int commands = 0;
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind("remat-zoo ", 0) != 0) continue;
    const auto o = line.find(" -o examples/graphs/");
    REQUIRE(o != std::string::npos);
    const std::string file = line.substr(o + std::string(" -o examples/graphs/").size());
    CAPTURE(line);
    const auto scratch =
        std::filesystem::temp_directory_path() / ("remat_zoo_test_" + tag + "_" + file);
    const auto ran = run(line.substr(10, o - 10) + " -o '" + scratch.string() + "'", "log");
    CHECK_MESSAGE(ran.first == 0, ran.second);
    CHECK(slurp(scratch) == slurp(graphs_dir() / file));
    std::filesystem::remove(scratch);
    ++commands;
  }
  CHECK(commands == 7);

  // The options reach the configuration: the encoder-decoder without dropout (8 + 14 + 2 * 23
  // ops) and a two-level U-Net (15 * 2 + 8).
  const auto pair = run(
      "encoder-decoder --encoder-layers 1 --decoder-layers 2 --width 64 --heads 4 --ffn 128 "
      "--source-sequence 32 --target-sequence 16 --batch 2 --vocab 100 --dropout 0 --dtype bf16 "
      "--device A100-tc -o '" +
          (std::filesystem::temp_directory_path() / ("remat_zoo_test_" + tag + "_ed.json"))
              .string() +
          "'",
      "ed");
  CHECK_MESSAGE(pair.first == 0, pair.second);
  CHECK_MESSAGE(pair.second.find("68 ops") != std::string::npos, pair.second);
  CHECK(pair.second.find("fp16/bf16, dropout 0, A100-tc roofline") != std::string::npos);
  std::filesystem::remove(std::filesystem::temp_directory_path() /
                          ("remat_zoo_test_" + tag + "_ed.json"));
  const auto u = run(
      "unet --levels 2 --base-channels 8 --image 32 --in-channels 1 --classes 3 --batch 2 -o '" +
          (std::filesystem::temp_directory_path() / ("remat_zoo_test_" + tag + "_unet.json"))
              .string() +
          "'",
      "unet");
  CHECK_MESSAGE(u.first == 0, u.second);
  CHECK_MESSAGE(u.second.find("U-Net, 2 levels, 8 base channels, 32x32, 1 input channels, 3 "
                              "classes, batch 2, fp32, V100 roofline; 38 ops") != std::string::npos,
                u.second);
  std::filesystem::remove(std::filesystem::temp_directory_path() /
                          ("remat_zoo_test_" + tag + "_unet.json"));

  const std::pair<const char*, const char*> bad[] = {
      {"gpt2 --width 100", "width 100 is not divisible by heads 12"},
      {"gpt2 --layers x", "--layers 'x' is not an integer"},
      {"gpt2 --depth 50", "--depth is an option of resnet"},
      {"resnet --depth 51", "18, 34, 50, 101, 152"},
      {"gpt2 --dtype fp8", "the types are fp16, bf16, fp32, fp64"},
      {"gpt2 --device B200", "unknown device 'B200'"},
      {"bert", "unknown model 'bert'"},
      {"gpt2 --frobnicate 1", "unknown option '--frobnicate'"},
      {"llama --dropout 0.1", "--dropout is an option of gpt2 and encoder-decoder, not of llama"},
      {"resnet --ffn 100", "--ffn is an option of llama and encoder-decoder, not of resnet"},
      {"resnet --layers 2", "--layers is an option of gpt2 and llama, not of resnet"},
      {"llama --heads 33", "width 4096 is not divisible by heads 33"},
      {"encoder-decoder --width 100", "width 100 is not divisible by heads 8"},
      {"encoder-decoder --encoder-layers 0", "encoder_layers is 0"},
      {"encoder-decoder --layers 2",
       "--layers is an option of gpt2 and llama, not of "
       "encoder-decoder"},
      {"encoder-decoder --depth 50", "--depth is an option of resnet, not of encoder-decoder"},
      {"gpt2 --decoder-layers 2", "--decoder-layers is an option of encoder-decoder, not of gpt2"},
      {"resnet --width 64",
       "--width is an option of gpt2, llama and encoder-decoder, not of "
       "resnet"},
      {"llama --image 64", "--image is an option of resnet and unet, not of llama"},
      {"unet --image 250", "image 250 is not divisible by 2^levels = 16"},
      {"unet --levels x", "--levels 'x' is not an integer"},
      {"unet --dropout 0.1", "--dropout is an option of gpt2 and encoder-decoder, not of unet"},
      {"unet --base-channels 0", "base_channels is 0"},
  };
  for (const auto& b : bad) {
    CAPTURE(b.first);
    const auto ran = run(b.first, "bad");
    CHECK(ran.first == 2);
    CHECK_MESSAGE(ran.second.find(b.second) != std::string::npos, ran.second);
  }
  const auto [code, said] = run("--help", "help");
  CHECK(code == 0);
  CHECK(said.find("remat-zoo gpt2") != std::string::npos);
  CHECK(said.find("remat-zoo encoder-decoder") != std::string::npos);
  CHECK(said.find("remat-zoo unet") != std::string::npos);
}
#endif
