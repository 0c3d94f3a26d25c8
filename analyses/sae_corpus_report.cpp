// An SAE over a corpus in the report: the evaluation metrics, the distribution of firing densities, and one
// card per feature with its max-activating contexts. Registry entry: vocablens/result_kinds.hpp.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "notebooks-export/report_blocks.hpp"
#include "notebooks-export/report_examples.hpp"
#include "notebooks-export/report_svg.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result_kinds.hpp"

namespace vocablens::kinds {
namespace {

using report_detail::LineChart;
using report_detail::Section;
using report_detail::Series;

// How many features fire at each log10 density (0.5-wide bins from 1e-6 to 1): the shape Neuronpedia and
// SAELens plot to judge an SAE (dead features on the far left, dense ones on the right).
void density_chart(Section& sec) {
  const NdArray* dens = sec.array({"density"});
  if (!dens || dens->numel() == 0) return;
  std::vector<double> bins(13, 0.0);
  LineChart c;
  for (int64_t i = 0; i < dens->numel(); ++i) {
    const double v = ndarray_value(*dens, i);
    if (!(v > 0)) continue;
    const int b = static_cast<int>(std::clamp(std::floor((std::log10(v) + 6.0) * 2.0), 0.0, 12.0));
    bins[static_cast<size_t>(b)] += 1;
  }
  for (int b = 0; b < 13; ++b) c.x_labels.push_back(fmt::format("1e{:.1f}", -6.0 + b / 2.0));
  c.series.push_back({"features (firing at least once)", bins});
  c.x_label = "firing density (log10, 0.5-wide bins)";
  c.y_label = "features";
  c.points = true;
  sec.html += "<div class=\"charts\"><div class=\"chartbox\">" +
              report_detail::figure("Feature firing density", svg_line_chart(c), "", false) + "</div></div>";
  sec.use(dens);
}

void render_feature_corpus(Section& sec) {
  const auto& S = sec.r.summary;
  if (auto it = S.find("metrics"); it != S.end() && it->is_object())
    sec.html += report_detail::figure("SAE evaluation over the corpus", report_detail::kv_list(*it), "", false);
  density_chart(sec);
  auto it = S.find("features");
  if (it == S.end() || !it->is_array() || it->empty()) return;
  const size_t max_pages = 200;
  std::string html = "<div class=\"cards\">";
  size_t n = 0;
  for (const auto& p : *it) {
    if (!p.is_object() || !p.contains("contexts") || !p["contexts"].is_array() || p["contexts"].empty()) continue;
    if (n++ >= max_pages) break;
    std::string title = "feature " + (p.contains("feature") ? p["feature"].dump() : std::string("?"));
    if (p.contains("density") && p["density"].is_number()) title += fmt::format(" · density {:.3g}", p["density"].get<double>());
    html += "<div class=\"card\"><div class=\"ctitle\">" + report_detail::esc(title) + "</div><table class=\"mini\">";
    for (const auto& c : p["contexts"]) {
      if (!c.is_object() || !c.contains("tokens") || !c["tokens"].is_array()) continue;
      const int64_t at = c.contains("at") && c["at"].is_number_integer() ? c["at"].get<int64_t>() : -1;
      std::string s;
      for (size_t k = 0; k < c["tokens"].size(); ++k) {
        const std::string t = c["tokens"][k].is_string() ? c["tokens"][k].get<std::string>() : c["tokens"][k].dump();
        s += static_cast<int64_t>(k) == at
                 ? "<span style=\"font-weight:700;text-decoration:underline\">" + report_detail::tok_html(t) + "</span>"
                 : report_detail::tok_html(t);
      }
      const double a = c.contains("activation") && c["activation"].is_number() ? c["activation"].get<double>() : NAN;
      html += "<tr><td>" + s + "</td><td class=\"num\">" + fmt::format("{:.4g}", a) + "</td></tr>";
    }
    html += "</table></div>";
  }
  html += "</div>";
  sec.html += report_detail::figure("Max-activating contexts (the activating token underlined)", html,
                                    n > max_pages ? fmt::format("first {} features with contexts", max_pages) : "", true);
  for (const char* a : {"context_features", "context_activations", "context_windows", "context_positions", "context_at",
                        "context_ids", "context_values"})
    sec.used_arrays.insert(a);
  sec.used_tables.insert("contexts");
}

Result sae_corpus_example(const ExampleInput&) {
  Result r;
  r.kind = "feature_corpus";
  r.settings = {{"corpus", "wiki.txt"}, {"sae", "saes/res-1"}, {"window", 128}, {"contexts", 2}};
  r.provenance = example_provenance("vocablens features fixtures/gpt2-tiny --sae saes/res-1 --corpus wiki.txt --out run");
  ExampleLcg rng{33};
  const int64_t D = 8, C = 5;
  std::vector<double> dens;
  std::vector<int64_t> fire, hist(static_cast<size_t>(D * 40), 0), cf, cids, cat, cw, cp;
  std::vector<double> ca;
  nlohmann::json pages = nlohmann::json::array();
  for (int64_t f = 0; f < D; ++f) {
    const int64_t cnt = f == 3 ? 0 : static_cast<int64_t>(1 + rng.next() * 900);
    fire.push_back(cnt);
    dens.push_back(cnt / 1000.0);
    hist[static_cast<size_t>(f * 40 + 15 + f)] = cnt;
    nlohmann::json ex = nlohmann::json::array();
    for (int64_t q = 0; cnt > 0 && q < 2; ++q) {
      nlohmann::json toks = nlohmann::json::array();
      for (int64_t k = 0; k < C; ++k) {
        const size_t t = static_cast<size_t>((f * 7 + q * 3 + k) % static_cast<int64_t>(kExampleVocab.size()));
        toks.push_back(kExampleVocab[t]);
        cids.push_back(static_cast<int64_t>(t));
      }
      const double a = 5.0 - q - rng.next();
      ex.push_back({{"tokens", toks}, {"at", 3}, {"activation", a}});
      cf.push_back(f);
      ca.push_back(a);
      cat.push_back(3);
      cw.push_back(q);
      cp.push_back(7);
    }
    pages.push_back({{"feature", f}, {"density", dens.back()}, {"contexts", ex}});
  }
  r.summary = {{"metrics",
                {{"positions", 1000},
                 {"dead_features", 1},
                 {"mean_l0", 12.5},
                 {"mse", 0.01},
                 {"explained_variance", 0.8},
                 {"ce_loss_score", 0.9}}},
               {"features", pages}};
  r.arrays["density"] = NdArray::f64({D}, dens.data());
  r.arrays["fire_count"] = NdArray::i64({D}, fire.data());
  r.arrays["histogram"] = NdArray::i64({D, 40}, hist.data());
  const int64_t R = static_cast<int64_t>(cf.size());
  r.arrays["context_features"] = NdArray::i64({R}, cf.data());
  r.arrays["context_activations"] = NdArray::f64({R}, ca.data());
  r.arrays["context_windows"] = NdArray::i64({R}, cw.data());
  r.arrays["context_positions"] = NdArray::i64({R}, cp.data());
  r.arrays["context_at"] = NdArray::i64({R}, cat.data());
  r.arrays["context_ids"] = NdArray::i64({R, C}, cids.data());
  return r;
}

}  // namespace

void register_sae_corpus_report(ResultKinds& k) {
  ResultKind f{"feature_corpus",
               "SAE features over a corpus",
               18,
               "SAE features over a corpus",
               render_feature_corpus,
               "",
               sae_corpus_example,
               {}};
  f.shapes = {{"density", "D"},           {"fire_count", "D"},       {"max_activation", "D"},      {"histogram", "D 40"},
              {"histogram_edges", "41"},  {"context_features", "R"}, {"context_activations", "R"}, {"context_windows", "R"},
              {"context_positions", "R"}, {"context_at", "R"},       {"context_ids", "R C"},       {"context_values", "R C"}};
  k.add(std::move(f));
}

}  // namespace vocablens::kinds
