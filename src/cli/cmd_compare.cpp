// `vocablens compare RUN_A RUN_B`: two logit-lens run directories side by side (see vocablens/compare.hpp).
#include <fmt/color.h>
#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>

#include "cli/command.hpp"
#include "cli/declared_flags.hpp"
#include "cli/output.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/declared_options.hpp"
#include "vocablens/error.hpp"

namespace {

using vocablens::UsageError;

struct CompareCliOptions {
  std::string run_a, run_b;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;  // compare's declaration (analyses/compare_options.cpp)
  vocablens::cli::OutputOptions out;
};

std::string cell(float v, const char* f) { return std::isfinite(v) ? fmt::format(fmt::runtime(f), v) : std::string("-"); }

void print_compare(const vocablens::LensCompareResult& c, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  fmt::print("{}\n", bold(fmt::format("compare · A {} ({}) · B {} ({})", c.name_a, c.model_a, c.name_b, c.model_b)));
  if (!c.prompt_a.empty() || !c.prompt_b.empty()) fmt::print("prompts: A {:?} · B {:?}\n", c.prompt_a, c.prompt_b);
  fmt::print("{} positions (align {}; A has {} tokens, B {}) · vocabulary: {}\n", c.T, c.align, c.T_a, c.T_b, c.vocab_check);
  if (c.layers != c.layers_b) fmt::print("layers paired by relative depth ({} of A, B's layer for each in the table)\n", c.n);
  fmt::print("{}\n", c.has_kl ? "KL between the two lenses from both runs' saved distributions" : "KL: " + c.kl_missing);
  const int64_t t = c.readout;
  fmt::print("\n{}\n", bold(fmt::format("position {}: A {} → {} · B {} → {}", t, c.tokens_a[static_cast<size_t>(t)],
                                       c.targets_a[static_cast<size_t>(t)].empty() ? "-" : c.targets_a[static_cast<size_t>(t)],
                                       c.tokens_b[static_cast<size_t>(t)],
                                       c.targets_b[static_cast<size_t>(t)].empty() ? "-" : c.targets_b[static_cast<size_t>(t)])));
  fmt::print("{}\n", bold(fmt::format("{:<8} {:<8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>9} {:>9}", "layer", "B layer", "p_A", "p_B",
                                      "Δp", "rank_A", "rank_B", "Δrank", "KL(A‖B)", "KL(B‖A)")));
  for (int64_t i = 0; i < c.n; ++i) {
    const size_t q = c.at(i, t);
    fmt::print("{:<8} {:<8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>9} {:>9}\n", c.layers[static_cast<size_t>(i)],
               c.layers_b[static_cast<size_t>(i)], cell(c.prob_a[q], "{:.4f}"), cell(c.prob_b[q], "{:.4f}"),
               cell(c.delta_prob[q], "{:+.4f}"), c.rank_a[q] > 0 ? std::to_string(c.rank_a[q]) : "-",
               c.rank_b[q] > 0 ? std::to_string(c.rank_b[q]) : "-", cell(c.delta_rank[q], "{:+.0f}"),
               c.has_kl ? cell(c.kl_ab[q], "{:.4f}") : "-", c.has_kl ? cell(c.kl_ba[q], "{:.4f}") : "-");
  }
  fmt::print("(every layer × position: --out DIR writes lens_compare.cells.csv; --report draws the heatmaps)\n");
}

// This command's own line and time (fill_provenance needs a model; the runs' provenance is kept below).
void own_provenance(vocablens::Result& r) {
  std::string& line = vocablens::cli::command_line();
  if (line.empty()) {
    std::string all;
    for (const std::string& a : vocablens::cli::arguments()) all += a + ' ';
    while (!all.empty() && all.back() == ' ') all.pop_back();
    line = all;
  }
  r.provenance["command_line"] = line;
  char buf[32];
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  r.provenance["created_utc"] = buf;
}

int run_compare(const CompareCliOptions& o) {
  vocablens::LensCompareOptions co = vocablens::entries::compare_options(vocablens::resolve_options(
      vocablens::entries::compare_declaration(), o.flags->given(), vocablens::Surface::Cli));
  co.name_a = o.run_a;
  co.name_b = o.run_b;
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Result a = vocablens::read_lens_run(o.run_a);
  vocablens::Result b = vocablens::read_lens_run(o.run_b);
  auto c = vocablens::compare_lens_runs(a, b, co);
  vocablens::Result r = c.to_result();
  r.provenance = a.provenance;  // the model path, config hash and tokenizer of A; both runs' below
  r.provenance["run_a"] = {{"dir", o.run_a}, {"provenance", a.provenance}};
  r.provenance["run_b"] = {{"dir", o.run_b}, {"provenance", b.provenance}};
  own_provenance(r);
  vocablens::cli::emit(r, o.out, [&] { print_compare(c, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_compare{
    "compare", vocablens::entries::compare_declaration().summary,
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<CompareCliOptions>();
      sub.add_option("RUN_A", o->run_a, "A `vocablens lens --out` directory")->required();
      sub.add_option("RUN_B", o->run_b, "Another one: a second prompt on the same model, or the same prompt on a model "
                                        "with the same tokenizer")->required();
      o->flags = std::make_shared<vocablens::cli::DeclaredFlags>(vocablens::entries::compare_declaration());
      o->flags->add_to(sub);
      sub.footer(
          "Differences are A − B, each run with its own target (the next token of its prompt, or its --target). "
          "KL(A‖B) and KL(B‖A) per layer and position need both runs made with `lens --save-probs`. Models of different "
          "depth are paired by relative depth. Runs of different vocabularies are refused.\n"
          "Example:\n  vocablens lens M --prompt \"The capital of France is\" --save-probs --out runs/fr\n"
          "  vocablens lens M --prompt \"The capital of Italy is\" --save-probs --out runs/it\n"
          "  vocablens compare runs/fr runs/it --out runs/fr-it --report");
      vocablens::cli::add_output_options(sub, o->out);
      return [o] { return run_compare(*o); };
    }};

}  // namespace
