// SAE / transcoder features in the report: one page (card) per feature with the tokens its decoder direction
// promotes and suppresses, as Neuronpedia's feature pages open. Registry entry: vocablens/result_kinds.hpp.
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

std::string token_rows(const nlohmann::json& toks, const nlohmann::json& vals) {
  std::string s;
  for (size_t i = 0; i < toks.size() && i < vals.size(); ++i) {
    const std::string t = toks[i].is_string() ? toks[i].get<std::string>() : toks[i].dump();
    const double v = vals[i].is_number() ? vals[i].get<double>() : NAN;
    s += "<tr><td>" + report_detail::tok_html(t) + "</td><td class=\"num\">" + fmt::format("{:+.4g}", v) + "</td></tr>";
  }
  return s;
}

// Per feature (x: its position in the list): the largest and smallest logit weight and the decoder norm —
// the spread of how strongly each feature writes into token space.
void strength_chart(Section& sec) {
  const NdArray* top = sec.array({"top_values"});
  const NdArray* bot = sec.array({"bottom_values"});
  const NdArray* ids = sec.array({"feature_ids"});
  if (!top || top->shape.size() != 2 || top->shape[0] == 0) return;
  const int64_t N = top->shape[0], k = top->shape[1];
  LineChart c;
  Series best{"largest logit weight", {}}, worst{"smallest logit weight", {}}, norm{"decoder norm", {}};
  const NdArray* dn = sec.array({"decoder_norms"});
  for (int64_t i = 0; i < N; ++i) {
    best.y.push_back(ndarray_value(*top, i * k));
    if (bot && bot->shape == top->shape) worst.y.push_back(ndarray_value(*bot, i * k));
    if (dn && dn->numel() == N) norm.y.push_back(ndarray_value(*dn, i));
    if (ids && ids->numel() == N) c.x_labels.push_back("feature " + std::to_string(static_cast<int64_t>(ndarray_value(*ids, i))));
  }
  c.series.push_back(std::move(best));
  if (!worst.y.empty()) c.series.push_back(std::move(worst));
  if (!norm.y.empty()) c.series.push_back(std::move(norm));
  c.x_label = "feature";
  c.y_label = "logit weight";
  c.points = N <= 120;
  sec.html += "<div class=\"charts\"><div class=\"chartbox\">" +
              report_detail::figure("Strongest promoted and suppressed token per feature", svg_line_chart(c), "", false) +
              "</div></div>";
  sec.use(top);
  if (bot) sec.use(bot);
  if (dn) sec.use(dn);
}

void render_features(Section& sec) {
  strength_chart(sec);
  const auto& S = sec.r.summary;
  auto it = S.find("features");
  if (it == S.end() || !it->is_array() || it->empty()) return;
  const size_t max_pages = 200;
  std::string html = "<div class=\"cards\">";
  size_t n = 0;
  for (const auto& p : *it) {
    if (!p.is_object() || n++ >= max_pages) continue;
    std::string title = "feature " + (p.contains("feature") ? p["feature"].dump() : std::string("?"));
    if (p.contains("decoder_norm") && p["decoder_norm"].is_number())
      title += fmt::format(" · ‖d‖ {:.3g}", p["decoder_norm"].get<double>());
    html += "<div class=\"card\"><div class=\"ctitle\">" + report_detail::esc(title) + "</div><table class=\"mini\">";
    if (p.contains("pos_str") && p.contains("pos_values"))
      html += "<tr><th>promotes</th><th>logit weight</th></tr>" + token_rows(p["pos_str"], p["pos_values"]);
    if (p.contains("neg_str") && p.contains("neg_values"))
      html += "<tr><th>suppresses</th><th>logit weight</th></tr>" + token_rows(p["neg_str"], p["neg_values"]);
    html += "</table></div>";
  }
  html += "</div>";
  const size_t total = it->size();
  sec.html += report_detail::figure(
      "Feature pages: tokens each decoder direction promotes and suppresses (W_dec[f] · W_U)", html,
      total > max_pages ? fmt::format("first {} of {} features; every feature is in top_ids / bottom_ids", max_pages, total) : "",
      true);
  for (const char* a : {"top_ids", "top_values", "bottom_ids", "bottom_values", "feature_ids"}) sec.used_arrays.insert(a);
  sec.used_tables.insert("top_k");
}

Result features_example(const ExampleInput&) {
  Result r;
  r.kind = "features";
  r.settings = {{"sae", "saes/gpt2-tiny-res-1"}, {"layout", "saelens"}, {"top_k", 5}, {"bottom", true}};
  r.provenance = example_provenance("vocablens features fixtures/gpt2-tiny --sae saes/res-1 --out run");
  ExampleLcg rng{32};
  nlohmann::json pages = nlohmann::json::array();
  const int64_t N = 6, k = 5;
  std::vector<int64_t> fid, tid, bid;
  std::vector<double> tv, bv;
  for (int64_t f = 0; f < N; ++f) {
    nlohmann::json ps = nlohmann::json::array(), pv = nlohmann::json::array(), ns = nlohmann::json::array(),
                   nv = nlohmann::json::array();
    fid.push_back(f * 7);
    for (int64_t q = 0; q < k; ++q) {
      size_t a = static_cast<size_t>((f * 3 + q) % static_cast<int64_t>(kExampleVocab.size()));
      size_t b = static_cast<size_t>((f * 5 + q + 11) % static_cast<int64_t>(kExampleVocab.size()));
      double va = 3.0 - 0.4 * q - rng.next() * 0.1, vb = -3.0 + 0.4 * q + rng.next() * 0.1;
      ps.push_back(kExampleVocab[a]);
      pv.push_back(va);
      ns.push_back(kExampleVocab[b]);
      nv.push_back(vb);
      tid.push_back(static_cast<int64_t>(a));
      tv.push_back(va);
      bid.push_back(static_cast<int64_t>(b));
      bv.push_back(vb);
    }
    pages.push_back({{"feature", f * 7},
                     {"decoder_norm", 1 + rng.next()},
                     {"pos_str", ps},
                     {"pos_values", pv},
                     {"neg_str", ns},
                     {"neg_values", nv}});
  }
  r.summary = {{"architecture", "standard"}, {"hook_name", "blocks.1.hook_resid_pre"}, {"d_sae", 96}, {"features", pages}};
  r.arrays["feature_ids"] = NdArray::i64({N}, fid.data());
  r.arrays["top_ids"] = NdArray::i64({N, k}, tid.data());
  r.arrays["top_values"] = NdArray::f64({N, k}, tv.data());
  r.arrays["bottom_ids"] = NdArray::i64({N, k}, bid.data());
  r.arrays["bottom_values"] = NdArray::f64({N, k}, bv.data());
  return r;
}

}  // namespace

void register_features_report(ResultKinds& k) {
  ResultKind f{"features", "SAE features in vocabulary space", 17, "SAE features", render_features, "", features_example, {}};
  f.shapes = {{"feature_ids", "N"},  {"decoder_norms", "N"}, {"top_ids", "N K"},
              {"top_values", "N K"}, {"bottom_ids", "N K"},  {"bottom_values", "N K"}};
  k.add(std::move(f));
}

}  // namespace vocablens::kinds
