// The registry of result kinds (see include/vocablens/result_kinds.hpp).
#include "vocablens/result_kinds.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace vocablens {

void ResultKinds::add(ResultKind k) {
  if (find(k.name)) throw std::logic_error("result kind '" + k.name + "' is registered twice");
  kinds_.push_back(std::move(k));
}

const ResultKind* ResultKinds::find(std::string_view name) const {
  for (const auto& k : kinds_)
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<const ResultKind*> ResultKinds::all() const {
  std::vector<const ResultKind*> out;
  for (const auto& k : kinds_) out.push_back(&k);
  std::stable_sort(out.begin(), out.end(), [](const ResultKind* a, const ResultKind* b) {
    return a->order != b->order ? a->order < b->order : a->name < b->name;
  });
  return out;
}

const ResultKinds& result_kinds() {
  static const ResultKinds kinds = [] {
    ResultKinds k;
    detail::register_builtin_result_kinds(k);
    return k;
  }();
  return kinds;
}

int report_order(const std::string& kind) {
  const ResultKind* k = result_kinds().find(kind);
  return k ? k->order : 1000;
}

std::string kind_title(const std::string& kind) {
  if (const ResultKind* k = result_kinds().find(kind)) return k->title;
  std::string t = kind;
  std::replace(t.begin(), t.end(), '_', ' ');
  if (!t.empty()) t[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(t[0])));
  return t;
}

}  // namespace vocablens
