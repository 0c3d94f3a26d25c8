// Synthetic results of every kind the report knows (plus one it does not), shaped like the analyses'
// own output: for tests and for `vocablens report --example DIR` (a preview of the report and notebook).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "vocablens/report.hpp"

namespace vocablens {
namespace {

using json = nlohmann::json;

// A tiny deterministic generator (no <random>: identical output on every platform).
struct Lcg {
  uint64_t s;
  double next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  }
};

json provenance(const std::string& cmd) {
  return {{"model_path", "fixtures/gpt2-tiny"},
          {"config_sha256", "3f1c2ab4e5d6978812345678abcdef0123456789abcdef0123456789abcdef01"},
          {"config_hashed", "config.json"},
          {"model", {{"architecture", "GPT2LMHeadModel"}, {"n_layers", 4}, {"d_model", 64}, {"n_heads", 4},
                     {"d_mlp", 256}, {"vocab_size", 512}, {"n_ctx", 64}}},
          {"vocablens_version", VOCABLENS_VERSION},
          {"command_line", cmd},
          {"created_utc", "2024-05-01T12:00:00Z"}};
}

const std::vector<std::string> kVocab = {" the", " Paris", " France", " Tower", ",", " is", " in", " of", " a",
                                         " city", "\"", " <", "script", ">", " capital", "\n", " Eiff", "el",
                                         " \"", " it", " and", " was", "'s", " ©"};

Result lens_example(const std::string& prompt, const std::vector<std::string>& toks) {
  const int64_t L = 5, T = static_cast<int64_t>(toks.size()), k = 5, V = static_cast<int64_t>(kVocab.size());
  Lcg rng{42};
  Result r;
  r.kind = "logit_lens";
  r.settings = {{"prompt", prompt}, {"top_k", k}, {"unembed", "model"}, {"resid_mid", false}};
  r.provenance = provenance("vocablens lens fixtures/gpt2-tiny --prompt '" + prompt + "' --top-k 5 --out run --report");
  std::vector<json> layers;
  std::vector<std::string> labels = {"embed", "0", "1", "2", "3"};
  for (int64_t i = 0; i < L; ++i) layers.push_back({{"hook", i == 0 ? "resid_pre.0" : "resid_post." + std::to_string(i - 1)}, {"label", labels[static_cast<size_t>(i)]}, {"block", i - 1}});
  std::vector<int64_t> ids(static_cast<size_t>(T)), top_ids(static_cast<size_t>(L * T * k)), target_rank(static_cast<size_t>(L * T));
  std::vector<float> top_probs(static_cast<size_t>(L * T * k)), entropy(static_cast<size_t>(L * T)), kl(static_cast<size_t>(L * T)),
      ce(static_cast<size_t>(L * T)), tprob(static_cast<size_t>(L * T));
  json top1 = json::array();
  Table table{"top_k", {"layer", "hook", "position", "input_token", "rank", "token_id", "token", "prob"}, {}};
  for (int64_t t = 0; t < T; ++t) ids[static_cast<size_t>(t)] = 100 + t;
  for (int64_t l = 0; l < L; ++l) {
    json row = json::array();
    for (int64_t t = 0; t < T; ++t) {
      double conf = 0.05 + 0.9 * std::pow(static_cast<double>(l) / (L - 1), 1.5) * (0.5 + 0.5 * rng.next());
      double rest = 1 - conf;
      for (int64_t r2 = 0; r2 < k; ++r2) {
        size_t at = static_cast<size_t>((l * T + t) * k + r2);
        int64_t id = static_cast<int64_t>((t * 7 + l * 3 + r2 * 5) % V);
        if (r2 == 0 && l >= 3 && t + 1 < T) id = (t + 1) % V;
        top_ids[at] = id;
        top_probs[at] = static_cast<float>(r2 == 0 ? conf : rest * std::pow(0.5, r2));
        table.rows.push_back({labels[static_cast<size_t>(l)], layers[static_cast<size_t>(l)]["hook"], t, toks[static_cast<size_t>(t)], r2 + 1, id,
                              kVocab[static_cast<size_t>(id)], top_probs[at]});
      }
      size_t at = static_cast<size_t>(l * T + t);
      row.push_back(kVocab[static_cast<size_t>(top_ids[at * k])]);
      entropy[at] = static_cast<float>(std::log(static_cast<double>(V)) * (1 - conf) + 0.05);
      kl[at] = static_cast<float>(l == L - 1 ? 0.0 : 3.0 * (L - 1 - l) / L * (0.7 + 0.3 * rng.next()));
      ce[at] = t + 1 < T ? static_cast<float>(5.0 - l * 0.8 - rng.next()) : std::nanf("");
      tprob[at] = t + 1 < T ? static_cast<float>(std::exp(-static_cast<double>(ce[at]))) : std::nanf("");
      target_rank[at] = t + 1 < T ? 1 + static_cast<int64_t>((L - l) * 3 * rng.next()) : -1;
    }
    top1.push_back(row);
  }
  json tok_objs = json::array();
  for (int64_t t = 0; t < T; ++t)
    tok_objs.push_back({{"position", t}, {"id", ids[static_cast<size_t>(t)]}, {"token", toks[static_cast<size_t>(t)]},
                        {"target_id", t + 1 < T ? json(ids[static_cast<size_t>(t + 1)]) : json(nullptr)},
                        {"target", t + 1 < T ? json(toks[static_cast<size_t>(t + 1)]) : json(nullptr)}});
  json per_layer = json::array();
  for (int64_t l = 0; l < L; ++l)
    per_layer.push_back({{"layer", labels[static_cast<size_t>(l)]}, {"mean_cross_entropy", 5.1 - 0.7 * l}, {"mean_entropy", 3.0 - 0.5 * l}});
  r.summary = {{"model", "fixtures/gpt2-tiny"}, {"prompt", prompt}, {"n_tokens", T}, {"vocab_size", V},
               {"tokens", tok_objs}, {"layers", layers}, {"per_layer", per_layer}, {"top1", {{"tokens", top1}}}};
  r.arrays["tokens"] = NdArray::i64({T}, ids.data());
  std::vector<int64_t> targets(static_cast<size_t>(T), -1);
  for (int64_t t = 0; t + 1 < T; ++t) targets[static_cast<size_t>(t)] = ids[static_cast<size_t>(t + 1)];
  r.arrays["targets"] = NdArray::i64({T}, targets.data());
  r.arrays["top_ids"] = NdArray::i64({L, T, k}, top_ids.data());
  r.arrays["top_probs"] = NdArray::f32({L, T, k}, top_probs.data());
  r.arrays["entropy"] = NdArray::f32({L, T}, entropy.data());
  r.arrays["kl_final"] = NdArray::f32({L, T}, kl.data());
  r.arrays["cross_entropy"] = NdArray::f32({L, T}, ce.data());
  r.arrays["target_prob"] = NdArray::f32({L, T}, tprob.data());
  r.arrays["target_rank"] = NdArray::i64({L, T}, target_rank.data());
  r.tables.push_back(std::move(table));
  return r;
}

Result heads_example() {
  Result r;
  r.kind = "heads";
  r.settings = {{"layers", {0, 1, 2, 3}}, {"heads", json::array()}, {"kinds", {"ov", "qk"}}, {"top_k", 4}, {"inverse", "pinv"}};
  r.provenance = provenance("vocablens heads fixtures/gpt2-tiny --kind ov,qk -k 4 --out run");
  const int64_t L = 4, H = 4, k = 4;
  Lcg rng{7};
  Table pairs{"pairs", {"layer", "head", "kind", "rank", "src_id", "src", "dst_id", "dst", "value"}, {}};
  Table circuits{"circuits", {"layer", "head", "kind", "copying_score", "weight_copying_score", "sigma_1", "frobenius"}, {}};
  std::vector<double> copy;
  for (const char* kind : {"ov", "qk"})
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t q = 0; q < k; ++q) {
          size_t a = static_cast<size_t>((l * 5 + h * 3 + q) % kVocab.size()), b = static_cast<size_t>((l + h * 7 + q * 2) % kVocab.size());
          pairs.rows.push_back({l, h, kind, q + 1, static_cast<int64_t>(a), kVocab[a], static_cast<int64_t>(b), kVocab[b], 12.5 - q * 1.5 - rng.next()});
        }
        double c = rng.next() * 2 - 0.6;
        copy.push_back(c);
        circuits.rows.push_back({l, h, kind, c, c * 0.8, 10 + rng.next(), 20 + rng.next()});
      }
  r.tables.push_back(std::move(pairs));
  r.tables.push_back(std::move(circuits));
  r.arrays["copying_score"] = NdArray::f64({static_cast<int64_t>(copy.size())}, copy.data());
  r.summary = {{"vocab_size", static_cast<int64_t>(kVocab.size())}, {"d_head", 16}};
  return r;
}

