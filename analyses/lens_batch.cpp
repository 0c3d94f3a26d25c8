// The logit lens over many prompts: prompts file reader, one lens per prompt, the tidy per-layer table.
#include "vocablens/lens_batch.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/token_id.hpp"

namespace vocablens {

std::vector<LensPrompt> read_lens_prompts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path, "cannot read the prompts file");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  bool jsonl = false;
  for (const auto& l : lines) {
    size_t p = l.find_first_not_of(" \t");
    if (p != std::string::npos) {
      jsonl = l[p] == '{';
      break;
    }
  }
  std::vector<LensPrompt> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.find_first_not_of(" \t") == std::string::npos) continue;
    LensPrompt p;
    p.line = static_cast<int64_t>(i + 1);
    if (!jsonl) {
      p.prompt = l;
    } else {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(l);
      } catch (const std::exception& e) {
        throw FormatError(path, fmt::format("line {}: not a JSON object ({})", i + 1, e.what()));
      }
      if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
        throw FormatError(path, fmt::format("line {}: expected {{\"prompt\": \"...\", \"target\": \"...\"}} with a string prompt", i + 1));
      p.prompt = j["prompt"].get<std::string>();
      if (j.contains("target")) {
        if (!j["target"].is_string()) throw FormatError(path, fmt::format("line {}: \"target\" must be a string", i + 1));
        p.target = j["target"].get<std::string>();
        if (p.target.empty()) throw FormatError(path, fmt::format("line {}: \"target\" is empty", i + 1));
      }
    }
    if (p.prompt.empty()) throw FormatError(path, fmt::format("line {}: empty prompt", i + 1));
    out.push_back(std::move(p));
  }
  if (out.empty()) throw FormatError(path, "no prompts (the file is empty or blank)");
  return out;
}

