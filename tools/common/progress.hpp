#pragma once
// remat-plan's progress display for long solves: one reporter for every policy that reports, the
// DP policies (a fraction of the table done), the MILP ones (checkmate's incumbent and bound),
// rockmate (kinds of blocks and block solves done) and a portfolio (the member running). It
// writes one line:
//   remat-plan: rotor 1.3 s: 42%
//   remat-plan: checkmate 12.3 s: best 1.234 s, bound 1.1 s, gap 10.86%
//   remat-plan: checkmate 0.4 s: no schedule yet, bound 1.1 s
//   remat-plan: rockmate 3.1 s: blocks 2 of 5 kinds, solves 130 of 500
//   remat-plan: auto 0.8 s: rotor (4 of 9)
// On a terminal the line overwrites itself ('\r', then "erase to the end of the line") at most
// ten times a second and is erased when the solve ends, so the summary or the JSON that follows
// starts on a clean line; on a log (--progress with stderr redirected) it is a line per tenth of
// a DP, a line per kind of blocks done, or a line every five seconds of a MILP and its last
// report at the end. Elapsed time is the display's own clock from its construction: checkmate's
// --find-minimum runs several MILP solves, each with a clock of its own, and the user waits for
// all of them.
// Rockmate's blocks are solved by many small MILPs in parallel: their incumbents and bounds mean
// nothing for the whole plan, so rockmate reports blocks and solves only.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace remat_cli {

/// Where a solve is, as far as its policy tells; what it does not tell stays empty.
struct progress_state {
  double elapsed = 0;                              ///< seconds since the solve began
  std::optional<double> fraction = {};             ///< a DP: the share of its table done, 0..1
  std::optional<double> incumbent = {};            ///< a MILP: the best makespan found (seconds)
  std::optional<double> bound = {};                ///< a MILP: its proven lower bound (seconds)
  std::optional<std::pair<int, int>> blocks = {};  ///< rockmate, hiremate: kinds done, of all
  std::optional<std::pair<int, int>> solves = {};  ///< rockmate, hiremate: solves done, of all
  std::optional<std::string> step = {};  ///< a portfolio: the member running; hiremate: the level
};

/// The progress line, without a line end: "remat-plan: <policy> <elapsed> s: <what>".
inline std::string progress_line(std::string_view policy, const progress_state& s) {
  char buf[200];
  std::string line = "remat-plan: " + std::string(policy);
  std::snprintf(buf, sizeof buf, " %.1f s", s.elapsed);
  line += buf;
  std::string what;
  auto add = [&what](const char* text) {
    what += (what.empty() ? ": " : ", ") + std::string(text);
  };
  if (s.step) add(s.step->c_str());
  if (s.fraction) {
    std::snprintf(buf, sizeof buf, "%d%%",
                  static_cast<int>(std::clamp(*s.fraction, 0.0, 1.0) * 100.0));
    add(buf);
  }
  const bool found = s.incumbent && std::isfinite(*s.incumbent);
  const bool bounded = s.bound && std::isfinite(*s.bound);
  if (s.incumbent && !found) add("no schedule yet");
  if (found) {
    std::snprintf(buf, sizeof buf, "best %.6g s", *s.incumbent);
    add(buf);
  }
  if (bounded) {
    std::snprintf(buf, sizeof buf, "bound %.6g s", *s.bound);
    add(buf);
  }
  if (found && bounded) {
    const double gap = *s.incumbent > 0 ? 100.0 * (*s.incumbent - *s.bound) / *s.incumbent : 0.0;
    std::snprintf(buf, sizeof buf, "gap %.2f%%", std::max(0.0, gap));
    add(buf);
  }
  if (s.blocks) {
    std::snprintf(buf, sizeof buf, "blocks %d of %d kinds", s.blocks->first, s.blocks->second);
    add(buf);
  }
  if (s.solves) {
    std::snprintf(buf, sizeof buf, "solves %d of %d", s.solves->first, s.solves->second);
    add(buf);
  }
  return line + what;
}

/// Shows a solve's progress on a stream (stderr): on a terminal, in a log, or not at all.
class progress_display {
 public:
  enum class mode { off, terminal, log };

  progress_display(std::string policy, mode m, std::FILE* out = stderr)
      : policy_(std::move(policy)), mode_(m), out_(out), start_(clock::now()) {}
  progress_display(const progress_display&) = delete;
  progress_display& operator=(const progress_display&) = delete;

  [[nodiscard]] bool on() const noexcept { return mode_ != mode::off; }

  /// A report; elapsed is filled from the display's clock.
  void report(progress_state s) {
    if (mode_ == mode::off) return;
    const double now = std::chrono::duration<double>(clock::now() - start_).count();
    s.elapsed = now;
    const bool last =
        (s.fraction && *s.fraction >= 1.0) || (s.blocks && s.blocks->first == s.blocks->second &&
                                               (!s.solves || s.solves->first == s.solves->second));
    if (mode_ == mode::terminal) {
      if (shown_ && now - last_time_ < 0.1 && !last) return;
      std::fprintf(out_, "\r%s\x1b[K", progress_line(policy_, s).c_str());
    } else {
      // A log: a line per tenth of a DP, per kind of blocks done, or every 5 s of a MILP.
      const int tenth =
          s.fraction ? static_cast<int>(std::clamp(*s.fraction, 0.0, 1.0) * 10.0) : -1;
      const int blocks = s.blocks ? s.blocks->first : -1;
      const bool news = s.step       ? *s.step != last_step_
                        : s.fraction ? tenth != last_tenth_
                        : s.blocks   ? blocks != last_blocks_
                                     : now - last_time_ >= 5.0;
      if (shown_ && !news) {
        skipped_ = s;  // the MILP's last state, for done()
        return;
      }
      skipped_.reset();
      last_tenth_ = tenth;
      last_blocks_ = blocks;
      if (s.step) last_step_ = *s.step;
      if (s.fraction) s.fraction = tenth / 10.0;
      std::fprintf(out_, "%s\n", progress_line(policy_, s).c_str());
      finished_ = s.fraction && tenth == 10;
    }
    std::fflush(out_);
    shown_ = true;
    last_time_ = now;
  }
  /// A DP's fraction of its table done.
  void percent(double fraction) { report({.fraction = fraction}); }

  /// After the solve: erases the terminal line; on a log, a DP that finished says 100%, and a
  /// MILP's last report, if it was not written (within 5 s of the one before), is.
  void done(bool solved) {
    if (!shown_) return;
    if (mode_ == mode::terminal) {
      std::fprintf(out_, "\r\x1b[K");
    } else if (solved && last_tenth_ >= 0 && !finished_) {
      report({.fraction = 1.0});
    } else if (skipped_ && !skipped_->fraction) {
      std::fprintf(out_, "%s\n", progress_line(policy_, *skipped_).c_str());
    }
    std::fflush(out_);
  }

 private:
  using clock = std::chrono::steady_clock;
  std::string policy_;
  mode mode_;
  std::FILE* out_;
  clock::time_point start_;
  bool shown_ = false, finished_ = false;
  double last_time_ = 0;
  int last_tenth_ = -1, last_blocks_ = -1;
  std::string last_step_;
  std::optional<progress_state> skipped_;
};

}  // namespace remat_cli
