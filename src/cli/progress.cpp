// One-line progress bar on stderr; see progress.hpp.
#include "cli/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace vocablens::cli {

ProgressBar::ProgressBar(std::string label, std::string unit) : label_(std::move(label)), unit_(std::move(unit)) {
  const char* env = std::getenv("VOCABLENS_PROGRESS");
  if (env && *env) shown_ = std::string(env) != "0";
  else shown_ = ::isatty(STDERR_FILENO) == 1;
}

std::function<void(int64_t, int64_t)> ProgressBar::callback() {
  if (!shown_) return {};
  return [this](int64_t done, int64_t total) { draw(done, total); };
}

void ProgressBar::draw(int64_t done, int64_t total) {
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
  if (!drawn_) start_ = now;
  last_ = now;
  const double f = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  const int filled = static_cast<int>(f * 30);
  // the time left at the pace so far, once there is a pace to go by (a second of work and some done)
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string eta;
  if (done > 0 && done < total && elapsed >= 1.0)
    eta = fmt::format(" · ETA {:.0f} s   ", elapsed * static_cast<double>(total - done) / static_cast<double>(done));
  fmt::print(stderr, "\r{} [{}{}] {:5.1f}%  {}/{} {}{}", label_, std::string(static_cast<size_t>(filled), '#'),
             std::string(static_cast<size_t>(30 - filled), '.'), f * 100, done, total, unit_, eta);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  fmt::print(stderr, "\r{}\r", std::string(label_.size() + unit_.size() + 84, ' '));
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace vocablens::cli
