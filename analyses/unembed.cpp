// E, E⁺ (computed once per E and cached on disk), read projections, and top-k token projections.
#include "vocablens/unembed.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "vocablens/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {

InverseKind parse_inverse_kind(const std::string& s) {
  if (s == "pinv") return InverseKind::Pinv;
  if (s == "transpose") return InverseKind::Transpose;
  if (s == "embed") return InverseKind::Embed;
  throw UsageError("unknown inverse '" + s + "' (expected pinv, transpose or embed)");
}

const char* to_string(InverseKind k) {
  switch (k) {
    case InverseKind::Pinv: return "pinv";
    case InverseKind::Transpose: return "transpose";
    case InverseKind::Embed: return "embed";
  }
  return "?";
}

at::Tensor unembedding_matrix(const Model& m) { return m.W_U().t(); }

// ---- XXH64 ----

namespace {
constexpr uint64_t P1 = 0x9E3779B185EBCA87ULL, P2 = 0xC2B2AE3D27D4EB4FULL, P3 = 0x165667B19E3779F9ULL,
                   P4 = 0x85EBCA77C2B2AE63ULL, P5 = 0x27D4EB2F165667C5ULL;
inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, aarch64)
}
inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t xround(uint64_t acc, uint64_t in) {
  acc += in * P2;
  acc = rotl(acc, 31);
  return acc * P1;
}
inline uint64_t xmerge(uint64_t acc, uint64_t v) {
  acc ^= xround(0, v);
  return acc * P1 + P4;
}
}  // namespace

