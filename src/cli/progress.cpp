// Progress on stderr; see progress.hpp.
#include "cli/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace vocablens::cli {

std::string duration_text(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  if (s < 60) return fmt::format("{:.1f}s", s);
  const int64_t t = static_cast<int64_t>(s);
  if (t < 3600) return fmt::format("{}m{:02d}s", t / 60, static_cast<int>(t % 60));
  return fmt::format("{}h{:02d}m", t / 3600, static_cast<int>(t / 60 % 60));
}

double progress_line_interval() {
  const char* e = std::getenv("VOCABLENS_PROGRESS_INTERVAL");
  if (e && *e) {
    char* end = nullptr;
    const double v = std::strtod(e, &end);
    if (end != e && *end == '\0' && v >= 0 && std::isfinite(v)) return v;
  }
  return 30.0;
}

ProgressBar::ProgressBar(std::string label, std::string unit) : label_(std::move(label)), unit_(std::move(unit)) {
  const char* env = std::getenv("VOCABLENS_PROGRESS");
  if (env && *env) mode_ = std::string(env) != "0" ? Mode::Bar : Mode::None;
  else mode_ = ::isatty(STDERR_FILENO) == 1 ? Mode::Bar : Mode::Lines;
  interval_ = progress_line_interval();
}

std::function<void(int64_t, int64_t)> ProgressBar::callback() {
  if (mode_ == Mode::None) return {};
  return [this](int64_t done, int64_t total) { draw(done, total); };
}

// "33.0%  2712/8191 tokens · 812 tokens/s · ETA 6.7s": the rate and the time left at the pace so far, once half a
// second of work gives a pace to go by.
std::string ProgressBar::status(int64_t done, int64_t total, double elapsed) const {
  const double f = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  std::string s = fmt::format("{:5.1f}%  {}/{} {}", f * 100, done, total, unit_);
  if (done > 0 && elapsed >= 0.5) {
    const double rate = static_cast<double>(done) / elapsed;
    s += rate >= 100 ? fmt::format(" · {:.0f} {}/s", rate, unit_) : fmt::format(" · {:.3g} {}/s", rate, unit_);
    if (done < total) s += " · ETA " + duration_text(static_cast<double>(total - done) / rate);
  }
  return s;
}

void ProgressBar::draw(int64_t done, int64_t total) {
  const auto now = std::chrono::steady_clock::now();
  if (!started_) {
    started_ = true;
    start_ = last_ = now;
  }
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (mode_ == Mode::Lines) {
    // A line per interval, none before the first interval has passed (short work prints nothing).
    if (done >= total || std::chrono::duration<double>(now - last_).count() < interval_) return;
    last_ = now;
    fmt::print(stderr, "{}: {} ({} so far)\n", label_, status(done, total, elapsed), duration_text(elapsed));
    std::fflush(stderr);
    return;
  }
  if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double f = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  const int filled = static_cast<int>(f * 30);
  fmt::print(stderr, "\r\033[K{} [{}{}] {}", label_, std::string(static_cast<size_t>(filled), '#'),
             std::string(static_cast<size_t>(30 - filled), '.'), status(done, total, elapsed));
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace vocablens::cli