Result neurons_example() {
  Result r;
  r.kind = "neurons";
  r.settings = {{"layer", 2}, {"neurons", "top 6 by norm"}, {"k", 5}};
  r.provenance = provenance("vocablens neurons fixtures/gpt2-tiny --layer 2 --out run");
  Table t{"top_k", {"layer", "neuron", "vector", "direction", "rank", "token_id", "token", "score"}, {}};
  Table nt{"norms", {"layer", "neuron", "key_norm", "gate_norm", "value_norm"}, {}};
  Lcg rng{9};
  std::vector<double> vnorm;
  for (int64_t n : {3, 17, 42, 101, 200, 255}) {
    for (const char* vec : {"key", "value"})
      for (int64_t k = 0; k < 6; ++k) {
        size_t id = static_cast<size_t>((n + k * 5) % static_cast<int64_t>(kVocab.size()));
        t.rows.push_back({2, n, vec, k < 3 ? "top" : "bottom", k % 3 + 1, static_cast<int64_t>(id), kVocab[id],
                          (k < 3 ? 1 : -1) * (4.0 - k * 0.5 - rng.next())});
      }
    vnorm.push_back(1 + rng.next());
    nt.rows.push_back({2, n, 1 + rng.next(), nullptr, vnorm.back()});
  }
  r.tables.push_back(std::move(t));
  r.tables.push_back(std::move(nt));
  r.arrays["value_norms"] = NdArray::f64({static_cast<int64_t>(vnorm.size())}, vnorm.data());
  r.summary = {{"layer", 2}, {"d_mlp", 256}};
  return r;
}

