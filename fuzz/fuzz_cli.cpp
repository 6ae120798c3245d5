// Fuzz target: the remat-plan command line (tools/remat-plan/), run as a subprocess.
//
// An input is text: one argument per line up to the first empty line, then the content of an
// input file. In the arguments, @FILE stands for that file's path, @DIR for a directory, @NULL for
// /dev/null, @ZERO for /dev/zero, @MISSING for a path that does not exist. For example
//   --chain
//   @FILE
//   --budget
//   1GiB
//   --policy
//   rotor
//
//   {"input_bytes": 8, "stages": [...]}
// Properties of each run: remat-plan is not killed by a signal (abort, sanitizer report, out of
// memory under the child's limit), ends within the time limit, exits 0, 1 or 2, prints
// "remat-plan: <reason>" on stderr when it exits non-zero and never an "internal error"; with
// --json and status ok, the makespan is a number and the peak is within the budget.

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "check.hpp"

#ifndef REMAT_PLAN_EXE
#error "REMAT_PLAN_EXE: the path of the remat-plan binary (fuzz/CMakeLists.txt)"
#endif

namespace {

/// Seconds a run may take before it counts as a hang (REMAT_FUZZ_CLI_TIMEOUT overrides).
double child_timeout() {
  static const double t = [] {
    const char* v = std::getenv("REMAT_FUZZ_CLI_TIMEOUT");
    return v ? std::strtod(v, nullptr) : 20.0;
  }();
  return t;
}

struct scratch_dir {
  std::filesystem::path dir;
  scratch_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "remat_fuzz_cli_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) std::abort();
    dir = tmpl;
    std::filesystem::create_directory(dir / "a_directory");
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

const scratch_dir& scratch() {
  static const scratch_dir s;
  return s;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string tail(const std::string& s, std::size_t n = 2000) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

std::string shown(const std::vector<std::string>& args) {
  std::string out = "remat-plan";
  for (const auto& a : args) out += " '" + a + "'";
  return out;
}

/// REMAT_FUZZ_CLI_KEEP_GOING=DIR: a failed property does not abort; the input goes to
/// DIR/<property>-<n> with what was seen in DIR/<property>-<n>.txt (at most 3 per property and
/// policy), and fuzzing goes on. For long campaigns; CI aborts on the first failure.
const char* keep_going_dir() {
  static const char* d = std::getenv("REMAT_FUZZ_CLI_KEEP_GOING");
  return d && *d ? d : nullptr;
}

bool keep(const char* property, const std::string& policy, const std::string& what,
          std::string_view input) {
  static std::map<std::string, int> seen;
  static int count = 0;
  std::string key = property;
  for (char& ch : key)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  key = key.substr(0, 40) + "_" + policy;
  if (seen[key]++ >= 3) return true;
  const auto base = std::filesystem::path(keep_going_dir()) / (key + "-" + std::to_string(count++));
  std::ofstream(base, std::ios::binary)
      .write(input.data(), static_cast<std::streamsize>(input.size()));
  std::ofstream(base.string() + ".txt") << property << "\n" << what << "\n";
  std::fprintf(stderr, "fuzz_cli: %s (%s): kept as %s\n", property, policy.c_str(), base.c_str());
  return true;
}

}  // namespace

#define CLI_CHECK(cond, what)                                              \
  do {                                                                     \
    if (!(cond)) {                                                         \
      if (keep_going_dir() && keep(#cond, policy, (what), text)) return 0; \
      ::remat::fuzz::fail(#cond, (what), __FILE__, __LINE__);              \
    }                                                                      \
  } while (false)

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto& dir = scratch().dir;
  const auto file = dir / "input.json";
  const auto out_path = dir / "stdout", err_path = dir / "stderr";

  // Arguments up to the first empty line (at most 64, each without NUL bytes), then the file.
  std::vector<std::string> args;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty()) break;
    if (args.size() >= 64) continue;
    // exec takes at most 128 KiB per argument: longer ones are cut at 4 KiB.
    std::string a(line.substr(0, std::min({line.find('\0'), line.size(), std::size_t{4096}})));
    auto replace = [&](std::string_view token, const std::string& with) {
      for (std::size_t p = a.find(token); p != std::string::npos;
           p = a.find(token, p + with.size()))
        a.replace(p, token.size(), with);
    };
    replace("@FILE", file.string());
    replace("@DIR", (dir / "a_directory").string());
    replace("@NULL", "/dev/null");
    replace("@ZERO", "/dev/zero");
    replace("@MISSING", (dir / "missing.json").string());
    args.push_back(std::move(a));
  }
  {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    if (pos < text.size())
      f.write(text.data() + pos, static_cast<std::streamsize>(text.size() - pos));
  }
  const bool json_out = std::find(args.begin(), args.end(), "--json") != args.end();
  std::string policy = "none";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--policy" && i + 1 < args.size()) policy = args[i + 1];
    if (args[i].rfind("--policy=", 0) == 0) policy = args[i].substr(9);
  }
  if (policy.size() > 20) policy = "other";
  for (const auto& a : args)
    if (a == "--simulate" || a.rfind("--simulate=", 0) == 0) policy = "simulate";

