// Token filters and token classes for the projections (see include/vocablens/token_filter.hpp).
#include "vocablens/token_filter.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include "vocablens/error.hpp"
#include "vocablens/tokenizer.hpp"
#include "util/regular_file.hpp"

namespace vocablens {

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
  std::istringstream f(detail::read_regular_file(path, detail::kMaxTextListBytes, "token lists"));
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
      } catch (...) { used = 0; }
      if (used != tokstr.size() || v < 0)
        throw FormatError(path, "line " + std::to_string(lineno) + ": '" + tokstr + "' is not a token id");
      ids.push_back(v);
    }
  }
  return ids;
}

}  // namespace vocablens