Result spectrum_example() {
  Result r;
  r.kind = "spectrum";
  r.settings = {{"matrix", "W_E"}, {"k", 16}, {"method", "auto"}};
  r.provenance = provenance("vocablens spectrum fixtures/gpt2-tiny --matrix W_E --out run");
  const int64_t k = 16, n = 64, rows = 512;
  std::vector<double> sv(static_cast<size_t>(n)), evr(static_cast<size_t>(n)), cov(static_cast<size_t>(n)), energy(static_cast<size_t>(k));
  double tot = 0;
  for (int64_t i = 0; i < n; ++i) {
    sv[static_cast<size_t>(i)] = 40.0 * std::exp(-0.08 * static_cast<double>(i)) + 0.5;
    cov[static_cast<size_t>(i)] = sv[static_cast<size_t>(i)] * sv[static_cast<size_t>(i)] / rows * 0.9;
    tot += cov[static_cast<size_t>(i)];
  }
  double e2 = 0;
  for (double s : sv) e2 += s * s;
  for (int64_t i = 0; i < n; ++i) evr[static_cast<size_t>(i)] = cov[static_cast<size_t>(i)] / tot;
  for (int64_t i = 0; i < k; ++i) energy[static_cast<size_t>(i)] = sv[static_cast<size_t>(i)] * sv[static_cast<size_t>(i)] / e2;
  std::vector<double> topk(sv.begin(), sv.begin() + k);
  r.arrays["singular_values"] = NdArray::f64({k}, topk.data());
  r.arrays["all_singular_values"] = NdArray::f64({n}, sv.data());
  r.arrays["covariance_eigenvalues"] = NdArray::f64({n}, cov.data());
  r.arrays["explained_variance_ratio"] = NdArray::f64({n}, evr.data());
  r.arrays["energy_ratio"] = NdArray::f64({k}, energy.data());
  Lcg rng{3};
  std::vector<float> norms(static_cast<size_t>(rows));
  for (auto& x : norms) x = static_cast<float>(2 + rng.next() + rng.next());
  r.arrays["row_norms"] = NdArray::f32({rows}, norms.data());
  std::vector<double> rv(static_cast<size_t>(k * n));
  for (auto& x : rv) x = rng.next() - 0.5;
  r.arrays["right_vectors"] = NdArray::f64({k, n}, rv.data());
  Table sv_t{"singular_values", {"component", "sigma", "energy_ratio"}, {}};
  for (int64_t i = 0; i < k; ++i) sv_t.rows.push_back({i, sv[static_cast<size_t>(i)], energy[static_cast<size_t>(i)]});
  Table load{"loadings", {"component", "sign", "rank", "row", "name", "projection"}, {}};
  for (int64_t c = 0; c < 4; ++c)
    for (const char* sign : {"+", "-"})
      for (int64_t i = 0; i < 5; ++i)
        load.rows.push_back({c, sign, i + 1, (c * 31 + i * 7) % rows, kVocab[static_cast<size_t>((c * 3 + i) % kVocab.size())],
                             (sign[0] == '+' ? 1 : -1) * (3.0 - 0.3 * i)});
  r.tables.push_back(std::move(sv_t));
  r.tables.push_back(std::move(load));
  r.summary = {{"matrix", "W_E"}, {"rows", rows}, {"cols", n}, {"effective_rank", 31.7}, {"participation_ratio", 12.25},
               {"solver", "gram+spectra"}};
  return r;
}

