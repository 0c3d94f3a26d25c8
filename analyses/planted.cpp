// The planted-structure checks of the demo (see include/vocablens/planted.hpp).
#include "vocablens/planted.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "vocablens/heads.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/synthetic.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/token_id.hpp"

namespace vocablens {

using json = nlohmann::json;

int64_t word_token(const Tokenizer& tok, const std::string& word) {
  std::vector<int64_t> pieces;
  if (auto id = single_token_id(tok, " " + word, &pieces)) return *id;
  return pieces.empty() ? -1 : pieces[0];
}

std::vector<double> LayerAccuracy::accuracy() const {
  std::vector<double> a;
  for (int64_t c : correct_by_layer) a.push_back(static_cast<double>(c) / static_cast<double>(std::max<int64_t>(1, n)));
  return a;
}

json LayerAccuracy::by_label() const {
  json acc = json::object();
  auto a = accuracy();
  for (size_t i = 0; i < layer_labels.size() && i < a.size(); ++i) acc[layer_labels[i]] = a[i];
  return acc;
}

std::string LayerAccuracy::summary_line() const {
  std::string per;
  auto a = accuracy();
  for (size_t i = 0; i < layer_labels.size() && i < a.size(); ++i)
    per += fmt::format("{}{} {:.0f}%", per.empty() ? "" : ", ", layer_labels[i], 100 * a[i]);
  return per;
}

FactCheck check_facts(const Model& m, const Tokenizer& tok, const SyntheticCorpus& world) {
  FactCheck fc;
  EncodeOptions eo;
  eo.add_bos = false;
  for (const auto& f : world.facts) {
    const int64_t target = word_token(tok, f.answer);
    auto ids = tok.encode(f.prompt, eo);
    LensOptions lo;
    lo.top_k = 1;
    lo.target = target;
    auto L = logit_lens(m, ids, lo);
    const int64_t T = L.n_positions(), n = L.n_layers();
    if (fc.layer_labels.empty()) {
      for (auto& l : L.layers) fc.layer_labels.push_back(l.label);
      fc.correct_by_layer.assign(static_cast<size_t>(n), 0);
    }
    json ranks = json::array();
    for (int64_t li = 0; li < n; ++li) {
      fc.correct_by_layer[static_cast<size_t>(li)] += L.top_id(li, T - 1, 0) == target;
      ranks.push_back(L.target_rank[L.at(li, T - 1)]);
    }
    const int64_t top = L.top_id(n - 1, T - 1, 0);
    fc.rows.push_back(
        {f.relation, f.prompt, f.answer, tok.display(top), top == target, L.target_prob[L.at(n - 1, T - 1)], ranks.dump()});
    ++fc.n;
  }
  return fc;
}

LayerAccuracy check_copying(const Model& m, const Tokenizer& tok, uint64_t seed, int64_t lines) {
  SyntheticOptions so;
  so.seed = seed;
  so.lines = lines;
  so.facts = so.classes = so.counting = 0;
  so.copying = 1;
  so.mark_prompts = false;
  const std::string text = synthetic_corpus(so).text;
  EncodeOptions eo;
  eo.add_bos = false;
  const auto colon = tok.token_to_id(" :");
  LayerAccuracy cc;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    auto ids = tok.encode(text.substr(pos, end - pos), eo);
    pos = end + 1;
    auto it = colon ? std::find(ids.begin(), ids.end(), *colon) : ids.end();
    if (it == ids.end()) continue;
    const int64_t p = it - ids.begin(), T = static_cast<int64_t>(ids.size());
    LensOptions lo;
    lo.top_k = 1;
    auto L = logit_lens(m, ids, lo);
    if (cc.layer_labels.empty()) {
      for (auto& l : L.layers) cc.layer_labels.push_back(l.label);
      cc.correct_by_layer.assign(L.layers.size(), 0);
    }
    for (int64_t t = p + 1; t + 1 < T; ++t) {  // predicting w2 .. wk of the repeat
      for (int64_t li = 0; li < L.n_layers(); ++li)
        cc.correct_by_layer[static_cast<size_t>(li)] += L.top_id(li, t, 0) == ids[static_cast<size_t>(t + 1)];
      ++cc.n;
    }
  }
  return cc;
}

OvCopyingCheck check_ov_copying(const HeadsAnalysis& a) {
  OvCopyingCheck oc;
  for (auto& hc : a.circuits) {
    if (hc.kind != CircuitKind::OV) continue;
    ++oc.n;
    oc.above_half += hc.copying_score > 0.5;
    if (hc.copying_score > oc.best) oc.best = hc.copying_score, oc.best_layer = hc.layer, oc.best_head = hc.head;
    oc.rows.push_back({hc.layer, hc.head, hc.copying_score, hc.weight_copying_score});
  }
  return oc;
}

json NeighbourCheck::precision() const {
  json prec = json::object();
  for (auto& [cls, v] : by_class) prec[cls] = static_cast<double>(v.first) / static_cast<double>(std::max<int64_t>(1, v.second));
  return prec;
}

NeighbourCheck check_neighbours(const at::Tensor& X, const Tokenizer& tok, const SyntheticCorpus& world, int64_t k) {
  NeighbourCheck nc;
  for (const char* cls : {"country", "city", "animal", "fruit"}) {
    for (const auto& w : synthetic_class_members(cls)) {
      const int64_t id = word_token(tok, w);
      NeighbourOptions no;
      no.k = k;
      auto nb = neighbours(X, &tok, "#" + std::to_string(id), no);
      int64_t same = 0;
      std::string list;
      for (auto& n : nb.neighbours) {
        std::string t = tok.token_bytes(n.id);
        if (!t.empty() && t[0] == ' ') t = t.substr(1);
        auto it = world.classes.find(t);
        same += it != world.classes.end() && it->second == cls;
        list += (list.empty() ? "" : " ") + t;
      }
      auto& bc = nc.by_class[cls];
      bc.first += same;
      bc.second += static_cast<int64_t>(nb.neighbours.size());
      nc.rows.push_back({cls, w, list, same, static_cast<int64_t>(nb.neighbours.size())});
    }
  }
  return nc;
}

Result PlantedStructure::to_result(int64_t n_facts, int64_t neighbours_k) const {
  Result r;
  r.kind = "planted_structure";
  r.settings = {{"facts", n_facts}, {"neighbours_k", neighbours_k}};
  json checks = json::object();
  if (facts) {
    checks["fact_top1_by_layer"] = facts->by_label();
    r.tables.push_back(
        {"facts", {"relation", "prompt", "answer", "final_top1", "correct", "final_prob", "rank_by_layer"}, facts->rows});
  }
  if (copying) checks["copy_top1_by_layer"] = copying->by_label();
  if (ov_copying) {
    checks["best_ov_copying_score"] = ov_copying->best;
    checks["best_ov_copying_head"] = {ov_copying->best_layer, ov_copying->best_head};
    r.tables.push_back({"ov_copying", {"layer", "head", "copying_score", "weight_copying_score"}, ov_copying->rows});
  }
  if (neighbours) {
    checks["neighbours_same_class_at5"] = neighbours->precision();
    r.tables.push_back({"neighbours", {"class", "word", "neighbours", "same_class", "k"}, neighbours->rows});
  }
  r.summary = checks;
  return r;
}

}  // namespace vocablens
