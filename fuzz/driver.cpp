// The deterministic fuzz driver: a main() for a fuzz target (LLVMFuzzerTestOneInput) where
// libFuzzer is not available (g++, CI's compiler). It runs every seed of the corpus, then a
// seeded mutation loop (bit flips, byte inserts and deletes, chunk copies, splices between inputs,
// dictionary words, interesting numbers such as 1e308, -1, 1e25, 2^63, deep nesting) until a
// count of runs or a time is reached. The same seed and corpus give the same inputs, in order.
//
//   fuzz_chain_json [--runs N] [--seconds S] [--seed K] [--max-len BYTES] [--timeout-ms MS]
//                   [--dict FILE] [--artifact-prefix PATH] [--verbose] CORPUS_DIR_OR_FILE...
//
// A crash (signal, abort, sanitizer report) or an input that runs past --timeout-ms writes the
// input to <artifact-prefix>crash-<hash> or timeout-<hash> and ends the process with a failure.
// Given only files and --runs 0, it replays them (a reproducer).

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

// In the sanitizers' runtime when one is linked; null otherwise.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

// Sanitizer reports abort (the environment's *SAN_OPTIONS still override), so that the SIGABRT
// handler below writes the input out: UBSan's own exit path calls no death callback.
extern "C" const char* __asan_default_options() { return "abort_on_error=1"; }
extern "C" const char* __ubsan_default_options() { return "abort_on_error=1:print_stacktrace=1"; }

namespace {

using bytes_t = std::vector<std::uint8_t>;
using clock_type = std::chrono::steady_clock;

// --- what a signal handler needs: the current input and where to write it ----------------------
const std::uint8_t* g_data = nullptr;
std::size_t g_size = 0;
char g_prefix[4096] = "./";
std::atomic<std::int64_t> g_started_ns{0};  // 0: no input running
std::atomic<bool> g_dumped{false};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

// Async-signal-safe: FNV-1a of the input, written as hex into the artifact's name.
void dump_input(const char* kind) {
  if (g_dumped.exchange(true)) return;
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < g_size; ++i) h = (h ^ g_data[i]) * 1099511628211ull;
  char path[4200];
  std::size_t n = 0;
  for (const char* p = g_prefix; *p && n < 4096; ++p) path[n++] = *p;
  for (const char* p = kind; *p; ++p) path[n++] = *p;
  path[n++] = '-';
  for (int s = 60; s >= 0; s -= 4) path[n++] = "0123456789abcdef"[(h >> s) & 15];
  path[n] = 0;
  const int fd = ::open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd >= 0) {
    std::size_t done = 0;
    while (done < g_size) {
      const auto w = ::write(fd, g_data + done, g_size - done);
      if (w <= 0) break;
      done += static_cast<std::size_t>(w);
    }
    ::close(fd);
  }
  const char* msg1 = "\nfuzz driver: the input was written to ";
  (void)!::write(2, msg1, std::strlen(msg1));
  (void)!::write(2, path, n);
  (void)!::write(2, "\n", 1);
}

extern "C" void on_fatal_signal(int sig) {
  if (g_started_ns.load() != 0) dump_input("crash");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

extern "C" void on_sanitizer_death() {
  if (g_started_ns.load() != 0) dump_input("crash");
}

void run_one(const bytes_t& input) {
  // A copy of exactly `size` bytes: an out-of-bounds read past the end is then ASan's to see.
  std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[input.size() ? input.size() : 1]);
  if (!input.empty()) std::memcpy(copy.get(), input.data(), input.size());
  g_data = copy.get();
  g_size = input.size();
  g_started_ns.store(now_ns());
  LLVMFuzzerTestOneInput(copy.get(), input.size());
  g_started_ns.store(0);
}