LensBatchResult logit_lens_batch(const Model& m, const Tokenizer& tok, const std::vector<LensPrompt>& prompts,
                                 const LensOptions& opts, const EncodeOptions& eo,
                                 const std::function<void(size_t, size_t)>& progress) {
  auto t0 = std::chrono::steady_clock::now();
  if (prompts.empty()) throw UsageError("lens --prompts: no prompts");
  LensBatchResult b;
  b.prompts = prompts;
  auto where = [](const LensPrompt& p) { return p.line > 0 ? fmt::format("prompt on line {}", p.line) : std::string("prompt"); };
  // Validate every prompt before the first forward pass.
  std::vector<std::vector<int64_t>> ids(prompts.size());
  std::vector<LensOptions> lo(prompts.size(), opts);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& p = prompts[i];
    ids[i] = tok.encode(p.prompt, eo);
    if (ids[i].empty()) throw UsageError(where(p) + ": encodes to no tokens");
    if (static_cast<int64_t>(ids[i].size()) > m.config().n_ctx)
      throw UsageError(fmt::format("{}: {} tokens, longer than the model's context of {}", where(p), ids[i].size(), m.config().n_ctx));
    if (!p.target.empty()) {
      std::vector<int64_t> pieces;
      auto id = single_token_id(tok, p.target, &pieces);
      if (!id) throw UsageError(fmt::format("{}: target '{}' is {} tokens: {} (it must be a single token)", where(p), p.target,
                                            pieces.size(), display_ids(tok, pieces)));
      lo[i].target = *id;
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    b.runs.push_back(logit_lens(m, ids[i], lo[i]));
    const int64_t T = static_cast<int64_t>(ids[i].size());
    b.readout.push_back(lo[i].target ? T - 1 : (T >= 2 ? T - 2 : -1));
    if (progress) progress(i + 1, prompts.size());
  }
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

Result LensBatchResult::to_result(const Tokenizer* tok) const {
  Result r;
  r.kind = "logit_lens_batch";
  const int64_t P = static_cast<int64_t>(runs.size());
  const int64_t n = P ? runs[0].n_layers() : 0;
  int64_t T = 0;
  for (const auto& L : runs) T = std::max(T, L.n_positions());
  auto name = [&](int64_t id) { return id < 0 ? std::string() : tok ? tok->display(id) : "#" + std::to_string(id); };
  const float nanf = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> tp(static_cast<size_t>(P * n * T), nanf), ent(tp.size(), nanf), kl(tp.size(), nanf);
  std::vector<int64_t> rank(tp.size(), -1), toks(static_cast<size_t>(P * T), -1), lengths(static_cast<size_t>(P));
  std::vector<float> rp(static_cast<size_t>(P * n), nanf);
  std::vector<int64_t> rr(static_cast<size_t>(P * n), -1);
  Table t{"by_layer", {"prompt_index", "prompt", "target", "position", "layer", "layer_label", "target_rank", "target_prob", "top1", "top1_prob"}, {}};
  nlohmann::json ptoks = nlohmann::json::array(), plist = nlohmann::json::array();
  for (int64_t p = 0; p < P; ++p) {
    const LensResult& L = runs[static_cast<size_t>(p)];
    const int64_t Tp = L.n_positions();
    lengths[static_cast<size_t>(p)] = Tp;
    nlohmann::json tk = nlohmann::json::array();
    for (int64_t j = 0; j < Tp; ++j) {
      toks[static_cast<size_t>(p * T + j)] = L.tokens[static_cast<size_t>(j)];
      tk.push_back(name(L.tokens[static_cast<size_t>(j)]));
    }
    ptoks.push_back(tk);
    for (int64_t l = 0; l < n; ++l)
      for (int64_t j = 0; j < Tp; ++j) {
        const size_t dst = static_cast<size_t>((p * n + l) * T + j), src = L.at(l, j);
        tp[dst] = L.target_prob[src];
        rank[dst] = L.target_rank[src];
        ent[dst] = L.entropy[src];
        kl[dst] = L.kl_final[src];
      }
    const int64_t ro = readout[static_cast<size_t>(p)];
    const std::string tgt = ro >= 0 ? name(L.targets[static_cast<size_t>(ro)]) : std::string();
    plist.push_back({{"prompt", prompts[static_cast<size_t>(p)].prompt}, {"target", tgt}, {"readout_position", ro},
                     {"explicit_target", !prompts[static_cast<size_t>(p)].target.empty()}, {"tokens", Tp}});
    if (ro < 0) continue;
    for (int64_t l = 0; l < n; ++l) {
      const size_t src = L.at(l, ro);
      rp[static_cast<size_t>(p * n + l)] = L.target_prob[src];
      rr[static_cast<size_t>(p * n + l)] = L.target_rank[src];
      nlohmann::json top1 = L.top_k > 0 ? nlohmann::json(name(L.top_id(l, ro, 0))) : nlohmann::json();
      nlohmann::json top1p = L.top_k > 0 ? nlohmann::json(L.top_prob(l, ro, 0)) : nlohmann::json();
      t.rows.push_back({p, prompts[static_cast<size_t>(p)].prompt, tgt, ro, l, L.layers[static_cast<size_t>(l)].label,
                        L.target_rank[src], L.target_prob[src], top1, top1p});
    }
  }
  nlohmann::json layers = nlohmann::json::array();
  if (P)
    for (const auto& ly : runs[0].layers) layers.push_back(ly.label);
  r.settings = {{"prompts_file", source}, {"top_k", P ? runs[0].top_k : 0}, {"prompts", P}};
  r.summary = {{"prompts", plist}, {"prompt_tokens", ptoks}, {"layers", layers}, {"n_prompts", P}, {"max_tokens", T},
               {"seconds", seconds}, {"forward", "per-prompt"}};
  r.arrays["target_prob"] = NdArray::f32({P, n, T}, tp.data());
  r.arrays["target_rank"] = NdArray::i64({P, n, T}, rank.data());
  r.arrays["entropy"] = NdArray::f32({P, n, T}, ent.data());
  r.arrays["kl_final"] = NdArray::f32({P, n, T}, kl.data());
  r.arrays["tokens"] = NdArray::i64({P, T}, toks.data());
  r.arrays["lengths"] = NdArray::i64({P}, lengths.data());
  r.arrays["readout_prob"] = NdArray::f32({P, n}, rp.data());
  r.arrays["readout_rank"] = NdArray::i64({P, n}, rr.data());
  r.tables.push_back(std::move(t));
  return r;
}

}  // namespace vocablens