Result anisotropy_example() {
  Result r;
  r.kind = "anisotropy";
  r.settings = {{"matrix", "W_E"}, {"samples", 100000}};
  r.provenance = provenance("vocablens anisotropy fixtures/gpt2-tiny --out run");
  const int bins = 40;
  std::vector<double> counts(bins), edges(bins + 1);
  for (int i = 0; i <= bins; ++i) edges[static_cast<size_t>(i)] = -1.0 + 2.0 * i / bins;
  for (int i = 0; i < bins; ++i) {
    double x = (edges[static_cast<size_t>(i)] + edges[static_cast<size_t>(i + 1)]) / 2 - 0.25;
    counts[static_cast<size_t>(i)] = std::round(9000 * std::exp(-x * x / 0.02));
  }
  r.arrays["cosine_histogram"] = NdArray::f64({bins}, counts.data());
  r.arrays["bin_edges"] = NdArray::f64({bins + 1}, edges.data());
  r.summary = {{"matrix", "W_E"}, {"shape", {512, 64}}, {"mean_cosine", 0.2512}, {"mean_cosine_centred", -0.002},
               {"mean_norm", 3.1}, {"mean_vector_share", 0.31}};
  Table t{"removed", {"removed_components", "mean_cosine", "rows"}, {}};
  t.rows.push_back({"raw", 0.2512, 512});
  t.rows.push_back({"centred", -0.002, 512});
  for (int i = 1; i <= 8; ++i) t.rows.push_back({i, 0.2512 * std::exp(-0.5 * i), 512});
  r.tables.push_back(std::move(t));
  return r;
}

Result neighbours_example() {
  Result r;
  r.kind = "neighbours";
  r.settings = {{"query", " Paris - France + \"<script>\""}, {"k", 8}, {"space", "embedding"}, {"matrix", "W_E"}};
  r.provenance = provenance("vocablens neighbours fixtures/gpt2-tiny --query ' Paris' --out run");
  Table t{"neighbours", {"rank", "token_id", "token", "cosine"}, {}};
  for (int64_t k = 0; k < 8; ++k)
    t.rows.push_back({k + 1, k * 11, kVocab[static_cast<size_t>(k * 3) % kVocab.size()], 0.9 - 0.07 * static_cast<double>(k)});
  r.tables.push_back(std::move(t));
  r.summary = {{"query", " Paris - France + \"<script>\""}, {"space", "embedding"}, {"matrix", "W_E"},
               {"terms", {{{"sign", "+"}, {"token", " Paris"}}, {{"sign", "-"}, {"token", " France"}}}}};
  return r;
}