// --- inputs --------------------------------------------------------------------------------------
bytes_t read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return bytes_t((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bytes_t to_bytes(std::string_view s) { return bytes_t(s.begin(), s.end()); }

/// libFuzzer's dictionary format: one "word" per line (optionally name="word"), with \" \\ \xAB.
std::vector<bytes_t> read_dictionary(const std::filesystem::path& p) {
  std::vector<bytes_t> words;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    const auto open = line.find('"');
    const auto close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    bytes_t w;
    for (std::size_t i = open + 1; i < close; ++i) {
      if (line[i] == '\\' && i + 1 < close) {
        ++i;
        if (line[i] == 'x' && i + 2 < close) {
          w.push_back(static_cast<std::uint8_t>(std::stoi(line.substr(i + 1, 2), nullptr, 16)));
          i += 2;
        } else {
          w.push_back(static_cast<std::uint8_t>(line[i]));
        }
      } else {
        w.push_back(static_cast<std::uint8_t>(line[i]));
      }
    }
    if (!w.empty()) words.push_back(std::move(w));
  }
  return words;
}

const char* const interesting_numbers[] = {"0",
                                           "-0",
                                           "1",
                                           "-1",
                                           "0.0",
                                           "-0.0",
                                           "1e308",
                                           "-1e308",
                                           "1.7976931348623157e308",
                                           "1e309",
                                           "1e999",
                                           "-1e999",
                                           "1e25",
                                           "1e24",
                                           "4.9e-324",
                                           "1e-320",
                                           "2.2250738585072014e-308",
                                           "127",
                                           "128",
                                           "255",
                                           "256",
                                           "65535",
                                           "65536",
                                           "2147483647",
                                           "2147483648",
                                           "-2147483648",
                                           "-2147483649",
                                           "4294967295",
                                           "4294967296",
                                           "4503599627370495",
                                           "4503599627370496",
                                           "4503599627370497",
                                           "9007199254740993",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "-9223372036854775808",
                                           "-9223372036854775809",
                                           "18446744073709551615",
                                           "18446744073709551616",
                                           "1e19",
                                           "1.5",
                                           "0.5",
                                           "1e-9",
                                           "123456789012345678901234567890",
                                           "NaN",
                                           "Infinity",
                                           "-Infinity",
                                           "true",
                                           "null",
                                           "\"\"",
                                           "[]",
                                           "{}"};

class mutator {
 public:
  mutator(std::uint64_t seed, std::size_t max_len, std::vector<bytes_t> dict)
      : rng_(seed), max_len_(max_len), dict_(std::move(dict)) {}

  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng_() % n); }

  /// 1 to 8 stacked mutations of `in`, `other` a second input for splices.
  bytes_t mutate(bytes_t in, const bytes_t& other) {
    const std::size_t n = 1 + below(below(8) + 1);
    for (std::size_t k = 0; k < n; ++k) mutate_once(in, other);
    if (in.size() > max_len_) in.resize(max_len_);
    return in;
  }

 private:
  void insert(bytes_t& in, std::size_t pos, const bytes_t& what) {
    in.insert(in.begin() + static_cast<std::ptrdiff_t>(std::min(pos, in.size())), what.begin(),
              what.end());
  }

  /// The [begin, end) of a number around a random position, or an empty range.
  std::pair<std::size_t, std::size_t> number_at(const bytes_t& in) {
    if (in.empty()) return {0, 0};
    std::size_t p = below(in.size());
    auto numeric = [](std::uint8_t c) {
      return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
    };
    std::size_t tries = 0;
    while (!(in[p] >= '0' && in[p] <= '9') && tries++ < 64) p = below(in.size());
    if (!(in[p] >= '0' && in[p] <= '9')) return {0, 0};
    std::size_t b = p, e = p;
    while (b > 0 && numeric(in[b - 1])) --b;
    while (e < in.size() && numeric(in[e])) ++e;
    return {b, e};
  }

  void mutate_once(bytes_t& in, const bytes_t& other) {
    static constexpr std::string_view alphabet = "{}[]\":,0123456789.-+eE \n\\tfnu_aFBCDOPW";
    switch (below(13)) {
      case 0:  // flip a bit
        if (!in.empty()) in[below(in.size())] ^= static_cast<std::uint8_t>(1u << below(8));
        break;
      case 1:  // set a byte: JSON punctuation mostly, any byte sometimes
        if (!in.empty())
          in[below(in.size())] = below(4)
                                     ? static_cast<std::uint8_t>(alphabet[below(alphabet.size())])
                                     : static_cast<std::uint8_t>(below(256));
        break;
      case 2: {  // insert a few bytes
        bytes_t b(1 + below(4));
        for (auto& x : b) x = static_cast<std::uint8_t>(alphabet[below(alphabet.size())]);
        insert(in, below(in.size() + 1), b);
        break;
      }
      case 3: {  // delete a range
        if (in.empty()) break;
        const std::size_t p = below(in.size());
        const std::size_t len = 1 + below(std::min<std::size_t>(in.size() - p, below(3) ? 4 : 256));
        in.erase(in.begin() + static_cast<std::ptrdiff_t>(p),
                 in.begin() + static_cast<std::ptrdiff_t>(p + len));
        break;
      }
      case 4: {  // copy a chunk elsewhere (duplicates stages, fields, brackets)
        if (in.empty()) break;
        const std::size_t p = below(in.size());
        const std::size_t len = 1 + below(std::min<std::size_t>(in.size() - p, 512));
        const bytes_t chunk(in.begin() + static_cast<std::ptrdiff_t>(p),
                            in.begin() + static_cast<std::ptrdiff_t>(p + len));
        insert(in, below(in.size() + 1), chunk);
        break;
      }
      case 5: {  // splice: a prefix of this input, a suffix of the other
        if (other.empty()) break;
        const std::size_t a = below(in.size() + 1), b = below(other.size());
        in.resize(a);
        in.insert(in.end(), other.begin() + static_cast<std::ptrdiff_t>(b), other.end());
        break;
      }
      case 6:
      case 7: {  // a number replaced by an interesting one
        const auto [b, e] = number_at(in);
        const std::string_view num = interesting_numbers[below(std::size(interesting_numbers))];
        if (b == e) {
          insert(in, below(in.size() + 1), to_bytes(num));
          break;
        }
        in.erase(in.begin() + static_cast<std::ptrdiff_t>(b),
                 in.begin() + static_cast<std::ptrdiff_t>(e));
        insert(in, b, to_bytes(num));
        break;
      }
      case 8: {  // a number changed a little: +-1, a digit added, its sign flipped
        const auto [b, e] = number_at(in);
        if (b == e) break;
        switch (below(3)) {
          case 0:
            insert(in, e, to_bytes(std::string(1 + below(20), '9')));
            break;
          case 1:
            insert(in, b, to_bytes("-"));
            break;
          default:
            in[e - 1] = static_cast<std::uint8_t>('0' + below(10));
            break;
        }
        break;
      }
      case 9:
      case 10:  // a dictionary word
        if (!dict_.empty()) {
          const bytes_t& w = dict_[below(dict_.size())];
          if (below(2) || in.empty()) {
            insert(in, below(in.size() + 1), w);
          } else {
            const std::size_t p = below(in.size());
            const std::size_t len = std::min(in.size() - p, w.size());
            std::copy(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(len),
                      in.begin() + static_cast<std::ptrdiff_t>(p));
          }
        }
        break;
      case 11: {  // deep nesting or a long run: [[[[..., {"a":{"a":..., a repeated chunk
        static const char* const openers[] = {"[", "{\"a\":", "{\"stages\":", "[{\"inputs\":"};
        const std::string_view o = openers[below(std::size(openers))];
        const std::size_t depth = std::size_t{1} << (4 + below(14));  // 16 .. 131072
        std::string s;
        for (std::size_t k = 0; k < depth && s.size() + o.size() <= max_len_; ++k) s += o;
        insert(in, below(in.size() + 1), to_bytes(s));
        break;
      }
      default:  // truncate
        if (!in.empty()) in.resize(below(in.size()));
        break;
    }
  }

  std::mt19937_64 rng_;
  std::size_t max_len_;
  std::vector<bytes_t> dict_;
};

