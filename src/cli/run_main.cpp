// The `vocablens` command line: dispatches to the subcommands registered in src/cli/cmd_*.cpp.
// Its main() is src/cli/main.cpp; the test suite's fork server (tests/support/cli_server.cpp) links the same
// objects and calls run_main() in each of its forked workers.
#include "cli/run_main.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>

#include "cli/blas_kernels.hpp"
#include "cli/command.hpp"
#include "cli/output.hpp"
#include "cli/signals.hpp"
#include "cli/suggest.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/timings.hpp"

namespace vocablens::cli {
std::vector<CommandInfo>& registry() {
  static std::vector<CommandInfo> r;
  return r;
}
}  // namespace vocablens::cli

int vocablens::cli::run_main(int argc, char** argv) {
  using namespace vocablens;
  // First thing: SIGINT/SIGTERM remove half-written temporary files, say so, exit 130 (cli/signals.cpp).
  cli::install_signal_handlers();
  cli::arguments().assign(argv, argv + argc);  // the provenance's command line (cli/output.hpp)
  // LibTorch allocates and frees activation buffers of a few MB per layer and window. glibc serves blocks
  // above its adaptive mmap threshold with fresh mappings and trims the heap eagerly, so every buffer came
  // back as new pages to fault in (a third of the time of a corpus lens on a small model went to the
  // kernel). Keep blocks up to 32 MB (glibc's maximum) in the heap and trim only above 256 MB free.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  CLI::App app{"vocablens " VOCABLENS_VERSION
               " — read a transformer's internals in vocabulary space.\n"
               "MODEL is a Hugging Face directory (config.json + model.safetensors | model.safetensors.index.json |\n"
               "pytorch_model.bin | pytorch_model.bin.index.json), a GGUF file (.gguf), a llama2.c checkpoint (.bin), or a "
               "llama2.c ckpt.pt.\n"
               "Run `vocablens <command> --help` for a command's options."};
  app.require_subcommand(1);
  // How products with float16/bfloat16/quantized weights are computed (vocablens/weight.hpp). One option under two
  // names: --compute (the mode's name since int8 exists) and --dtype (its older name); VOCABLENS_COMPUTE or
  // VOCABLENS_DTYPE set the default.
  std::string dtype = std::getenv("VOCABLENS_COMPUTE") ? std::getenv("VOCABLENS_COMPUTE")
                      : std::getenv("VOCABLENS_DTYPE") ? std::getenv("VOCABLENS_DTYPE")
                                                       : "float32";
  app.add_option("--compute,--dtype", dtype,
                 "How products with weights stored as F16/BF16/quantized are computed: float32 (default; weights "
                 "upcast one tile at a time, exact against the stored weights); bfloat16 (activations and weights "
                 "rounded to bf16, float32 accumulation, ~1e-2 relative error; about twice as fast on CPUs with "
                 "AVX512-BF16); int8 (llama.cpp's numerics and speed for GGUF Q4_0/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K "
                 "weights: activations quantized to 8 bits per block as llama.cpp does, integer dot products; "
                 "logits move by ~0.1-0.3 from the exact path on small test models; other weight types stay exact, said on "
                 "stderr). Give it "
                 "before the command, e.g. `vocablens --compute int8 lens model.gguf ...` (or VOCABLENS_COMPUTE)")
      ->check(CLI::IsMember({"float32", "bfloat16", "int8"}));
  app.set_version_flag("--version", std::string(VOCABLENS_VERSION));
  auto& reg = cli::registry();
  cli::add_declared_commands(reg);
  std::sort(reg.begin(), reg.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, cli::Runner> runners;
  bool allow_nonfinite = false;
  bool show_timings = false;
  for (auto& c : reg) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runners[sub] = c.setup(*sub);
    // NaN/Inf in weights or activations stop every command unless asked (vocablens/nonfinite.hpp).
    sub->add_flag("--allow-nonfinite", allow_nonfinite,
                  "Continue (with a warning) when a weight or an activation is NaN or infinite; NaN then stays NaN "
                  "(null in JSON). Default: stop with exit 1, naming the tensor or the hook, layer and position");
    sub->add_flag("--timings", show_timings,
                  "Print a table of where the time went on stderr at the end: wall and CPU seconds of each phase "
                  "(load, tokenise, forward, analysis, write)");
    // A nested command (`tuned-lens train ... --timings`) hands the options it does not know to its parent.
    for (CLI::App* child : sub->get_subcommands([](CLI::App*) { return true; })) child->fallthrough();
  }
  // A mistyped command or option gets "did you mean", and every usage error exits 2.
  if (std::string msg = cli::unknown_command_message(app, argc, argv); !msg.empty()) {
    std::cerr << "vocablens: error: " << msg << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    if (std::string msg = cli::unknown_option_message(app, argc, argv); !msg.empty()) {
      std::cerr << "vocablens: error: " << msg << "\n";
      return 2;
    }
    app.exit(e);
    return 2;
  }
  // Before any work: get OpenBLAS's AVX kernels where it fell back to SSE3 ones (one kernel family per
  // instruction set for the commands that train from a seed) and OpenMP threads that sleep when idle
  // (cli/blas_kernels.hpp).
  cli::reexec_with_runtime_settings(argv, app.got_subcommand("train") || app.got_subcommand("demo"));
  if (allow_nonfinite) set_nonfinite_policy(NonFinitePolicy::Warn);
  if (show_timings) timings::enable();
  // The table comes last on stderr, after an error line too (the time until the error is still informative).
  struct PrintTimings {
    ~PrintTimings() { timings::print(stderr); }
  } print_timings;
  // Under mpirun, a rank that fails ends every rank (dist::abort_job): the others would otherwise wait in
  // their next reduction forever.
  const int code = [&]() -> int {
    try {
      init_runtime();
      set_compute_dtype(compute_dtype_from_string(dtype));
      for (auto& [sub, run] : runners)
        if (sub->parsed()) {
          timings::Phase phase("analysis");  // what the command's own phases do not claim
          return run();
        }
    } catch (const UsageError& e) {
      std::cerr << "vocablens: error: " << e.what() << "\n";
      return 2;
    } catch (const Interrupted& e) {
      std::cerr << "vocablens: " << e.what() << "\n";
      return e.exit_code();
    } catch (const NonFiniteError& e) {
      std::cerr << "vocablens: error: " << e.what() << " (--allow-nonfinite continues anyway)\n";
      return 1;
    } catch (const Error& e) {
      std::cerr << "vocablens: error: " << e.what() << "\n";
      return 1;
    } catch (const std::bad_alloc&) {
      std::cerr << "vocablens: error: out of memory\n";
      return 1;
    } catch (const std::exception& e) {
      // Anything else is a bug or a LibTorch check: still one line, still a non-zero exit.
      std::string msg = e.what();
      auto nl = msg.find('\n');
      if (nl != std::string::npos) msg = msg.substr(0, nl);
      std::cerr << "vocablens: internal error: " << msg << "\n";
      return 3;
    }
    return 0;
  }();
  if (code != 0) vocablens::dist::abort_job(code);
  return code;
}
