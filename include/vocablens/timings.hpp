// vocablens/timings.hpp — where a command's time goes, phase by phase (the CLI's `--timings`).
//
// A phase is a named scope. Scopes nest; each phase is charged its own time only (a "forward" inside an
// "analysis" is taken out of the analysis), so the rows of the table add up to the total. Wall seconds come
// from the steady clock, CPU seconds from the process's CPU clock (every thread: the BLAS and ATen workers
// included), so CPU / wall shows how well a phase used the cores.
//
//   vocablens::timings::enable();                          // the CLI does this for --timings
//   { vocablens::timings::Phase p("load"); m = load_model(path); }
//   ...
//   vocablens::timings::print(stderr);
//   // phase          wall s     CPU s  calls  % wall
//   // load            0.412     0.398      1    9.8%
//   // forward         3.104     6.050      1   73.9%  ...
//
// Cost when not enabled: one relaxed atomic load per scope. Phases are recorded on the thread that called
// enable() only (the command's thread); scopes opened on other threads are ignored. The library marks
// "load" (load_model) and "forward" (run_forward); commands mark "tokenise", "analysis" and "write".
#pragma once
#include <cstdio>
#include <string>

namespace vocablens::timings {

/// Starts recording on the calling thread (clears what was recorded).
void enable();
bool enabled();

/// One scope of a phase; `name` must outlive the program's last print (use string literals).
class Phase {
 public:
  explicit Phase(const char* name);
  ~Phase();
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  bool on_ = false;
  const char* name_ = nullptr;
  double wall0_ = 0, cpu0_ = 0, child_wall_ = 0, child_cpu_ = 0;
  Phase* parent_ = nullptr;
};

/// The table of the phases recorded so far, in the order each first ran, and a total row.
std::string table();

/// Writes table() to `f` (nothing when not enabled).
void print(std::FILE* f);

}  // namespace vocablens::timings