int usage() {
  std::fprintf(stderr,
               "usage: fuzz_target [--runs N] [--seconds S] [--seed K] [--max-len BYTES] "
               "[--timeout-ms MS] [--dict FILE] [--artifact-prefix PATH] [--verbose] "
               "CORPUS_DIR_OR_FILE...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t runs = 100000, seed = 1;
  double seconds = 10;
  std::size_t max_len = 1 << 18;
  long timeout_ms = 10000;
  bool verbose = false;
  std::vector<bytes_t> dict;
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--verbose") {
      verbose = true;
    } else if (a.substr(0, 2) == "--") {
      v = value();
      if (!v) return usage();
      if (a == "--runs")
        runs = std::strtoull(v, nullptr, 10);
      else if (a == "--seconds")
        seconds = std::strtod(v, nullptr);
      else if (a == "--seed")
        seed = std::strtoull(v, nullptr, 10);
      else if (a == "--max-len")
        max_len = std::strtoull(v, nullptr, 10);
      else if (a == "--timeout-ms")
        timeout_ms = std::strtol(v, nullptr, 10);
      else if (a == "--dict")
        dict = read_dictionary(v);
      else if (a == "--artifact-prefix")
        std::snprintf(g_prefix, sizeof g_prefix, "%s", v);
      else
        return usage();
    } else {
      inputs.emplace_back(a);
    }
  }
  if (inputs.empty()) return usage();

  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGILL, SIGBUS}) std::signal(sig, on_fatal_signal);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(on_sanitizer_death);
  // The watchdog: an input that runs past the timeout is written out and the process aborts.
  std::thread([timeout_ms] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::int64_t t0 = g_started_ns.load();
      if (t0 != 0 && now_ns() - t0 > std::int64_t{timeout_ms} * 1000000) {
        std::fprintf(stderr, "fuzz driver: an input ran past %ld ms\n", timeout_ms);
        dump_input("timeout");
        std::_Exit(70);
      }
    }
  }).detach();

  std::vector<bytes_t> seeds;
  for (const auto& p : inputs) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(p);
    }
    for (const auto& f : files) {
      seeds.push_back(read_file(f));
      if (verbose)
        std::fprintf(stderr, "seed %s (%zu bytes)\n", f.string().c_str(), seeds.back().size());
    }
  }
  const auto t0 = clock_type::now();
  for (const auto& s : seeds) run_one(s);
  const std::size_t seed_runs = seeds.size();
  if (seeds.empty()) seeds.emplace_back();

  // The pool: the seeds and a window of recent mutants, so that mutations stack over runs.
  mutator m(seed, max_len, std::move(dict));
  std::vector<bytes_t> recent;
  std::uint64_t done = 0;
  auto elapsed = [&] { return std::chrono::duration<double>(clock_type::now() - t0).count(); };
  while (done < runs && elapsed() < seconds) {
    const bool from_recent = !recent.empty() && m.below(3) == 0;
    const bytes_t& base =
        from_recent ? recent[m.below(recent.size())] : seeds[m.below(seeds.size())];
    const bytes_t& other = seeds[m.below(seeds.size())];
    bytes_t input = m.mutate(base, other);
    run_one(input);
    ++done;
    if (recent.size() < 256)
      recent.push_back(std::move(input));
    else
      recent[m.below(recent.size())] = std::move(input);
  }
  const double t = elapsed();
  std::printf(
      "fuzz driver: %zu seeds and %llu mutated inputs in %.1f s (%.0f/s), seed %llu: no "
      "failure\n",
      seed_runs, static_cast<unsigned long long>(done), t,
      t > 0 ? static_cast<double>(done + seed_runs) / t : 0.0,
      static_cast<unsigned long long>(seed));
  return 0;
}