uint64_t hash_bytes(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + n;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    const unsigned char* limit = end - 32;
    do {
      v1 = xround(v1, read64(p));
      v2 = xround(v2, read64(p + 8));
      v3 = xround(v3, read64(p + 16));
      v4 = xround(v4, read64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = xmerge(h, v1);
    h = xmerge(h, v2);
    h = xmerge(h, v3);
    h = xmerge(h, v4);
  } else {
    h = seed + P5;
  }
  h += static_cast<uint64_t>(n);
  while (p + 8 <= end) {
    h ^= xround(0, read64(p));
    h = rotl(h, 27) * P1 + P4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= static_cast<uint64_t>(read32(p)) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * P5;
    h = rotl(h, 11) * P1;
    ++p;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

uint64_t hash_tensor(const at::Tensor& t) {
  at::Tensor c = t.to(at::kFloat).contiguous();
  uint64_t seed = static_cast<uint64_t>(c.dim());
  for (int64_t s : c.sizes()) seed = hash_bytes(&s, sizeof s, seed);
  return hash_bytes(c.data_ptr(), static_cast<size_t>(c.numel()) * sizeof(float), seed);
}

std::string default_cache_dir() {
  if (const char* e = std::getenv("VOCABLENS_CACHE"); e && *e) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/vocablens";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/vocablens";
  return "/tmp/vocablens-cache";
}

// ---- the cache files: .npy (format 1.0, '<f4' or '<f8', C order) read and written without extra copies ----

namespace {

std::string npy_header(const char* descr, const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  s += shape.size() == 1 ? ",)" : ")";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, s);
  size_t total = 10 + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  std::string h = "\x93NUMPY";
  h += '\x01';
  h += '\x00';
  uint16_t len = static_cast<uint16_t>(dict.size());
  h += static_cast<char>(len & 0xff);
  h += static_cast<char>(len >> 8);
  return h + dict;
}

// Writes header + data to path via a temporary file and rename (readers never see a partial file).
// Issue #9: through vocablens::AtomicWriter, whose temporary file is registered with the CLI's SIGINT/SIGTERM
// handler (the pinv cache is ~150 MB for GPT-2: an interrupted write used to leave "<path>.tmp-<pid>").
void write_raw_atomic(const std::string& path, const std::string& header, const void* data, size_t n) {
  AtomicWriter w(path);
  w.write(header);
  w.write(std::string_view(static_cast<const char*>(data), n));
  w.commit();
}

// Reads a file written by write_raw_atomic with exactly this header into `out` (n bytes). False if absent,
// different, or short.
bool read_raw(const std::string& path, const std::string& header, void* out, size_t n) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::string got(header.size(), '\0');
  if (!f.read(&got[0], static_cast<std::streamsize>(got.size())) || got != header) return false;
  if (!f.read(static_cast<char*>(out), static_cast<std::streamsize>(n))) return false;
  char extra;
  return !f.read(&extra, 1);
}

}  // namespace

Pinv pseudo_inverse(const at::Tensor& E_in, const PinvOptions& opts) {
  if (!E_in.defined() || E_in.dim() != 2) throw UsageError("pseudo_inverse: E must be a matrix");
  if (!(opts.rtol >= 0 && opts.rtol < 1)) throw UsageError("pseudo_inverse: rtol must be in [0, 1)");
  at::NoGradGuard no_grad;
  at::Tensor E = E_in.to(at::kFloat);
  const int64_t V = E.size(0), d = E.size(1);
  Pinv out;
  out.rtol = opts.rtol;

  std::string dir, base;
  if (opts.use_cache) {
    out.hash = hash_tensor(E);
    dir = opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
    base = fmt::format("{}/pinv-{:016x}-{}x{}-rtol{:g}", dir, out.hash, V, d, opts.rtol);
    at::Tensor pinv = at::empty({d, V}, at::kFloat);
    std::vector<double> sv(static_cast<size_t>(d));
    std::string path = base + ".npy";
    if (read_raw(base + ".sv.npy", npy_header("<f8", {d}), sv.data(), sv.size() * sizeof(double)) &&
        read_raw(path, npy_header("<f4", {d, V}), pinv.data_ptr(), static_cast<size_t>(d * V) * sizeof(float)) &&
        at::isfinite(pinv).all().item<bool>()) {
      out.pinv = pinv;
      out.singular_values = sv;
      double smax = sv.empty() ? 0.0 : sv.front();
      for (double s : sv) out.rank += (s > opts.rtol * smax && s > 0);
      out.cache_path = path;
      out.from_cache = true;
      return out;
    }
  }

  // E = U S Wᵀ via the float64 eigen-decomposition EᵀE = W S² Wᵀ (d×d: cheap for V >> d, and float64
  // resolves singular values down to ~1e-8·s_max, far below float32 data's own precision).
  // E⁺ = W S⁻¹ Uᵀ = W S⁻² Wᵀ Eᵀ, restricted to the kept singular values.
  at::Tensor G = at::zeros({d, d}, at::kDouble);
  const int64_t chunk = 8192;
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    at::Tensor Ec = E.narrow(0, c0, std::min(chunk, V - c0)).to(at::kDouble);
    G.addmm_(Ec.t(), Ec);
  }
  auto eig = at::linalg_eigh(G);
  at::Tensor lam = std::get<0>(eig).flip(0).clamp_min(0.0).contiguous();  // descending
  at::Tensor W = std::get<1>(eig).flip(1);
  at::Tensor s = lam.sqrt().contiguous();
  const double* sp = s.data_ptr<double>();
  out.singular_values.assign(sp, sp + d);
  double smax = d > 0 ? sp[0] : 0.0;
  int64_t rank = 0;
  while (rank < d && sp[rank] > opts.rtol * smax && sp[rank] > 0) ++rank;
  out.rank = rank;
  at::Tensor Wk = W.narrow(1, 0, rank);
  at::Tensor P = at::mm(Wk * lam.narrow(0, 0, rank).reciprocal().unsqueeze(0), Wk.t());  // W S⁻² Wᵀ [d, d]
  at::Tensor pinv = at::empty({d, V}, at::kFloat);
  for (int64_t c0 = 0; c0 < V; c0 += chunk) {
    int64_t cn = std::min(chunk, V - c0);
    pinv.narrow(1, c0, cn).copy_(at::mm(P, E.narrow(0, c0, cn).to(at::kDouble).t()));
  }
  out.pinv = pinv;

  if (opts.use_cache) {
    try {
      ensure_directory(dir);
      write_raw_atomic(base + ".sv.npy", npy_header("<f8", {d}), out.singular_values.data(),
                       out.singular_values.size() * sizeof(double));
      write_raw_atomic(base + ".npy", npy_header("<f4", {d, V}), pinv.data_ptr(),
                       static_cast<size_t>(d * V) * sizeof(float));
      out.cache_path = base + ".npy";
    } catch (const Error& e) {
      out.cache_note = std::string("not cached: ") + e.what();
    }
  } else {
    out.cache_note = "cache disabled";
  }
  return out;
}

Pinv embedding_pinv(const Model& m, const PinvOptions& opts) { return pseudo_inverse(unembedding_matrix(m), opts); }

at::Tensor read_projection(const Model& m, InverseKind kind, const PinvOptions& opts) {
  switch (kind) {
    case InverseKind::Pinv: return embedding_pinv(m, opts).pinv;
    case InverseKind::Transpose: return m.W_U();
    case InverseKind::Embed: return m.W_E().t();
  }
  throw UsageError("unknown inverse kind");
}

std::vector<std::vector<TopkEntry>> project_topk(const at::Tensor& X, const at::Tensor& P, int64_t k,
                                                 const TopkStreamOptions& base) {
  if (!X.defined() || X.dim() != 2) throw UsageError("project_topk: X must be [N, d]");
  if (!P.defined() || P.dim() != 2 || P.size(0) != X.size(1))
    throw UsageError("project_topk: P must be [d, V] with d = " + std::to_string(X.size(1)));
  TopkStreamOptions o = base;
  o.k = k;
  return topk_rows(X.to(at::kFloat), P.to(at::kFloat), o);
}

