// "Did you mean" for mistyped commands and options (issue #16); see suggest.hpp.
#include "cli/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace vocablens::cli {

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

std::string join_quoted(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "'" : i + 1 == v.size() ? " or '" : ", '") + v[i] + "'";
  return s;
}

const CLI::App* find_sub(const CLI::App& app, const std::string& name) {
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
    if (s->get_name() == name) return s;
  return nullptr;
}

}  // namespace

std::vector<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates) {
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

std::string unknown_command_message(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-' || argv[1][0] == '\0') return "";
  const std::string word = argv[1];
  if (find_sub(app, word)) return "";
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!s->get_group().empty()) names.push_back(s->get_name());
  auto best = nearest(word, names);
  return "unknown command '" + word + "'" + (best.empty() ? "" : "; did you mean " + join_quoted(best) + "?") +
         " (`vocablens --help` lists the commands)";
}

std::string unknown_option_message(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return "";
  const CLI::App* sub = find_sub(app, argv[1]);
  if (!sub) return "";
  std::vector<std::string> names;
  for (const CLI::Option* o : sub->get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-' || std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.') continue;
    const std::string name = a.substr(0, a.find('='));
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (name.size() > 2 && name[1] != '-') continue;  // combined short flags: let CLI11 judge
    auto best = nearest(name, names);
    return sub->get_name() + ": unknown option '" + name + "'" +
           (best.empty() ? "" : "; did you mean " + join_quoted(best) + "?") + " (`vocablens " + sub->get_name() +
           " --help` lists its options)";
  }
  return "";
}

}  // namespace vocablens::cli
