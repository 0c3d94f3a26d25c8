// `compare`'s options, declared once (analyses/declared_options.hpp). compare reads two run directories and no
// model, so it is not a registered analysis (a registered one runs on a model): `vocablens compare` makes its
// flags from this declaration and Python's vocablens.compare() its keywords; both resolve through it.
#include "vocablens/compare.hpp"
#include "declared_options.hpp"
#include "vocablens/result.hpp"

namespace vocablens::entries {

const AnalysisDecl& compare_declaration() {
  static const AnalysisDecl d = [] {
    AnalysisDecl c;
    c.name = c.command = "compare";
    c.input = "runs";
    c.summary =
        "Two logit-lens runs side by side: Δ target probability, Δ rank and KL between the lenses per layer "
        "and position";
    c.options = {
        OptionDecl{"align", OptionType::Choice, "none",
                   "When the token counts differ: pair the first (start) or last (end) positions of each (none: an "
                   "error)"}
            .with_choices({"none", "start", "end"}),
    };
    return c;
  }();
  return d;
}

LensCompareOptions compare_options(const nlohmann::json& o) {
  LensCompareOptions co;
  const std::string align = o.at("align").get<std::string>();
  co.align = align == "end" ? LensAlign::End : align == "start" ? LensAlign::Start : LensAlign::None;
  return co;
}

Result compare_run_results(const Result& a, const Result& b, const std::string& dir_a, const std::string& dir_b,
                           const nlohmann::json& resolved) {
  LensCompareOptions co = compare_options(resolved);
  if (!dir_a.empty()) co.name_a = dir_a;
  if (!dir_b.empty()) co.name_b = dir_b;
  Result r = compare_lens_runs(a, b, co).to_result();
  r.provenance = a.provenance;  // the model path, config hash and tokenizer of A; both runs' below
  r.provenance["run_a"] = {{"dir", dir_a}, {"provenance", a.provenance}};
  r.provenance["run_b"] = {{"dir", dir_b}, {"provenance", b.provenance}};
  return r;
}

}  // namespace vocablens::entries
