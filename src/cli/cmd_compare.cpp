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
#include "analyses/declared_options.hpp"
#include "vocablens/error.hpp"

namespace {

using vocablens::UsageError;

struct CompareCliOptions {
  std::string run_a, run_b;
  std::shared_ptr<vocablens::cli::DeclaredFlags> flags;  // compare's declaration (analyses/compare_options.cpp)
  vocablens::cli::OutputOptions out;
};

std::string cell(float v, const char* f) { return std::isfinite(v) ? fmt::format(fmt::runtime(f), v) : std::string("-"); }

// The table view, read back from the Result (kind "lens_compare", vocablens/compare.hpp): the summary's runs and
// layers, the [layers, positions] arrays at the readout position, the targets from the cells table.
void print_compare(const vocablens::Result& r, bool color) {
  auto bold = [&](const std::string& t) { return color ? fmt::format(fmt::emphasis::bold, "{}", t) : t; };
  const auto& s = r.summary;
  const auto &A = s["a"], &B = s["b"];
  const std::string prompt_a = A["prompt"].get<std::string>(), prompt_b = B["prompt"].get<std::string>();
  fmt::print("{}\n",
             bold(fmt::format("compare · A {} ({}) · B {} ({})", A["run"].get<std::string>(), A["model"].get<std::string>(),
                              B["run"].get<std::string>(), B["model"].get<std::string>())));
  if (!prompt_a.empty() || !prompt_b.empty()) fmt::print("prompts: A {:?} · B {:?}\n", prompt_a, prompt_b);
  const int64_t T = s["positions"].get<int64_t>(), t = s["readout_position"].get<int64_t>();
  const auto &layers = s["layers"], &layers_b = s["layers_b"];
  const int64_t n = static_cast<int64_t>(layers.size());
  fmt::print("{} positions (align {}; A has {} tokens, B {}) · vocabulary: {}\n", T, r.settings["align"].get<std::string>(),
             A["n_tokens"].get<int64_t>(), B["n_tokens"].get<int64_t>(), s["vocabulary_check"].get<std::string>());
  if (layers != layers_b) fmt::print("layers paired by relative depth ({} of A, B's layer for each in the table)\n", n);
  const bool has_kl = r.arrays.count("kl_ab") > 0;
  fmt::print("{}\n",
             has_kl ? "KL between the two lenses from both runs' saved distributions" : "KL: " + s["kl"].get<std::string>());
  const vocablens::Table* cells = nullptr;  // one row per (layer, position), layer-major: the targets
  for (const auto& tab : r.tables)
    if (tab.name == "cells") cells = &tab;
  auto target = [&](int column) {
    const std::string v = cells && t < static_cast<int64_t>(cells->rows.size())
                              ? cells->rows[static_cast<size_t>(t)][static_cast<size_t>(column)].get<std::string>()
                              : std::string();
    return v.empty() ? std::string("-") : v;
  };
  fmt::print("\n{}\n",
             bold(fmt::format("position {}: A {} → {} · B {} → {}", t, s["tokens_a"][static_cast<size_t>(t)].get<std::string>(),
                              target(5), s["tokens_b"][static_cast<size_t>(t)].get<std::string>(), target(6))));
  fmt::print("{}\n", bold(fmt::format("{:<8} {:<8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>9} {:>9}", "layer", "B layer", "p_A",
                                      "p_B", "Δp", "rank_A", "rank_B", "Δrank", "KL(A‖B)", "KL(B‖A)")));
  const float* prob_a = vocablens::cli::array_values<float>(r, "prob_a");
  const float* prob_b = vocablens::cli::array_values<float>(r, "prob_b");
  const float* delta_prob = vocablens::cli::array_values<float>(r, "delta_prob");
  const float* delta_rank = vocablens::cli::array_values<float>(r, "delta_rank");
  const int64_t* rank_a = vocablens::cli::array_values<int64_t>(r, "rank_a");
  const int64_t* rank_b = vocablens::cli::array_values<int64_t>(r, "rank_b");
  const float* kl_ab = vocablens::cli::array_values<float>(r, "kl_ab");
  const float* kl_ba = vocablens::cli::array_values<float>(r, "kl_ba");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t q = i * T + t;
    fmt::print("{:<8} {:<8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>9} {:>9}\n", layers[static_cast<size_t>(i)].get<std::string>(),
               layers_b[static_cast<size_t>(i)].get<std::string>(), cell(prob_a[q], "{:.4f}"), cell(prob_b[q], "{:.4f}"),
               cell(delta_prob[q], "{:+.4f}"), rank_a[q] > 0 ? std::to_string(rank_a[q]) : "-",
               rank_b[q] > 0 ? std::to_string(rank_b[q]) : "-", cell(delta_rank[q], "{:+.0f}"),
               has_kl ? cell(kl_ab[q], "{:.4f}") : "-", has_kl ? cell(kl_ba[q], "{:.4f}") : "-");
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
  const nlohmann::json resolved =
      vocablens::resolve_options(vocablens::entries::compare_declaration(), o.flags->given(), vocablens::Surface::Cli);
  if (!o.out.out_dir.empty()) vocablens::ensure_directory(o.out.out_dir);
  vocablens::Result r = vocablens::entries::compare_run_results(vocablens::read_lens_run(o.run_a),
                                                                vocablens::read_lens_run(o.run_b), o.run_a, o.run_b, resolved);
  own_provenance(r);
  vocablens::cli::emit(r, o.out, [&] { print_compare(r, vocablens::cli::use_color(o.out)); });
  return 0;
}

vocablens::cli::Register registered_cmd_compare{
    "compare", vocablens::entries::compare_declaration().summary, [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<CompareCliOptions>();
      sub.add_option("RUN_A", o->run_a, "A `vocablens lens --out` directory")->required();
      sub.add_option("RUN_B", o->run_b,
                     "Another one: a second prompt on the same model, or the same prompt on a model "
                     "with the same tokenizer")
          ->required();
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