// ---- token filters ----

bool is_alphabetic_token(const Tokenizer& tok, int64_t id) {
  if (id < 0 || id >= tok.vocab_size() || tok.is_special(id)) return false;
  std::string b = tok.token_bytes(id);
  size_t i = (!b.empty() && b[0] == ' ') ? 1 : 0;
  if (i >= b.size()) return false;
  for (; i < b.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(b[i]);
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
  }
  return true;
}

std::vector<int64_t> normalized_token_classes(const Tokenizer& tok, int64_t V) {
  std::vector<int64_t> cls(static_cast<size_t>(V), -1);
  std::map<std::string, int64_t> ids;
  const int64_t known = std::min(V, tok.vocab_size());
  for (int64_t t = 0; t < known; ++t) {
    std::string b = tok.token_bytes(t);
    size_t i = 0;
    while (i < b.size() && b[i] == ' ') ++i;
    std::string key = b.substr(i);
    if (key.empty()) continue;
    for (auto& c : key)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    auto it = ids.emplace(key, static_cast<int64_t>(ids.size())).first;
    cls[static_cast<size_t>(t)] = it->second;
  }
  return cls;
}

std::optional<std::vector<int64_t>> allowed_tokens(int64_t V, const TokenFilter& f, const Tokenizer* tok) {
  if (!f.active()) return std::nullopt;
  std::vector<char> ok(static_cast<size_t>(V), 1);
  if (f.allow) {
    std::fill(ok.begin(), ok.end(), 0);
    for (int64_t id : *f.allow) {
      if (id < 0 || id >= V)
        throw UsageError("allow-list token id " + std::to_string(id) + " is out of range [0, " + std::to_string(V) + ")");
      ok[static_cast<size_t>(id)] = 1;
    }
  }
  if (f.alpha_only) {
    if (!tok) throw UsageError("--alpha-only needs the model's tokenizer (none was found; pass --tokenizer)");
    for (int64_t t = 0; t < V; ++t)
      if (ok[static_cast<size_t>(t)] && !is_alphabetic_token(*tok, t)) ok[static_cast<size_t>(t)] = 0;
  }
  std::vector<int64_t> out;
  for (int64_t t = 0; t < V; ++t)
    if (ok[static_cast<size_t>(t)]) out.push_back(t);
  return out;
}

std::vector<int64_t> read_token_id_list(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw FormatError(path, "cannot read token list");
  std::vector<int64_t> ids;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream ss(line);
    std::string tokstr;
    while (ss >> tokstr) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(tokstr, &used);
      } catch (...) {
        used = 0;
      }
      if (used != tokstr.size() || v < 0)
        throw FormatError(path, "line " + std::to_string(lineno) + ": '" + tokstr + "' is not a token id");
      ids.push_back(v);
    }
  }
  return ids;
}

// ---- hidden states ----

namespace {

std::string token_text(const Tokenizer* tok, int64_t id) { return tok ? tok->display(id) : "#" + std::to_string(id); }

}  // namespace

