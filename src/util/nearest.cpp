// "Did you mean" (see nearest.hpp).
#include "util/nearest.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace vocablens::detail {
namespace {

std::string fold(const std::string& s) {
  std::string r;
  for (char c : s)
    if (c != '-' && c != '_') r += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::vector<std::string> nearest_names(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string w = fold(word);
  if (w.empty()) return {};
  const size_t limit = std::max<size_t>(1, w.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& c : candidates) {
    const std::string f = fold(c);
    size_t d = edit_distance(w, f);
    if (d > limit && w.size() >= 3 && (f.find(w) != std::string::npos || w.find(f) != std::string::npos)) d = limit;
    if (d <= limit) scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& [d, c] : scored)
    if (out.size() < 3 && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

}  // namespace vocablens::detail
