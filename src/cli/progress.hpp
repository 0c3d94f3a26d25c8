// src/cli/progress.hpp — a one-line progress bar on stderr for work longer than a few seconds.
//
// Shown when stderr is a terminal, or always with VOCABLENS_PROGRESS=1 (tests, logs); redrawn at most ten
// times a second, with the time left at the pace so far once a second has passed; erased when the work ends
// (ProgressBar::finish or the destructor).
//
//   vocablens::cli::ProgressBar bar("heads");
//   opts.progress = bar.callback();           // empty std::function when the bar is not shown
//   auto a = vocablens::analyze_heads(m, opts, tok.get());
//   bar.finish();
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace vocablens::cli {

class ProgressBar {
 public:
  /// `label` prefixes the bar ("heads"); `unit` follows the counts ("circuits").
  ProgressBar(std::string label, std::string unit);
  ~ProgressBar() { finish(); }
  /// The callback to hand to an analysis: (done, total). Empty when the bar is not shown.
  std::function<void(int64_t, int64_t)> callback();
  /// Erases the bar (when one was drawn). Idempotent.
  void finish();

 private:
  void draw(int64_t done, int64_t total);
  std::string label_, unit_;
  bool shown_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point last_{}, start_{};
};

}  // namespace vocablens::cli