  std::vector<char*> argv;
  static std::string exe =
      std::filesystem::absolute(REMAT_PLAN_EXE).string();  // the child changes folder
  argv.push_back(exe.data());
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  FUZZ_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    // In the scratch folder: a relative --trace or --svg FILE the input names is written there.
    if (::chdir(dir.c_str()) != 0) ::_exit(125);
    const int o = ::open(out_path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    const int e = ::open(err_path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(125);
#ifdef REMAT_FUZZ_CHILD_SANITIZED
    // The sanitizers reserve terabytes of address space: limit the resident size instead.
    ::setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1:hard_rss_limit_mb=4096", 1);
    ::setenv("UBSAN_OPTIONS", "halt_on_error=1:abort_on_error=1:print_stacktrace=1", 1);
#else
    const rlimit mem{rlim_t{4} << 30, rlim_t{4} << 30};
    ::setrlimit(RLIMIT_AS, &mem);
#endif
    ::execv(argv[0], argv.data());
    ::_exit(126);
  }
  int raw = 0;
  const auto t0 = std::chrono::steady_clock::now();
  bool hung = false;
  for (;;) {
    const pid_t w = ::waitpid(pid, &raw, WNOHANG);
    if (w == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
        child_timeout()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &raw, 0);
      hung = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::string out = slurp(out_path), err = slurp(err_path);
  const std::string what = shown(args) + "\nstderr: " + tail(err) + "\nstdout: " + tail(out, 500);
  CLI_CHECK(!hung, "ran past " + std::to_string(child_timeout()) + " s: " + what);
  CLI_CHECK(!WIFSIGNALED(raw), "killed by signal " + std::to_string(WTERMSIG(raw)) + " (" +
                                   strsignal(WTERMSIG(raw)) + "): " + what);
  CLI_CHECK(WIFEXITED(raw), "did not exit: " + what);
  const int code = WEXITSTATUS(raw);
  CLI_CHECK(code != 125 && code != 126, "could not start " + exe);
  CLI_CHECK(code == 0 || code == 1 || code == 2,
            "exit status " + std::to_string(code) + ": " + what);
  CLI_CHECK(err.find("AddressSanitizer") == std::string::npos &&
                err.find("runtime error:") == std::string::npos &&
                err.find("LeakSanitizer") == std::string::npos,
            "a sanitizer report: " + what);
  if (code != 0) {
    CLI_CHECK(err.rfind("remat-plan: ", 0) == 0 && err.size() > 13,
              "exit status " + std::to_string(code) + " without a message: " + what);
    CLI_CHECK(err.find("internal error") == std::string::npos, "an internal error: " + what);
    return 0;
  }
  CLI_CHECK(!out.empty(), "exit status 0 and nothing printed: " + what);
  if (json_out && std::find(args.begin(), args.end(), "--help") == args.end() &&
      std::find(args.begin(), args.end(), "-h") == args.end()) {
    const auto j = nlohmann::json::parse(out, nullptr, false);
    CLI_CHECK(!j.is_discarded() && j.is_object(), "--json printed no JSON object: " + what);
    if (j.value("status", "") == "ok") {
      CLI_CHECK(j.contains("makespan") && j["makespan"].is_number(),
                "status ok without a numeric makespan: " + what);
      CLI_CHECK(j.contains("peak_bytes") && j.contains("budget_bytes") &&
                    j["peak_bytes"].get<double>() <= j["budget_bytes"].get<double>(),
                "peak over the budget: " + what);
    }
  }
  return 0;
}
