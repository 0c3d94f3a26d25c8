// Neighbour queries as text: the expression grammar ("king - man + woman", "0.5 * 'New York'", "#123"),
// the resolution of its terms to token pieces, and the option names of the CLI. No tensors here; the
// search itself is in neighbours.cpp. See include/vocablens/neighbours.hpp for the grammar.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "vocablens/error.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/token_id.hpp"

namespace vocablens {

// ---- names -------------------------------------------------------------------------------------------

const char* to_string(VectorSpace s) { return s == VectorSpace::Embedding ? "E" : "E+"; }

VectorSpace vector_space_from_string(const std::string& s) {
  if (s == "E" || s == "embedding" || s == "e") return VectorSpace::Embedding;
  if (s == "E+" || s == "pinv" || s == "pseudo-inverse" || s == "e+" || s == "E^+") return VectorSpace::PseudoInverse;
  throw UsageError("unknown space '" + s + "' (expected E or E+)");
}

const char* to_string(Compose c) {
  switch (c) {
    case Compose::Sum: return "sum";
    case Compose::Mean: return "mean";
    case Compose::Weighted: return "weighted";
  }
  return "?";
}

Compose compose_from_string(const std::string& s) {
  if (s == "sum") return Compose::Sum;
  if (s == "mean") return Compose::Mean;
  if (s == "weighted") return Compose::Weighted;
  throw UsageError("unknown composition '" + s + "' (expected sum, mean or weighted)");
}

// ---- expressions -------------------------------------------------------------------------------------

std::vector<ExprTerm> parse_expression(const std::string& e) {
  std::vector<ExprTerm> terms;
  size_t p = 0;
  const size_t n = e.size();
  auto ws = [&](size_t i) { return i < n && (e[i] == ' ' || e[i] == '\t' || e[i] == '\n' || e[i] == '\r'); };
  auto skip_ws = [&] {
    while (ws(p)) ++p;
  };
  auto where = [&](size_t i) { return " at position " + std::to_string(i + 1) + " of '" + e + "'"; };
  double sign = 1.0;
  skip_ws();
  if (p >= n) throw UsageError("empty query");
  while (true) {
    // Unary signs at the start of a term: "-man", "- man", "a - -b". (A word that starts with + or -
    // must be quoted: '-ing'.)
    while (p < n && (e[p] == '+' || e[p] == '-')) {
      if (e[p] == '-') sign = -sign;
      ++p;
      skip_ws();
    }
    if (p >= n) throw UsageError("the query ends with an operator" + where(n - 1));
    ExprTerm t;
    t.weight = sign;
    sign = 1.0;
    // Optional "number *".
    {
      const char* start = e.c_str() + p;
      char* end = nullptr;
      double w = std::strtod(start, &end);
      if (end != start) {
        size_t q = p + static_cast<size_t>(end - start);
        while (ws(q)) ++q;
        if (q < n && e[q] == '*') {
          if (!std::isfinite(w)) throw UsageError("weight is not a finite number" + where(p));
          t.weight *= w;
          p = q + 1;
          skip_ws();
          if (p >= n) throw UsageError("missing term after '*'" + where(q));
        }
      }
    }
    const size_t term_start = p;
    bool ended_with_quote = false;
    if (e[p] == '\'' || e[p] == '"') {
      char qc = e[p];
      size_t close = e.find(qc, p + 1);
      if (close == std::string::npos) throw UsageError("unterminated quote" + where(p));
      t.text = e.substr(p + 1, close - p - 1);
      if (t.text.empty()) throw UsageError("empty quoted term" + where(p));
      p = close + 1;
      ended_with_quote = true;
    } else {
      size_t q = p;
      while (q < n && !ws(q)) ++q;
      std::string word = e.substr(p, q - p);
      p = q;
      bool is_id = word.size() > 1 && word[0] == '#' &&
                   std::all_of(word.begin() + 1, word.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (is_id) {
        if (word.size() > 19) throw UsageError("token id too large" + where(term_start));
        t.id = std::stoll(word.substr(1));
      } else {
        t.text = word;
      }
    }
    terms.push_back(t);
    size_t before_ws = p;
    skip_ws();
    if (p >= n) break;
    if (e[p] != '+' && e[p] != '-')
      throw UsageError("expected + or - between terms" + where(p) + " (quote multi-word text: 'New York')");
    if (p == before_ws && !ended_with_quote) throw UsageError("an operator must follow whitespace" + where(p));
    if (e[p] == '-') sign = -1.0;
    ++p;
    skip_ws();
    if (p >= n) throw UsageError("the query ends with an operator" + where(n - 1));
  }
  return terms;
}

std::vector<ResolvedTerm> resolve_terms(const std::vector<ExprTerm>& terms, const Tokenizer* tok, int64_t vocab,
                                        const NeighbourOptions& opts) {
  std::vector<ResolvedTerm> out;
  for (const auto& t : terms) {
    ResolvedTerm r;
    r.term = t;
    if (t.id >= 0) {
      if (t.id >= vocab)
        throw UsageError("token id " + std::to_string(t.id) + " out of range (vocabulary " + std::to_string(vocab) + ")");
      r.pieces = {t.id};
    } else {
      if (!tok) throw UsageError("'" + t.text + "': words need a tokenizer (or give token ids as #123)");
      std::string text = opts.prefix_space ? " " + t.text : t.text;
      if (auto id = single_token_id(*tok, text, &r.pieces)) r.pieces = {*id};
      if (r.pieces.empty()) throw UsageError("'" + t.text + "' encodes to no tokens");
      for (int64_t pid : r.pieces)
        if (pid < 0 || pid >= vocab)
          throw UsageError("'" + t.text + "' encodes to token " + std::to_string(pid) + ", outside the model's vocabulary");
    }
    r.single_token = r.pieces.size() == 1;
    const size_t p = r.pieces.size();
    r.piece_weights.assign(p, 1.0);
    if (opts.compose == Compose::Mean) {
      for (auto& w : r.piece_weights) w = 1.0 / static_cast<double>(p);
    } else if (opts.compose == Compose::Weighted) {
      double total = 0;
      std::vector<double> len(p);
      for (size_t i = 0; i < p; ++i) {
        len[i] = tok ? static_cast<double>(tok->token_bytes(r.pieces[i]).size()) : 1.0;
        total += len[i];
      }
      for (size_t i = 0; i < p; ++i) r.piece_weights[i] = total > 0 ? len[i] / total : 1.0 / static_cast<double>(p);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace vocablens