HiddenProjection project_hidden(const Model& m, const std::vector<int64_t>& ids, const HiddenProjectionOptions& o,
                                const Tokenizer* tok) {
  static const char* kHooks[] = {"resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "final_norm"};
  if (std::find(std::begin(kHooks), std::end(kHooks), o.hook) == std::end(kHooks))
    throw UsageError("hook '" + o.hook +
                     "' cannot be projected (expected resid_pre, resid_mid, resid_post, attn_out, mlp_out or final_norm)");
  if (ids.empty()) throw UsageError("the prompt has no tokens");
  if (o.top_k < 1) throw UsageError("--top-k must be at least 1");
  const auto& cfg = m.config();
  HiddenProjection r;
  r.options = o;
  r.ids = ids;
  const bool is_final = o.hook == "final_norm";
  if (is_final) {
    r.layers = {-1};
  } else if (o.layer >= 0) {
    if (o.layer >= cfg.n_layers)
      throw UsageError("layer " + std::to_string(o.layer) + " is out of range (model has " +
                       std::to_string(cfg.n_layers) + " layers)");
    r.layers = {o.layer};
  } else {
    for (int64_t l = 0; l < cfg.n_layers; ++l) r.layers.push_back(l);
  }
  const int64_t T = static_cast<int64_t>(ids.size());
  if (o.positions.empty()) {
    for (int64_t t = 0; t < T; ++t) r.positions.push_back(t);
  } else {
    for (int64_t p : o.positions) {
      int64_t q = p < 0 ? T + p : p;
      if (q < 0 || q >= T)
        throw UsageError("position " + std::to_string(p) + " is out of range for a " + std::to_string(T) + "-token prompt");
      r.positions.push_back(q);
    }
  }
  CacheSpec spec;
  if (o.hook == "resid_pre") spec.resid_pre = true;
  if (o.hook == "resid_mid") spec.resid_mid = true;
  if (o.hook == "resid_post") spec.resid_post = true;
  if (o.hook == "attn_out") spec.attn_out = true;
  if (o.hook == "mlp_out") spec.mlp_out = true;
  if (is_final) spec.final_norm = true;
  else spec.layers = r.layers;
  auto out = m.forward(at::tensor(ids, at::kLong).unsqueeze(0), spec, false);
  at::Tensor P = o.read ? read_projection(m, o.inverse, o.pinv) : m.W_U();
  TopkStreamOptions so;
  so.cols = allowed_tokens(P.size(1), o.filter, tok);
  at::Tensor pos = at::tensor(r.positions, at::kLong);
  for (int64_t l : r.layers) {
    at::Tensor X = (is_final ? out.cache.get("final_norm") : out.cache.get(o.hook, l))[0].index_select(0, pos);
    if (o.apply_final_norm && !is_final) X = m.final_norm(X);
    at::Tensor nrm = X.to(at::kDouble).norm(2, {1}).contiguous();
    r.norms.emplace_back(nrm.data_ptr<double>(), nrm.data_ptr<double>() + nrm.numel());
    r.top.push_back(project_topk(X, P, o.top_k, so));
  }
  return r;
}

Result HiddenProjection::to_result(const Tokenizer* tok) const {
  Result res;
  res.kind = "projection";
  res.settings = {{"hook", options.hook},
                  {"layers", layers},
                  {"positions", positions},
                  {"top_k", options.top_k},
                  {"apply_final_norm", options.apply_final_norm},
                  {"space", options.read ? "read" : "write"},
                  {"projection", options.read ? std::string("x R, R from --inverse ") + to_string(options.inverse)
                                              : std::string("x W_U")},
                  {"inverse", to_string(options.inverse)},
                  {"alpha_only", options.filter.alpha_only},
                  {"allow_list_size", options.filter.allow ? static_cast<int64_t>(options.filter.allow->size()) : -1}};
  nlohmann::json input = nlohmann::json::array();
  for (int64_t id : ids) input.push_back({{"id", id}, {"token", token_text(tok, id)}});
  res.summary["input"] = input;
  const int64_t L = static_cast<int64_t>(layers.size()), Pn = static_cast<int64_t>(positions.size()), k = options.top_k;
  std::vector<int64_t> tid(static_cast<size_t>(L * Pn * k), -1);
  std::vector<double> score(static_cast<size_t>(L * Pn * k), std::numeric_limits<double>::quiet_NaN());
  std::vector<double> nrm(static_cast<size_t>(L * Pn), 0.0);
  Table t{"top_k", {"layer", "position", "input_token", "rank", "token_id", "token", "score"}, {}};
  nlohmann::json js = nlohmann::json::array();
  for (int64_t l = 0; l < L; ++l) {
    nlohmann::json jl = {{"layer", layers[l]}, {"positions", nlohmann::json::array()}};
    for (int64_t p = 0; p < Pn; ++p) {
      nrm[static_cast<size_t>(l * Pn + p)] = norms[l][p];
      const auto& top = this->top[l][p];
      nlohmann::json jp = {{"position", positions[p]},
                           {"input_token", token_text(tok, ids[positions[p]])},
                           {"norm", norms[l][p]},
                           {"top", nlohmann::json::array()}};
      for (size_t q = 0; q < top.size(); ++q) {
        size_t at_ = static_cast<size_t>((l * Pn + p) * k) + q;
        tid[at_] = top[q].j;
        score[at_] = top[q].value;
        t.rows.push_back({layers[l], positions[p], token_text(tok, ids[positions[p]]), static_cast<int64_t>(q + 1),
                          top[q].j, token_text(tok, top[q].j), top[q].value});
        jp["top"].push_back({{"id", top[q].j}, {"token", token_text(tok, top[q].j)}, {"score", top[q].value}});
      }
      jl["positions"].push_back(jp);
    }
    js.push_back(jl);
  }
  res.summary["layers"] = js;
  res.arrays["token_ids"] = NdArray::i64({L, Pn, k}, tid.data());
  res.arrays["scores"] = NdArray::f64({L, Pn, k}, score.data());
  res.arrays["norms"] = NdArray::f64({L, Pn}, nrm.data());
  res.tables.push_back(std::move(t));
  return res;
}

}  // namespace vocablens
