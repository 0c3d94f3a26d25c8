// The registry of result kinds (see include/vocablens/result_kinds.hpp).
#include "vocablens/result_kinds.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>
#include <stdexcept>

#include "vocablens/error.hpp"

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

// ---- declared shapes (ResultKind::shapes) ----

namespace vocablens::detail {

namespace {
std::string shape_text(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}
}  // namespace

void check_result_shapes(const Result& r, const std::string& path) {
  const ResultKind* k = result_kinds().find(r.kind);
  if (!k) return;
  struct Binding {
    int64_t size;
    std::string array;
  };
  std::map<std::string, Binding> bound;  // symbol -> the size the first array using it gave, and that array
  for (const auto& entry : k->shapes) {
    // (not a structured binding: C++17 lambdas cannot capture those, and clang refuses it)
    const std::string& name = entry.first;
    const std::string& spec = entry.second;
    auto it = r.arrays.find(name);
    if (it == r.arrays.end()) continue;  // optional arrays (written only with some options)
    const std::vector<int64_t>& shape = it->second.shape;
    std::vector<std::string> dims;
    std::istringstream in(spec);
    for (std::string d; in >> d;) dims.push_back(d);
    const std::string declared = "[" + spec + "]";
    auto refuse = [&](const std::string& why) {
      throw FormatError(path, "array '" + name + "' has shape " + shape_text(shape) + ", but a " + r.kind + " result's '" + name +
                                  "' is " + declared + why +
                                  " (arrays of different runs put together, or edited); the result is refused");
    };
    if (dims.size() != shape.size()) refuse("");
    for (size_t i = 0; i < dims.size(); ++i) {
      const std::string& d = dims[i];
      if (std::isdigit(static_cast<unsigned char>(d[0]))) {
        if (shape[i] != std::stoll(d)) refuse("");
        continue;
      }
      auto b = bound.find(d);
      if (b == bound.end()) {
        bound[d] = {shape[i], name};
      } else if (b->second.size != shape[i]) {
        refuse(" with " + d + " = " + std::to_string(b->second.size) + " from '" + b->second.array + "'");
      }
    }
  }
}

}  // namespace vocablens::detail
