// Per-phase wall and CPU seconds (vocablens/timings.hpp).
#include "vocablens/timings.hpp"

#include <fmt/format.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace vocablens::timings {

namespace {

struct Row {
  const char* name;
  double wall = 0, cpu = 0;
  long calls = 0;
};

std::atomic<bool> g_on{false};
std::thread::id g_thread;
std::vector<Row> g_rows;
Phase* g_top = nullptr;  // innermost open phase
double g_start_wall = 0, g_start_cpu = 0;

double wall_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double cpu_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Row& row(const char* name) {
  for (auto& r : g_rows)
    if (std::strcmp(r.name, name) == 0) return r;
  g_rows.push_back(Row{name});
  return g_rows.back();
}

}  // namespace

void enable() {
  g_thread = std::this_thread::get_id();
  g_rows.clear();
  g_top = nullptr;
  g_start_wall = wall_now();
  g_start_cpu = cpu_now();
  g_on.store(true, std::memory_order_relaxed);
}

bool enabled() { return g_on.load(std::memory_order_relaxed); }

Phase::Phase(const char* name) {
  if (!enabled() || std::this_thread::get_id() != g_thread) return;
  on_ = true;
  name_ = name;
  parent_ = g_top;
  g_top = this;
  wall0_ = wall_now();
  cpu0_ = cpu_now();
}

Phase::~Phase() {
  if (!on_) return;
  const double w = wall_now() - wall0_, c = cpu_now() - cpu0_;
  Row& r = row(name_);
  r.wall += w - child_wall_;
  r.cpu += c - child_cpu_;
  ++r.calls;
  g_top = parent_;
  if (parent_) {
    parent_->child_wall_ += w;
    parent_->child_cpu_ += c;
  }
}

std::string table() {
  const double total_w = wall_now() - g_start_wall, total_c = cpu_now() - g_start_cpu;
  double sum_w = 0, sum_c = 0;
  std::string s = fmt::format("{:<12} {:>9} {:>9} {:>6} {:>7}\n", "phase", "wall s", "CPU s", "calls", "% wall");
  for (const auto& r : g_rows) {
    s += fmt::format("{:<12} {:>9.3f} {:>9.3f} {:>6} {:>6.1f}%\n", r.name, r.wall, r.cpu, r.calls,
                     total_w > 0 ? 100 * r.wall / total_w : 0.0);
    sum_w += r.wall;
    sum_c += r.cpu;
  }
  // Time outside every phase (argument parsing, runtime start-up, exit).
  s += fmt::format("{:<12} {:>9.3f} {:>9.3f} {:>6} {:>6.1f}%\n", "(other)", total_w - sum_w, total_c - sum_c, "",
                   total_w > 0 ? 100 * (total_w - sum_w) / total_w : 0.0);
  s += fmt::format("{:<12} {:>9.3f} {:>9.3f} {:>6} {:>6.1f}%\n", "total", total_w, total_c, "", 100.0);
  return s;
}

void print(std::FILE* f) {
  if (!enabled()) return;
  std::fputs(table().c_str(), f);
  std::fflush(f);
}

}  // namespace vocablens::timings