Result knn_example() {
  Result r;
  r.kind = "knn";
  r.settings = {{"k", 3}, {"matrix", "W_E"}, {"space", "embedding"}};
  r.provenance = provenance("vocablens knn fixtures/gpt2-tiny -k 3 --out run");
  Table e{"edges", {"source", "source_token", "rank", "target", "target_token", "cosine"}, {}};
  for (int64_t src = 0; src < 6; ++src)
    for (int64_t k = 0; k < 3; ++k)
      e.rows.push_back({src, kVocab[static_cast<size_t>(src)], k + 1, (src + k + 1) % 24, kVocab[static_cast<size_t>((src + k + 1) % 24)], 0.8 - 0.1 * static_cast<double>(k)});
  Table h{"hubs", {"rank", "token_id", "token", "in_degree"}, {{1, 4, ",", 9}, {2, 0, " the", 7}}};
  r.tables.push_back(std::move(e));
  r.tables.push_back(std::move(h));
  std::vector<int64_t> idx(18);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i % 24);
  r.arrays["indices"] = NdArray::i64({6, 3}, idx.data());
  r.summary = {{"rows", 24}, {"k", 3}};
  return r;
}

Result projection_example(const std::vector<std::string>& toks) {
  Result r;
  r.kind = "projection";
  const int64_t T = static_cast<int64_t>(toks.size());
  std::vector<int64_t> layers = {0, 1, 2, 3}, positions;
  for (int64_t p = std::max<int64_t>(0, T - 4); p < T; ++p) positions.push_back(p);
  const int64_t L = static_cast<int64_t>(layers.size()), P = static_cast<int64_t>(positions.size()), k = 3;
  r.settings = {{"hook", "resid_post"}, {"layers", layers}, {"positions", positions}, {"top_k", k}, {"space", "write"}};
  r.provenance = provenance("vocablens project fixtures/gpt2-tiny --hook resid_post --out run");
  json input = json::array();
  for (int64_t t = 0; t < T; ++t) input.push_back({{"id", 100 + t}, {"token", toks[static_cast<size_t>(t)]}});
  r.summary["input"] = input;
  std::vector<int64_t> tid(static_cast<size_t>(L * P * k));
  std::vector<double> score(static_cast<size_t>(L * P * k)), nrm(static_cast<size_t>(L * P));
  Table t{"top_k", {"layer", "position", "input_token", "rank", "token_id", "token", "score"}, {}};
  json jl = json::array();
  for (int64_t l = 0; l < L; ++l) {
    jl.push_back({{"layer", layers[static_cast<size_t>(l)]}});
    for (int64_t p = 0; p < P; ++p) {
      nrm[static_cast<size_t>(l * P + p)] = 10 + 5.0 * static_cast<double>(l) + static_cast<double>(p);
      for (int64_t q = 0; q < k; ++q) {
        size_t at = static_cast<size_t>((l * P + p) * k + q);
        tid[at] = (l * 3 + p * 5 + q) % static_cast<int64_t>(kVocab.size());
        score[at] = 8.0 + 2.0 * static_cast<double>(l) - static_cast<double>(q);
        t.rows.push_back({layers[static_cast<size_t>(l)], positions[static_cast<size_t>(p)], toks[static_cast<size_t>(positions[static_cast<size_t>(p)])],
                          q + 1, tid[at], kVocab[static_cast<size_t>(tid[at])], score[at]});
      }
    }
  }
  r.summary["layers"] = jl;
  r.arrays["token_ids"] = NdArray::i64({L, P, k}, tid.data());
  r.arrays["scores"] = NdArray::f64({L, P, k}, score.data());
  r.arrays["norms"] = NdArray::f64({L, P}, nrm.data());
  r.tables.push_back(std::move(t));
  return r;
}

