// Two logit-lens runs compared layer by layer and position by position (vocablens/compare.hpp).
#include "vocablens/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/detail/sha256.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {
namespace {

constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();

nlohmann::json num_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

const NdArray& array(const Result& r, const std::string& name, const std::string& run) {
  auto it = r.arrays.find(name);
  if (it == r.arrays.end())
    throw UsageError(run + ": the logit_lens result has no array '" + name + "' (not a `vocablens lens --out` run?)");
  return it->second;
}

std::vector<float> f32(const NdArray& a, const std::string& what) {
  if (a.dtype != "<f4") throw UsageError(what + ": expected float32 (<f4), found " + a.dtype);
  std::vector<float> v(static_cast<size_t>(a.numel()));
  if (!v.empty()) std::memcpy(v.data(), a.bytes.data(), v.size() * sizeof(float));
  return v;
}

std::vector<int64_t> i64(const NdArray& a, const std::string& what) {
  if (a.dtype != "<i8") throw UsageError(what + ": expected int64 (<i8), found " + a.dtype);
  std::vector<int64_t> v(static_cast<size_t>(a.numel()));
  if (!v.empty()) std::memcpy(v.data(), a.bytes.data(), v.size() * sizeof(int64_t));
  return v;
}

// One run, as the comparison needs it.
struct Run {
  std::string name, model, prompt, tokenizer, vocab_sha;
  int64_t n = 0, T = 0, V = 0;
  std::vector<std::string> layers, tokens, targets;
  std::vector<float> prob;
  std::vector<int64_t> rank;
  const NdArray* log_probs = nullptr;
};

std::string str_at(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// A label or token string of a run is copied into every cell of the comparison's tables (layers x
// positions): one of 10 MB cost 1.1 GB. Real ones are a few bytes; past 4 KB the run was edited.
constexpr size_t kMaxLabelBytes = 4096;
const std::string& bounded(const std::string& s, const std::string& run, const std::string& what) {
  if (s.size() > kMaxLabelBytes)
    throw UsageError(run + ": " + what + " is " + std::to_string(s.size()) + " bytes long; labels and tokens longer than " +
                     std::to_string(kMaxLabelBytes) + " bytes are refused (an edited result?)");
  return s;
}

Run unpack(const Result& r, const std::string& name) {
  if (r.kind != "logit_lens")
    throw UsageError(name + ": a '" + r.kind + "' result, not a logit_lens run (compare reads `vocablens lens --out` runs)");
  Run u;
  u.name = name;
  const NdArray& tp = array(r, "target_prob", name);
  if (tp.shape.size() != 2) throw UsageError(name + ": target_prob must be 2-D [layers, positions]");
  u.n = tp.shape[0];
  u.T = tp.shape[1];
  u.prob = f32(tp, name + ": target_prob");
  const NdArray& tr = array(r, "target_rank", name);
  if (tr.shape != tp.shape) throw UsageError(name + ": target_rank and target_prob differ in shape");
  u.rank = i64(tr, name + ": target_rank");
  u.model = str_at(r.summary, "model");
  if (u.model.empty()) u.model = str_at(r.provenance, "model_path");
  u.prompt = str_at(r.summary, "prompt");
  u.tokenizer = str_at(r.provenance, "tokenizer");
  u.vocab_sha = str_at(r.provenance, "vocab_sha256");
  if (r.summary.contains("vocab_size") && r.summary["vocab_size"].is_number_integer())
    u.V = r.summary["vocab_size"].get<int64_t>();
  const nlohmann::json* lays = r.summary.contains("layers") ? &r.summary["layers"] : nullptr;
  for (int64_t l = 0; l < u.n; ++l) {
    std::string lab = std::to_string(l);
    if (lays && lays->is_array() && l < static_cast<int64_t>(lays->size())) {
      const auto& e = (*lays)[static_cast<size_t>(l)];
      if (e.is_object() && e.contains("label") && e["label"].is_string()) lab = e["label"].get<std::string>();
    }
    u.layers.push_back(bounded(lab, name, "the label of layer " + std::to_string(l)));
  }
  const nlohmann::json* toks = r.summary.contains("tokens") ? &r.summary["tokens"] : nullptr;
  for (int64_t t = 0; t < u.T; ++t) {
    std::string tok = "#" + std::to_string(t), tgt;
    if (toks && toks->is_array() && t < static_cast<int64_t>(toks->size())) {
      const auto& e = (*toks)[static_cast<size_t>(t)];
      if (!str_at(e, "token").empty()) tok = str_at(e, "token");
      tgt = str_at(e, "target");
    }
    u.tokens.push_back(bounded(tok, name, "the token at position " + std::to_string(t)));
    u.targets.push_back(bounded(tgt, name, "the target at position " + std::to_string(t)));
  }
  if (auto it = r.arrays.find("log_probs"); it != r.arrays.end()) {
    const NdArray& lp = it->second;
    if (lp.dtype != "<f4" || lp.shape.size() != 3 || lp.shape[0] != u.n || lp.shape[1] != u.T)
      throw UsageError(name + ": log_probs must be float32 [layers, positions, vocabulary] matching target_prob");
    if (u.V > 0 && lp.shape[2] != u.V)
      throw UsageError(name + ": log_probs has " + std::to_string(lp.shape[2]) + " columns, the vocabulary " +
                       std::to_string(u.V));
    u.V = lp.shape[2];
    u.log_probs = &lp;
    // The KL below is right only for log-probabilities: each row must be <= 0 and sum (as probabilities)
    // to 1. Rows holding NaN (a NaN lens row under --allow-nonfinite) stay NaN in the KL.
    const float* p = reinterpret_cast<const float*>(lp.bytes.data());
    for (int64_t row = 0; row < u.n * u.T && u.V > 0; ++row) {
      const float* x = p + row * u.V;
      double mx = -std::numeric_limits<double>::infinity();
      bool nan = false;
      for (int64_t v = 0; v < u.V; ++v) {
        if (std::isnan(x[v])) nan = true;
        mx = std::max(mx, static_cast<double>(x[v]));
      }
      if (nan) continue;
      double sum = 0;
      for (int64_t v = 0; v < u.V; ++v) sum += std::exp(static_cast<double>(x[v]));
      if (!(mx <= 1e-4) || !(std::abs(sum - 1.0) <= 1e-3))
        throw UsageError(name + ": log_probs at layer " + std::to_string(row / u.T) + ", position " + std::to_string(row % u.T) +
                         " are not log-probabilities (their probabilities sum to " + fmt::format("{:.6g}", sum) +
                         ", largest log-probability " + fmt::format("{:.6g}", mx) + ")");
    }
  }
  return u;
}

std::string vocab_desc(const Run& u) {
  std::string s = u.tokenizer.empty() ? std::string("tokenizer not recorded") : "tokenizer " + u.tokenizer;
  return s + ", " + (u.V > 0 ? std::to_string(u.V) + " tokens" : std::string("size not recorded"));
}

// Refuses runs whose ids do not name the same tokens; returns how agreement was established.
std::string check_vocabularies(const Run& a, const Run& b) {
  auto refuse = [&] {
    throw UsageError(
        a.name + " and " + b.name + " use different vocabularies (" + vocab_desc(a) + " vs " + vocab_desc(b) +
        "): token ids of one do not name the same tokens in the other, so the runs cannot be compared token by token");
  };
  if (!a.vocab_sha.empty() && !b.vocab_sha.empty()) {
    if (a.vocab_sha != b.vocab_sha) refuse();
    return "vocabulary SHA-256 equal (" + a.vocab_sha.substr(0, 12) + "…)";
  }
  if (a.V > 0 && b.V > 0 && a.V != b.V) refuse();
  if (!a.tokenizer.empty() && a.tokenizer == b.tokenizer) return "same tokenizer file, same vocabulary size (not hashed)";
  return "not verified: a run records no vocabulary SHA-256 (made by an older vocablens); sizes " +
         (a.V > 0 && b.V > 0 ? std::string("equal") : std::string("not recorded"));
}

}  // namespace

std::string vocabulary_sha256(const Tokenizer& tok) {
  Sha256 h;
  const int64_t V = tok.vocab_size();
  h.update(&V, sizeof V);
  for (int64_t id = 0; id < V; ++id) {
    const std::string b = tok.token_bytes(id);
    const uint64_t len = b.size();
    const unsigned char special = tok.is_special(id) ? 1 : 0;
    h.update(&len, sizeof len);
    h.update(b);
    h.update(&special, 1);
  }
  return h.hex_digest();
}

Result read_lens_run(const std::string& dir) {
  std::vector<Result> rs = read_run_directory(dir);
  std::string kinds;
  for (auto& r : rs) {
    if (r.kind == "logit_lens") return std::move(r);
    kinds += (kinds.empty() ? "" : ", ") + r.kind;
  }
  if (kinds.empty()) throw UsageError(dir + ": no results in this directory (compare reads `vocablens lens --out DIR` runs)");
  throw UsageError(
      dir + ": holds " + kinds + ", not a logit_lens run (compare reads `vocablens lens --prompt ... --out DIR` runs" +
      (kinds.find("logit_lens_batch") != std::string::npos ? "; a --prompts run is already side by side in its report)" : ")"));
}

LensCompareResult compare_lens_runs(const Result& ra, const Result& rb, const LensCompareOptions& opts) {
  const Run a = unpack(ra, opts.name_a), b = unpack(rb, opts.name_b);
  LensCompareResult c;
  c.name_a = a.name;
  c.name_b = b.name;
  c.vocab_check = check_vocabularies(a, b);
  if (a.n < 1 || b.n < 1 || a.T < 1 || b.T < 1)
    throw UsageError(a.name + " or " + b.name + ": an empty lens (no layers or positions)");
  c.T_a = a.T;
  c.T_b = b.T;
  c.T = std::min(a.T, b.T);
  if (a.T != b.T) {
    if (opts.align == LensAlign::None)
      throw UsageError(a.name + " has " + std::to_string(a.T) + " tokens and " + b.name + " has " + std::to_string(b.T) +
                       ": compare pairs positions one to one; give --align end (the last " + std::to_string(c.T) +
                       " positions of each) or --align start (the first " + std::to_string(c.T) + ")");
    if (opts.align == LensAlign::End) {
      c.offset_a = a.T - c.T;
      c.offset_b = b.T - c.T;
    }
  }
  c.align = opts.align == LensAlign::End ? "end" : opts.align == LensAlign::Start ? "start" : "none";
  c.model_a = a.model;
  c.model_b = b.model;
  c.prompt_a = a.prompt;
  c.prompt_b = b.prompt;
  c.vocab_size = a.V > 0 ? a.V : b.V;
  c.n = a.n;
  const int64_t n = c.n, T = c.T;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j =
        a.n == b.n ? i
                   : (a.n == 1 ? b.n - 1 : static_cast<int64_t>(std::llround(static_cast<double>(i) * (b.n - 1) / (a.n - 1))));
    c.layer_b.push_back(j);
    c.layers.push_back(a.layers[static_cast<size_t>(i)]);
    c.layers_b.push_back(b.layers[static_cast<size_t>(j)]);
  }
  for (int64_t t = 0; t < T; ++t) {
    c.tokens_a.push_back(a.tokens[static_cast<size_t>(t + c.offset_a)]);
    c.tokens_b.push_back(b.tokens[static_cast<size_t>(t + c.offset_b)]);
    c.targets_a.push_back(a.targets[static_cast<size_t>(t + c.offset_a)]);
    c.targets_b.push_back(b.targets[static_cast<size_t>(t + c.offset_b)]);
  }
  const size_t nt = static_cast<size_t>(n * T);
  c.prob_a.resize(nt);
  c.prob_b.resize(nt);
  c.delta_prob.resize(nt);
  c.rank_a.resize(nt);
  c.rank_b.resize(nt);
  c.delta_rank.resize(nt);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < T; ++t) {
      const size_t q = c.at(i, t);
      const size_t qa = static_cast<size_t>(i * a.T + t + c.offset_a);
      const size_t qb = static_cast<size_t>(c.layer_b[static_cast<size_t>(i)] * b.T + t + c.offset_b);
      c.prob_a[q] = a.prob[qa];
      c.prob_b[q] = b.prob[qb];
      c.delta_prob[q] = std::isfinite(a.prob[qa]) && std::isfinite(b.prob[qb]) ? a.prob[qa] - b.prob[qb] : kNaNf;
      c.rank_a[q] = a.rank[qa];
      c.rank_b[q] = b.rank[qb];
      c.delta_rank[q] = a.rank[qa] > 0 && b.rank[qb] > 0 ? static_cast<float>(a.rank[qa] - b.rank[qb]) : kNaNf;
    }
  c.readout = T - 1;
  while (c.readout > 0 && !std::isfinite(c.delta_prob[c.at(n - 1, c.readout)])) --c.readout;
  if (!std::isfinite(c.delta_prob[c.at(n - 1, c.readout)])) c.readout = T - 1;
  if (!a.log_probs || !b.log_probs) {
    c.kl_missing = std::string(!a.log_probs ? a.name : b.name) +
                   " has no saved distributions (log_probs): rerun `vocablens lens` with --save-probs to get the KL";
    return c;
  }
  if (a.V != b.V)
    throw UsageError(a.name + " and " + b.name + ": log_probs over " + std::to_string(a.V) + " and " + std::to_string(b.V) +
                     " tokens");
  const int64_t V = a.V;
  const float* la = reinterpret_cast<const float*>(a.log_probs->bytes.data());
  const float* lb = reinterpret_cast<const float*>(b.log_probs->bytes.data());
  c.has_kl = true;
  c.kl_ab.resize(nt);
  c.kl_ba.resize(nt);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < T; ++t) {
      const float* pa = la + (i * a.T + t + c.offset_a) * V;
      const float* pb = lb + (c.layer_b[static_cast<size_t>(i)] * b.T + t + c.offset_b) * V;
      double ab = 0, ba = 0;
      bool finite = true;
      constexpr double kInf = std::numeric_limits<double>::infinity();
      for (int64_t v = 0; v < V; ++v) {
        const double x = pa[v], y = pb[v];
        if (std::isnan(x) || std::isnan(y) || x == kInf || y == kInf) {
          finite = false;
          break;
        }
        // A token with probability 0 (log p = -inf) adds nothing to the KL it weighs, and makes the other one infinite.
        ab += x == -kInf ? 0.0 : (y == -kInf ? kInf : std::exp(x) * (x - y));
        ba += y == -kInf ? 0.0 : (x == -kInf ? kInf : std::exp(y) * (y - x));
      }
      const size_t q = c.at(i, t);
      c.kl_ab[q] = finite ? static_cast<float>(std::max(0.0, ab)) : kNaNf;
      c.kl_ba[q] = finite ? static_cast<float>(std::max(0.0, ba)) : kNaNf;
    }
  return c;
}

