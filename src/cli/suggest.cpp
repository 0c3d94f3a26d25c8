// "Did you mean" for mistyped commands and options; see suggest.hpp.
#include "cli/suggest.hpp"

#include "util/nearest.hpp"

#include <algorithm>
#include <cctype>

namespace vocablens::cli {

namespace {

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
  return detail::nearest_names(word, candidates);
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
  // A nested command (`tuned-lens train`) accepts its own options and, falling through, its parent's.
  std::vector<const CLI::App*> chain = {sub};
  std::string command = sub->get_name();
  int first = 2;
  if (argc > 2)
    if (const CLI::App* child = find_sub(*sub, argv[2])) {
      chain.push_back(child);
      command += " " + child->get_name();
      first = 3;
    }
  std::vector<std::string> names;
  for (const CLI::App* c : chain)
    for (const CLI::Option* o : c->get_options()) {
      for (const auto& l : o->get_lnames()) names.push_back("--" + l);
      for (const auto& s : o->get_snames()) names.push_back("-" + s);
    }
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-' || std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.') continue;
    const std::string name = a.substr(0, a.find('='));
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (name.size() > 2 && name[1] != '-') continue;  // combined short flags: let CLI11 judge
    auto best = nearest(name, names);
    return command + ": unknown option '" + name + "'" + (best.empty() ? "" : "; did you mean " + join_quoted(best) + "?") +
           " (`vocablens " + command + " --help` lists its options)";
  }
  return "";
}

}  // namespace vocablens::cli