Result positions_example() {
  Result r;
  r.kind = "positions";
  r.settings = {{"matrix", "W_pos"}};
  r.provenance = provenance("vocablens positions fixtures/gpt2-tiny --out run");
  const int64_t P = 64;
  std::vector<float> cosv(static_cast<size_t>(P * P));
  for (int64_t i = 0; i < P; ++i)
    for (int64_t j = 0; j < P; ++j)
      cosv[static_cast<size_t>(i * P + j)] = static_cast<float>(std::cos(0.2 * static_cast<double>(i - j)) * std::exp(-std::fabs(static_cast<double>(i - j)) / 30.0));
  r.arrays["cosine"] = NdArray::f32({P, P}, cosv.data());
  std::vector<double> by_offset(static_cast<size_t>(P)), sv(16), evr(16);
  for (int64_t d = 0; d < P; ++d) by_offset[static_cast<size_t>(d)] = std::cos(0.2 * static_cast<double>(d)) * std::exp(-static_cast<double>(d) / 30.0);
  double tot = 0;
  for (size_t i = 0; i < sv.size(); ++i) tot += (evr[i] = std::exp(-0.4 * static_cast<double>(i)));
  for (size_t i = 0; i < sv.size(); ++i) {
    evr[i] /= tot;
    sv[i] = 20 * std::sqrt(evr[i]);
  }
  const int64_t C = 4;
  std::vector<double> pcs(static_cast<size_t>(P * C));
  for (int64_t i = 0; i < P; ++i)
    for (int64_t c = 0; c < C; ++c)
      pcs[static_cast<size_t>(i * C + c)] = std::cos(3.14159265 * static_cast<double>((c + 1) * i) / static_cast<double>(P));
  r.arrays["cosine_by_offset"] = NdArray::f64({P}, by_offset.data());
  r.arrays["singular_values"] = NdArray::f64({16}, sv.data());
  r.arrays["explained_variance_ratio"] = NdArray::f64({16}, evr.data());
  r.arrays["pc_scores"] = NdArray::f64({P, C}, pcs.data());
  Table ct{"components", {"component", "variance_ratio", "dominant_frequency", "power_fraction"}, {}};
  for (int64_t c = 0; c < C; ++c) ct.rows.push_back({c, evr[static_cast<size_t>(c)], 0.5 * static_cast<double>(c + 1), 0.9});
  r.tables.push_back(std::move(ct));
  r.summary = {{"n_positions", P}, {"mean_adjacent_cosine", 0.95}};
  return r;
}

Result unknown_example() {
  Result r;
  r.kind = "mystery_analysis";
  r.settings = {{"note", "a kind the report has no renderer for: shown generically"}};
  r.provenance = provenance("vocablens mystery");
  std::vector<double> curve(30);
  for (size_t i = 0; i < curve.size(); ++i) curve[i] = std::sin(i / 4.0);
  r.arrays["curve"] = NdArray::f64({30}, curve.data());
  std::vector<float> m(12 * 20);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i % 20) / 20.0f;
  r.arrays["matrix"] = NdArray::f32({12, 20}, m.data());
  std::vector<int32_t> cube(2 * 3 * 4, 1);
  r.arrays["cube"] = NdArray::i32({2, 3, 4}, cube.data());
  r.tables.push_back({"rows", {"name", "value", "flag"}, {{"a, b", 1.5, true}, {"<b>bold?</b>", nullptr, false}}});
  r.summary = {{"answer", 42}, {"nested", {{"a", {1, 2, 3}}, {"b", "text"}}}};
  return r;
}

}  // namespace

std::vector<Result> example_results(const std::string& prompt) {
  // Tokens of the prompt as a byte-level BPE would split them, whatever the prompt is: the default one
  // carries markup and quotes on purpose (the report must show them as text).
  std::vector<std::string> toks;
  std::string cur;
  for (char c : prompt) {
    if ((c == ' ' || c == '<' || c == '"' || c == '\'' || c == '>' || c == '(') && !cur.empty()) {
      toks.push_back(cur);
      cur.clear();
    }
    cur.push_back(c);
  }
  if (!cur.empty()) toks.push_back(cur);
  if (toks.empty()) toks.push_back("");
  return {lens_example(prompt, toks), projection_example(toks), heads_example(),      neurons_example(),
          spectrum_example(),            anisotropy_example(),      neighbours_example(), knn_example(),
          positions_example(),           unknown_example()};
}

}  // namespace vocablens
