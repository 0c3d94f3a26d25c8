// src/cli/progress.hpp — progress of work longer than a few seconds, on stderr: a bar on a terminal, a line now
// and then in a log.
//
// On a terminal (or always with VOCABLENS_PROGRESS=1): a one-line bar redrawn at most ten times a second, with
// the rate and the time left at the pace so far once half a second has passed; erased when the work ends
// (ProgressBar::finish or the destructor). Off a terminal (logs, CI, nohup): one line every
// VOCABLENS_PROGRESS_INTERVAL seconds (default 30), none for work that ends sooner. VOCABLENS_PROGRESS=0: nothing.
//
//   vocablens::cli::ProgressBar bar("heads", "circuits");
//   opts.progress = bar.callback();           // empty std::function when nothing is shown
//   auto a = vocablens::analyze_heads(m, opts, tok.get());
//   bar.finish();
//
//   lens --corpus [##########....................]  33.0%  2712/8191 tokens · 812 tokens/s · ETA 6.7s
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace vocablens::cli {

/// "4.2s", "3m05s", "2h10m"; "?" for a negative or non-finite value.
std::string duration_text(double seconds);
/// Seconds between progress lines off a terminal: VOCABLENS_PROGRESS_INTERVAL (>= 0), else 30.
double progress_line_interval();

class ProgressBar {
 public:
  /// `label` prefixes the bar ("heads"); `unit` follows the counts ("circuits") and names the rate.
  ProgressBar(std::string label, std::string unit);
  ~ProgressBar() { finish(); }
  /// The callback to hand to an analysis: (done, total). Empty when nothing is shown.
  std::function<void(int64_t, int64_t)> callback();
  /// Erases the bar (when one was drawn). Idempotent.
  void finish();

 private:
  enum class Mode { None, Bar, Lines };
  void draw(int64_t done, int64_t total);
  std::string status(int64_t done, int64_t total, double elapsed) const;
  std::string label_, unit_;
  Mode mode_ = Mode::None;
  bool drawn_ = false, started_ = false;
  double interval_ = 30;
  std::chrono::steady_clock::time_point last_{}, start_{};
};

}  // namespace vocablens::cli
