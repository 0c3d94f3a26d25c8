// `vocablens report RUN_DIR [--open] [--out FILE]`: the run directory as one self-contained HTML page
// (RUN_DIR/report.html) and a Jupyter notebook (RUN_DIR/vocablens.ipynb) that redraws every figure.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cli/command.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/notebook.hpp"
#include "vocablens/report.hpp"

namespace {

namespace fs = std::filesystem;

struct ReportCmdOptions {
  std::string run_dir;
  std::string out;
  std::string notebook;
  bool no_notebook = false;
  bool open = false;
  bool example = false;
};

// Opens `path` with $BROWSER or xdg-open / open, without a shell. Returns false when none could start.
bool open_in_browser(const std::string& path) {
  std::vector<std::string> candidates;
  if (const char* b = std::getenv("BROWSER"); b && *b) candidates.push_back(b);
#ifdef __APPLE__
  candidates.push_back("open");
#else
  candidates.push_back("xdg-open");
#endif
  std::string url = "file://" + path;
  for (const auto& prog : candidates) {
    pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      // Detach from our stdout so that the browser's chatter does not mix with ours.
      ::execlp(prog.c_str(), prog.c_str(), url.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  }
  return false;
}

int run_report(const ReportCmdOptions& o) {
  if (o.example) {
    vocablens::ensure_directory(o.run_dir);
    for (const auto& r : vocablens::example_results()) vocablens::write_result(r, o.run_dir);
    fmt::print("wrote example results to {}/\n", o.run_dir);
  }
  auto results = vocablens::read_run_directory(o.run_dir);
  if (results.empty())
    throw vocablens::FormatError(o.run_dir,
                                 "no vocablens results (<kind>.json) in this directory; write one with an "
                                 "analysis command's --out DIR");
  std::string html = vocablens::write_report(results, o.run_dir, o.out);
  fmt::print("report:   {} ({} result{})\n", html, results.size(), results.size() == 1 ? "" : "s");
  if (!o.no_notebook) {
    std::string nb = vocablens::write_notebook(results, o.run_dir, o.notebook);
    fmt::print("notebook: {}\n", nb);
  }
  if (o.open) {
    std::error_code ec;
    std::string abs = fs::absolute(html, ec).lexically_normal().string();
    if (ec) abs = html;
    if (!open_in_browser(abs)) fmt::print("could not start a browser ($BROWSER, xdg-open); open file://{}\n", abs);
  }
  return 0;
}

vocablens::cli::Register registered_cmd_report{
    "report", "Render a run directory as one self-contained HTML page (and a Jupyter notebook)",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<ReportCmdOptions>();
      sub.add_option("RUN_DIR", o->run_dir, "A run directory written by an analysis command's --out")->required();
      sub.add_option("--out", o->out, "Where to write the page (default RUN_DIR/report.html)")->type_name("FILE");
      sub.add_option("--notebook", o->notebook, "Where to write the notebook (default RUN_DIR/vocablens.ipynb)")
          ->type_name("FILE");
      sub.add_flag("--no-notebook", o->no_notebook, "Do not write the notebook");
      sub.add_flag("--open", o->open, "Open the page in a browser ($BROWSER or xdg-open)");
      sub.add_flag("--example", o->example, "First write synthetic results of every kind into RUN_DIR (a preview of the report)");
      return [o] { return run_report(*o); };
    }};

}  // namespace
