// Which supported family a checkpoint of an unsupported architecture is nearest to (vocablens/arch.hpp:
// rank_architectures, nearest_architecture_hint): its tensor names against each family's table. Apart from
// arch.cpp, which holds the table itself.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "vocablens/arch.hpp"

namespace vocablens {

namespace {

// "model.layers.12.block_sparse_moe.experts.3.w1.weight" -> "model.layers.{L}.block_sparse_moe.experts.{N}.w1":
// the first all-digit segment is the layer, later ones other indices; the parameter suffix is dropped.
std::string name_pattern(const std::string& name, bool keep_suffix = false) {
  std::string out;
  bool layer_seen = false;
  size_t start = 0;
  std::vector<std::string> parts;
  while (start <= name.size()) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!keep_suffix && parts.size() > 1 && (parts.back() == "weight" || parts.back() == "bias")) parts.pop_back();
  for (auto& p : parts) {
    if (!p.empty() && std::all_of(p.begin(), p.end(), [](unsigned char c) { return std::isdigit(c); })) {
      p = layer_seen ? "{N}" : "{L}";
      layer_seen = true;
    }
    out += (out.empty() ? "" : ".") + p;
  }
  return out;
}

}  // namespace

std::vector<ArchMatch> rank_architectures(const std::vector<std::string>& tensor_names, bool gguf) {
  std::set<std::string> have;
  std::map<std::string, std::string> shown;  // pattern -> as written (suffix kept), for the unmatched list
  for (const auto& n : tensor_names) {
    have.insert(name_pattern(n));
    shown.emplace(name_pattern(n), name_pattern(n, true));
  }
  std::vector<ArchMatch> out;
  for (const auto& a : architectures()) {
    std::set<std::string> known, required;
    const std::string prefix = a.hf_base_prefix ? a.hf_base_prefix : "";
    for (const auto& t : a.tensors) {
      const char* pat = gguf ? t.gguf : t.hf;
      if (!pat) continue;
      std::string p = pat;
      // An expert's index is "{E}" in the table, "{N}" in name_pattern (any index after the layer's).
      for (size_t e = p.find("{E}"); e != std::string::npos; e = p.find("{E}")) p.replace(e, 3, "{N}");
      known.insert(p);
      // GPT-OSS's fused experts name their biases "<name>_bias" (their weights have no ".weight" either).
      if (!gguf && t.layout == TensorLayout::ExpertsStacked && t.bias != BiasKind::None) known.insert(p + "_bias");
      // Base-model files lack the prefix ("h.0.ln_1" rather than "transformer.h.0.ln_1").
      if (!gguf && !prefix.empty() && p.rfind(prefix, 0) == 0) known.insert(p.substr(prefix.size()));
      if (t.required) required.insert(p);
    }
    ArchMatch m;
    m.arch = &a;
    m.total = static_cast<int64_t>(have.size());
    for (const auto& h : have) {
      if (known.count(h)) ++m.matched;
      else m.unmatched.push_back(shown[h]);
    }
    for (const auto& r : required) {
      const bool found =
          have.count(r) || (!gguf && !prefix.empty() && r.rfind(prefix, 0) == 0 && have.count(r.substr(prefix.size())));
      if (!found) m.missing.push_back(r);
    }
    out.push_back(std::move(m));
  }
  std::stable_sort(out.begin(), out.end(), [](const ArchMatch& x, const ArchMatch& y) {
    return x.matched != y.matched ? x.matched > y.matched : x.missing.size() < y.missing.size();
  });
  return out;
}

std::string nearest_architecture_hint(const std::vector<std::string>& tensor_names, bool gguf) {
  const auto ranked = rank_architectures(tensor_names, gguf);
  if (ranked.empty() || ranked.front().matched == 0) return "";
  const ArchMatch& m = ranked.front();
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size() && i < 4; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 4) s += " (+" + std::to_string(v.size() - 4) + " more)";
    return s;
  };
  std::string h = std::string("nearest supported family: ") + m.arch->name + " (" + m.arch->hf_architecture +
                  "): " + std::to_string(m.matched) + " of " + std::to_string(m.total) + " tensor name patterns map";
  if (!m.unmatched.empty()) h += "; not in its table: " + list(m.unmatched);
  if (!m.missing.empty()) h += "; it also needs: " + list(m.missing);
  return h;
}

}  // namespace vocablens