Result LensCompareResult::to_result() const {
  Result r;
  r.kind = "lens_compare";
  r.settings = {{"align", align}, {"units", "nats"}, {"difference", "A minus B"}};
  auto toks = [](const std::vector<std::string>& v) { return nlohmann::json(v); };
  r.summary = {{"a", {{"run", name_a}, {"model", model_a}, {"prompt", prompt_a}, {"n_tokens", T_a}, {"offset", offset_a}}},
               {"b", {{"run", name_b}, {"model", model_b}, {"prompt", prompt_b}, {"n_tokens", T_b}, {"offset", offset_b}}},
               {"positions", T},
               {"readout_position", readout},
               {"vocab_size", vocab_size},
               {"vocabulary_check", vocab_check},
               {"layers", layers},
               {"layers_b", layers_b},
               {"layer_pairing", layers == layers_b ? "one to one" : "by relative depth"},
               {"tokens", toks(tokens_a)},
               {"tokens_a", toks(tokens_a)},
               {"tokens_b", toks(tokens_b)},
               {"kl", has_kl ? nlohmann::json("KL(A||B) and KL(B||A) from both runs' log_probs") : nlohmann::json(kl_missing)}};
  r.arrays["prob_a"] = NdArray::f32({n, T}, prob_a.data());
  r.arrays["prob_b"] = NdArray::f32({n, T}, prob_b.data());
  r.arrays["delta_prob"] = NdArray::f32({n, T}, delta_prob.data());
  r.arrays["rank_a"] = NdArray::i64({n, T}, rank_a.data());
  r.arrays["rank_b"] = NdArray::i64({n, T}, rank_b.data());
  r.arrays["delta_rank"] = NdArray::f32({n, T}, delta_rank.data());
  if (has_kl) {
    r.arrays["kl_ab"] = NdArray::f32({n, T}, kl_ab.data());
    r.arrays["kl_ba"] = NdArray::f32({n, T}, kl_ba.data());
  }
  Table cells{"cells",
              {"layer", "layer_b", "position", "token_a", "token_b", "target_a", "target_b", "prob_a", "prob_b", "delta_prob",
               "rank_a", "rank_b", "delta_rank", "kl_ab", "kl_ba"},
              {}};
  Table per{"layers",
            {"layer", "layer_b", "mean_abs_delta_prob", "mean_abs_delta_rank", "mean_kl_ab", "mean_kl_ba", "readout_delta_prob"},
            {}};
  auto rank_j = [](int64_t x) { return x > 0 ? nlohmann::json(x) : nlohmann::json(nullptr); };
  for (int64_t i = 0; i < n; ++i) {
    double sp = 0, sr = 0, sab = 0, sba = 0;
    int64_t np = 0, nr = 0, nk = 0;
    for (int64_t t = 0; t < T; ++t) {
      const size_t q = at(i, t);
      cells.rows.push_back({layers[static_cast<size_t>(i)], layers_b[static_cast<size_t>(i)], t, tokens_a[static_cast<size_t>(t)],
                            tokens_b[static_cast<size_t>(t)], targets_a[static_cast<size_t>(t)],
                            targets_b[static_cast<size_t>(t)], num_or_null(prob_a[q]), num_or_null(prob_b[q]),
                            num_or_null(delta_prob[q]), rank_j(rank_a[q]), rank_j(rank_b[q]), num_or_null(delta_rank[q]),
                            has_kl ? num_or_null(kl_ab[q]) : nlohmann::json(nullptr),
                            has_kl ? num_or_null(kl_ba[q]) : nlohmann::json(nullptr)});
      if (std::isfinite(delta_prob[q])) sp += std::fabs(delta_prob[q]), ++np;
      if (std::isfinite(delta_rank[q])) sr += std::fabs(delta_rank[q]), ++nr;
      if (has_kl && std::isfinite(kl_ab[q]) && std::isfinite(kl_ba[q])) sab += kl_ab[q], sba += kl_ba[q], ++nk;
    }
    auto mean = [](double s, int64_t k) { return k ? nlohmann::json(s / static_cast<double>(k)) : nlohmann::json(nullptr); };
    per.rows.push_back({layers[static_cast<size_t>(i)], layers_b[static_cast<size_t>(i)], mean(sp, np), mean(sr, nr),
                        mean(sab, nk), mean(sba, nk), num_or_null(delta_prob[at(i, readout)])});
  }
  r.tables.push_back(std::move(per));
  r.tables.push_back(std::move(cells));
  return r;
}

}  // namespace vocablens
