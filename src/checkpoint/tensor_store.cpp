// TensorStore: the name -> tensor map every checkpoint reader fills.
#include "vocablens/tensor_store.hpp"

#include "vocablens/error.hpp"

namespace vocablens {

const at::Tensor& TensorStore::get(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw FormatError(source, "missing tensor '" + name + "'");
  used.insert(name);
  return it->second;
}

void TensorStore::strip_prefix(const std::string& prefix) {
  std::map<std::string, at::Tensor> out;
  for (auto& [k, v] : tensors) {
    if (k.compare(0, prefix.size(), prefix) == 0) out[k.substr(prefix.size())] = v;
    else out[k] = v;
  }
  tensors.swap(out);
}

}  // namespace vocablens
