// checkpoint/torch_zip.cpp — read_torch_zip: torch.save's zip format without running pickle code.
//
// Layout written by torch.save (PyTorch >= 1.6, torch/serialization.py `_save`):
//   <root>/data.pkl      the pickled object; tensors appear as
//                        _rebuild_tensor_v2(persistent_id, storage_offset, size, stride, requires_grad, hooks)
//                        with persistent_id = ('storage', torch.FloatStorage, key, location, numel)
//   <root>/data/<key>    the raw little-endian bytes of each storage, STORED and 64-byte aligned
//   <root>/version, <root>/byteorder (newer), <root>/.data/serialization_id (newer)
// LibTorch 1.13's torch::pickle_load cannot read a real state_dict (pytorch#100741) and would execute
// whatever the pickle names; this reader maps the file, validates every number against it, and turns
// tensors into zero-copy views of their storage entries.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "checkpoint/mapped_file.hpp"
#include "checkpoint/pickle.hpp"
#include "checkpoint/zip.hpp"
#include "vocablens/error.hpp"
#include "vocablens/tensor_store.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "storage bytes are little-endian; a big-endian host would need swapping");

namespace vocablens {
namespace detail::torch_zip {

using pickle::Kind;
using pickle::Value;
using pickle::ValueId;

// Bounds for hostile files. Real checkpoints are far below: a 7B model's data.pkl is ~100 KB, an
// optimizer-state pickle a few MB; nesting is < 10 levels.
constexpr uint64_t kMaxPickleBytes = 64ull << 20;
constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxVisits = 4ull << 20;      // nodes visited while flattening (shared sub-objects count each time)
constexpr uint64_t kMaxTextBytes = 64ull << 20;  // bytes of names and strings created while flattening
constexpr size_t kMaxTensors = size_t{1} << 20;  // names in TensorStore::tensors
constexpr size_t kMaxDims = 64;                  // torch's own limit on tensor rank
constexpr size_t kMaxKeyBytes = 256;             // storage keys are "0", "1", ...

struct StorageType {
  const char* global;  // as named in the pickle
  at::ScalarType dtype;
  const char* name;  // safetensors-style dtype name, for TensorStore::stored_dtype
};
constexpr StorageType kStorageTypes[] = {
    {"torch.FloatStorage", at::kFloat, "F32"},        {"torch.HalfStorage", at::kHalf, "F16"},
    {"torch.BFloat16Storage", at::kBFloat16, "BF16"}, {"torch.DoubleStorage", at::kDouble, "F64"},
    {"torch.LongStorage", at::kLong, "I64"},          {"torch.IntStorage", at::kInt, "I32"},
    {"torch.ShortStorage", at::kShort, "I16"},        {"torch.CharStorage", at::kChar, "I8"},
    {"torch.ByteStorage", at::kByte, "U8"},           {"torch.BoolStorage", at::kBool, "BOOL"},
};

const StorageType* find_storage_type(const std::string& qualified) {
  for (const auto& t : kStorageTypes)
    if (qualified == t.global) return &t;
  return nullptr;
}

// Globals with a meaning here. Everything else is either refused (code-running modules, tensor kinds we
// cannot rebuild) or becomes an inert Opaque value when called (e.g. a config class in a checkpoint).
const std::set<std::string> kTensorRebuilders = {
    "torch._utils._rebuild_tensor_v2",     "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_parameter",     "torch._utils._rebuild_parameter_with_state",
    "torch._tensor._rebuild_from_type_v2",
};

// Modules whose only use in a pickle is to run code (the classic os.system / builtins.eval payloads):
// a checkpoint naming one is hostile, so the whole file is refused rather than the name made inert.
const char* const kForbiddenModules[] = {
    "os",        "posix",      "nt",         "posixpath", "ntpath",     "subprocess", "sys",
    "shutil",    "socket",     "importlib",  "runpy",     "pickle",     "_pickle",    "marshal",
    "ctypes",    "code",       "codeop",     "pty",       "webbrowser", "commands",   "multiprocessing",
    "threading", "_thread",    "asyncio",    "signal",    "tempfile",   "io",         "_io",
    "types",     "inspect",    "pdb",        "bdb",       "timeit",     "operator",   "_operator",
    "functools", "_functools", "urllib",     "http",      "ftplib",     "smtplib",    "telnetlib",
    "requests",  "pip",        "setuptools", "distutils", "glob",       "zipimport",  "pkgutil",
    "cProfile",  "profile",    "trace",      "gc",        "weakref",
};
// builtins names that are plain data constructors; any other builtin (eval, exec, getattr, open,
// __import__, compile, ...) is refused.
const std::set<std::string> kHarmlessBuiltins = {"set",  "frozenset", "slice", "range", "complex", "bytearray", "bytes", "object",
                                                 "dict", "list",      "tuple", "int",   "float",   "str",       "bool"};

bool module_is(const std::string& module, const char* base) {
  const size_t n = std::strlen(base);
  return module.compare(0, n, base) == 0 && (module.size() == n || module[n] == '.');
}

class TorchHooks final : public pickle::Hooks {
 public:
  TorchHooks(std::shared_ptr<MappedFile> file, const zip::Archive& archive, std::string root, bool upcast_half)
      : file_(std::move(file)), archive_(archive), root_(std::move(root)), upcast_half_(upcast_half) {}

  void check_global(const std::string& module, const std::string& name) override {
    const std::string q = module + "." + name;
    if (q == "collections.OrderedDict" || kTensorRebuilders.count(q) || find_storage_type(q)) return;
    if (module == "builtins" || module == "__builtin__") {
      if (kHarmlessBuiltins.count(name)) return;
      fail("forbidden global '" + zip::printable(q) + "' (pickles that call it run code)");
    }
    for (const char* m : kForbiddenModules)
      if (module_is(module, m)) fail("forbidden global '" + zip::printable(q) + "' (pickles that call it run code)");
    if (module_is(module, "torch")) {
      if (name.compare(0, 8, "_rebuild") == 0)
        fail("unsupported tensor kind '" + zip::printable(q) + "' (only dense CPU-loadable tensors are supported)");
      if (name.size() > 7 && name.compare(name.size() - 7, 7, "Storage") == 0)
        fail("unsupported storage type '" + zip::printable(q) + "'");
    }
  }

  ValueId call(pickle::Graph& g, ValueId fn, ValueId args) override {
    const std::string q = g[fn].s;
    // By reference, not copied: a hostile pickle may REDUCE with one huge tuple millions of times.
    // Stable: g is a deque (growth keeps references) and tuples are never appended to.
    const std::vector<ValueId>& a = g[args].items;
    if (q == "collections.OrderedDict") {
      // torch.save pickles OrderedDict as OrderedDict() followed by SETITEMS.
      if (!a.empty()) fail("OrderedDict called with arguments");
      Value d;
      d.kind = Kind::Dict;
      return g.add(std::move(d));
    }
    if (q == "torch._utils._rebuild_tensor_v2") {
      if (a.size() < 6 || a.size() > 7) fail("_rebuild_tensor_v2 takes 6 or 7 arguments, got " + std::to_string(a.size()));
      return rebuild_tensor(g, a[0], a[1], a[2], a[3]);
    }
    if (q == "torch._utils._rebuild_tensor") {
      if (a.size() != 4) fail("_rebuild_tensor takes 4 arguments, got " + std::to_string(a.size()));
      return rebuild_tensor(g, a[0], a[1], a[2], a[3]);
    }
    if (q == "torch._utils._rebuild_parameter" || q == "torch._utils._rebuild_parameter_with_state") {
      // An nn.Parameter is its data tensor plus autograd flags, which we do not need.
      if (a.empty() || g[a[0]].kind != Kind::Tensor) fail(q.substr(13) + " needs a tensor as its first argument");
      return a[0];
    }
    if (q == "torch._tensor._rebuild_from_type_v2") {
      // (func, new_type, args, state): a Tensor subclass; rebuild the plain tensor with func(*args).
      if (a.size() != 4 || g[a[0]].kind != Kind::Global || g[a[2]].kind != Kind::Tuple)
        fail("malformed _rebuild_from_type_v2 arguments");
      const std::string& inner = g[a[0]].s;
      if (inner == q || !kTensorRebuilders.count(inner)) fail("_rebuild_from_type_v2 of '" + zip::printable(inner) + "'");
      return call(g, a[0], a[2]);
    }
    if (q == "torch.jit._pickle.restore_type_tag") {
      // LibTorch's pickler (torch::jit::pickle_save) wraps typed dicts and lists as restore_type_tag(obj,
      // "Dict[str, Tensor]"): a type annotation for TorchScript; the value is the object itself.
      if (a.size() != 2) fail("restore_type_tag takes 2 arguments, got " + std::to_string(a.size()));
      return a[0];
    }
    if (find_storage_type(q)) fail("constructing '" + q + "' directly is not supported (legacy storage pickling)");
    // Anything else: an instance of a class we do not model. Inert; recorded by name in metadata.
    Value v;
    v.kind = Kind::Opaque;
    v.s = q;
    return g.add(std::move(v));
  }

  // ('storage', torch.XStorage, key, location, numel) -> a Storage value bound to <root>/data/<key>.
  ValueId persistent_load(pickle::Graph& g, ValueId pid) override {
    const Value& p = g[pid];
    if (p.kind != Kind::Tuple || p.items.size() != 5 || g[p.items[0]].kind != Kind::String || g[p.items[0]].s != "storage")
      fail("persistent id is not ('storage', type, key, location, numel)");
    const Value& type = g[p.items[1]];
    const Value& key = g[p.items[2]];
    const Value& numel = g[p.items[4]];
    if (type.kind != Kind::Global || key.kind != Kind::String || numel.kind != Kind::Int || numel.i < 0)
      fail("persistent id is not ('storage', type, key, location, numel)");
    // torch names storages "0", "1", ...; a bound keeps hashing a memo-shared huge key from costing
    // its length on every BINPERSID.
    if (key.s.empty() || key.s.size() > kMaxKeyBytes) fail("storage key is empty or longer than 256 bytes");
    const StorageType* st = find_storage_type(type.s);
    if (!st) fail("unsupported storage type '" + zip::printable(type.s) + "'");
    auto found = storage_ids_.find(key.s);
    if (found != storage_ids_.end()) {
      // The same key again (tied weights): torch reuses the loaded storage; it must be described alike.
      const Storage& s = storages_[static_cast<size_t>(g[found->second].i)];
      if (s.type != st || s.numel != numel.i)
        fail("storage '" + zip::printable(key.s) + "' is described with two different types or sizes");
      return found->second;
    }
    const std::string entry_name = root_ + "/data/" + key.s;
    const zip::Entry* e = archive_.find(entry_name);
    if (!e) fail("storage '" + zip::printable(key.s) + "' has no entry '" + zip::printable(entry_name) + "'");
    if (e->method != 0)
      fail("entry '" + zip::printable(entry_name) + "' is compressed (method " + std::to_string(e->method) +
           "); torch.save writes stored entries");
    const uint64_t elem = c10::elementSize(st->dtype);
    if (static_cast<uint64_t>(numel.i) > e->size / elem)
      fail("storage '" + zip::printable(key.s) + "' claims " + std::to_string(numel.i) + " x " + std::to_string(elem) +
           " bytes but its entry has " + std::to_string(e->size) + " bytes");
    storages_.push_back(Storage{key.s, st, numel.i, e, {}});
    Value v;
    v.kind = Kind::Storage;
    v.i = static_cast<int64_t>(storages_.size() - 1);
    ValueId id = g.add(std::move(v));
    storage_ids_.emplace(key.s, id);
    return id;
  }

  /// The tensor a Tensor value stands for, made on first use: a strided view of its storage (with
  /// upcast_half, F16/BF16 storages are converted to float32 once, so tensors sharing a storage still
  /// share data; without it they stay views of the file in their stored dtype).
  at::Tensor tensor(const Value& v) {
    Spec& s = specs_[static_cast<size_t>(v.i)];
    if (!s.made.defined()) s.made = storage_tensor(s.storage).as_strided(s.sizes, s.strides, s.offset);
    return s.made;
  }
  const char* stored_name(const Value& v) const { return storages_[specs_[static_cast<size_t>(v.i)].storage].type->name; }
  std::string storage_key(const Value& v) const { return storages_[static_cast<size_t>(v.i)].key; }

  [[noreturn]] void fail(const std::string& problem) const { throw FormatError(file_->path(), problem); }

 private:
  struct Storage {
    std::string key;
    const StorageType* type;
    int64_t numel;
    const zip::Entry* entry;
    at::Tensor data;  // 1-D, made on first use
  };
  struct Spec {
    size_t storage;
    int64_t offset;
    std::vector<int64_t> sizes, strides;
    at::Tensor made;
  };

  // Reads a tuple of non-negative ints (a size or a stride).
  std::vector<int64_t> int_tuple(const pickle::Graph& g, ValueId id, const char* what) const {
    const Value& t = g[id];
    if (t.kind != Kind::Tuple && t.kind != Kind::List) fail(std::string("tensor ") + what + " is not a tuple");
    if (t.items.size() > kMaxDims) fail(std::string("tensor has more than ") + std::to_string(kMaxDims) + " dimensions");
    std::vector<int64_t> out;
    for (ValueId x : t.items) {
      if (g[x].kind != Kind::Int || g[x].i < 0) fail(std::string("tensor ") + what + " has a non-integer or negative entry");
      out.push_back(g[x].i);
    }
    return out;
  }

  ValueId rebuild_tensor(pickle::Graph& g, ValueId storage, ValueId offset, ValueId size, ValueId stride) {
    if (g[storage].kind != Kind::Storage)
      fail("tensor rebuilt from a " + std::string(pickle::kind_name(g[storage].kind)) + ", not a storage");
    if (g[offset].kind != Kind::Int || g[offset].i < 0) fail("tensor storage offset is not a non-negative integer");
    Spec s;
    s.storage = static_cast<size_t>(g[storage].i);
    s.offset = g[offset].i;
    s.sizes = int_tuple(g, size, "size");
    s.strides = int_tuple(g, stride, "stride");
    if (s.sizes.size() != s.strides.size())
      fail("tensor has " + std::to_string(s.sizes.size()) + " sizes but " + std::to_string(s.strides.size()) + " strides");
    const Storage& st = storages_[s.storage];
    // Every addressed element must lie in the storage: offset + sum((size_i - 1) * stride_i) < numel.
    uint64_t numel = 1, last = static_cast<uint64_t>(s.offset);
    bool overflow = false;
    for (size_t d = 0; d < s.sizes.size(); ++d) {
      uint64_t step = 0;
      overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(s.sizes[d]), &numel);
      if (s.sizes[d] > 0) {
        overflow |= __builtin_mul_overflow(static_cast<uint64_t>(s.sizes[d] - 1), static_cast<uint64_t>(s.strides[d]), &step);
        overflow |= __builtin_add_overflow(last, step, &last);
      }
    }
    if (overflow || numel > (uint64_t{1} << 62)) fail("tensor shape or strides overflow");
    const uint64_t have = static_cast<uint64_t>(st.numel);
    if (numel == 0) {
      // An empty tensor addresses nothing; only its offset must make sense.
      if (static_cast<uint64_t>(s.offset) > have)
        fail("empty tensor's offset " + std::to_string(s.offset) + " lies past the end of storage '" + zip::printable(st.key) +
             "'");
    } else if (last >= have) {
      fail("tensor (offset " + std::to_string(s.offset) + ", " + std::to_string(s.sizes.size()) + " dims) addresses element " +
           std::to_string(last) + " of storage '" + zip::printable(st.key) + "' which has " + std::to_string(have) + " elements");
    } else if (numel > have) {
      // Only overlapping (e.g. stride-0, expanded) views have more elements than their storage. torch.save
      // writes none for model weights, and a few bytes could otherwise describe a 2^62-element tensor
      // that any copy or reduction would try to materialise.
      fail("tensor of " + std::to_string(numel) + " elements is an overlapping view of storage '" + zip::printable(st.key) +
           "' (" + std::to_string(have) + " elements); such views are not supported");
    }
    specs_.push_back(std::move(s));
    Value v;
    v.kind = Kind::Tensor;
    v.i = static_cast<int64_t>(specs_.size() - 1);
    return g.add(std::move(v));
  }

  at::Tensor storage_tensor(size_t index) {
    Storage& s = storages_[index];
    if (!s.data.defined()) {
      at::Tensor t = view_as_tensor(file_, s.entry->data_offset, {s.numel}, {}, s.type->dtype);
      // Callers that cannot take half types (LibTorch 1.13 has no CPU half matmul) ask for float32: a copy.
      if (upcast_half_ && (t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16)) t = t.to(at::kFloat);
      s.data = t;
    }
    return s.data;
  }

  std::shared_ptr<MappedFile> file_;
  const zip::Archive& archive_;
  std::string root_;
  bool upcast_half_;
  std::vector<Storage> storages_;
  std::unordered_map<std::string, ValueId> storage_ids_;
  std::vector<Spec> specs_;
};

// Walks the unpickled object and fills the store: dict keys joined with '.', tensors into `tensors`,
// everything else into `metadata` under the same flattened name.
class Flattener {
 public:
  Flattener(const pickle::Graph& g, TorchHooks& hooks, TensorStore& store) : g_(g), hooks_(hooks), store_(store) {}

  void root(ValueId id) {
    const Kind k = g_[id].kind;
    if (k != Kind::Dict && k != Kind::List && k != Kind::Tuple)
      hooks_.fail(std::string("top-level object is a ") + pickle::kind_name(k) + ", not a dict of tensors");
    walk(id, "", 0);
  }
  const std::set<std::string>& dtypes() const { return dtypes_; }

 private:
  // prefix.key, charged to the text budget: names repeat their ancestors' keys, so a deep chain of long
  // keys with many leaves would otherwise cost (depth x key length) per leaf without bound.
  std::string join(const std::string& prefix, const std::string& key) {
    std::string name = prefix.empty() ? key : prefix + "." + key;
    charge(name.size());
    return name;
  }
  void charge(size_t bytes) {
    text_bytes_ += bytes;
    if (text_bytes_ > kMaxTextBytes) hooks_.fail("more than 64 MB of names and strings in the pickled object");
  }

  void visit(int depth) {
    if (++visits_ > kMaxVisits) hooks_.fail("object graph too large to flatten (shared or cyclic structure?)");
    if (depth > kMaxDepth) hooks_.fail("objects nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }

  void walk(ValueId id, const std::string& name, int depth) {
    visit(depth);
    const Value& v = g_[id];
    switch (v.kind) {
      case Kind::Dict:
        if (v.items.empty() && !name.empty()) store_.metadata[name] = nlohmann::json::object();
        for (size_t k = 0; k + 1 < v.items.size(); k += 2) walk(v.items[k + 1], join(name, key_name(v.items[k])), depth + 1);
        break;
      case Kind::Tensor: {
        at::Tensor t = hooks_.tensor(v);
        store_.tensors[name] = t;
        if (store_.tensors.size() > kMaxTensors) hooks_.fail("more than " + std::to_string(kMaxTensors) + " tensors");
        dtypes_.insert(hooks_.stored_name(v));
        // 0-d tensors are scalars (best_val_loss, an optimizer's step): also readable as metadata.
        if (t.dim() == 0) {
          if (t.is_floating_point()) store_.metadata[name] = t.item<double>();
          else if (t.scalar_type() == at::kBool) store_.metadata[name] = t.item<bool>();
          else store_.metadata[name] = t.item<int64_t>();
        }
        break;
      }
      case Kind::List:
      case Kind::Tuple:
        if (plain(id, depth)) {
          store_.metadata[name] = json(id, depth);
        } else {
          for (size_t k = 0; k < v.items.size(); ++k) walk(v.items[k], join(name, std::to_string(k)), depth + 1);
        }
        break;
      default: store_.metadata[name] = json(id, depth);
    }
  }

  // True if the list/tuple holds no tensor or dict at any depth: it then becomes one JSON array.
  bool plain(ValueId id, int depth) {
    visit(depth);
    const Value& v = g_[id];
    if (v.kind == Kind::Dict || v.kind == Kind::Tensor) return false;
    if (v.kind == Kind::List || v.kind == Kind::Tuple)
      for (ValueId x : v.items)
        if (!plain(x, depth + 1)) return false;
    return true;
  }

  std::string text(const std::string& s) {
    charge(s.size());
    return s;
  }

  // A non-tensor value as JSON. Things JSON cannot hold are described in angle brackets.
  nlohmann::json json(ValueId id, int depth) {
    visit(depth);
    const Value& v = g_[id];
    switch (v.kind) {
      case Kind::None: return nullptr;
      case Kind::Bool: return v.i != 0;
      case Kind::Int: return v.i;
      case Kind::BigInt: return "<int too large>";
      case Kind::Float: return v.f;
      case Kind::String: return text(v.s);
      case Kind::Bytes: return "<bytes: " + std::to_string(v.s.size()) + ">";
      case Kind::Global: return text("<global " + v.s + ">");
      case Kind::Opaque: return text("<object " + v.s + ">");
      case Kind::Storage: return text("<storage " + hooks_.storage_key(v) + ">");
      case Kind::Tensor: return "<tensor>";  // unreachable: plain() keeps tensors out
      case Kind::List:
      case Kind::Tuple: {
        nlohmann::json a = nlohmann::json::array();
        for (ValueId x : v.items) a.push_back(json(x, depth + 1));
        return a;
      }
      case Kind::Dict: {
        nlohmann::json o = nlohmann::json::object();
        for (size_t k = 0; k + 1 < v.items.size(); k += 2) o[key_name(v.items[k])] = json(v.items[k + 1], depth + 1);
        return o;
      }
    }
    return nullptr;
  }

  // A dict key as a name component: strings as is, numbers in decimal (optimizer state is keyed 0, 1, ...).
  std::string key_name(ValueId id) {
    const Value& k = g_[id];
    switch (k.kind) {
      case Kind::String: return text(k.s);
      case Kind::Int: return std::to_string(k.i);
      case Kind::Bool: return k.i ? "True" : "False";
      case Kind::None: return "None";
      case Kind::Float: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", k.f);
        return buf;
      }
      default: return std::string("<") + pickle::kind_name(k.kind) + ">";
    }
  }

  const pickle::Graph& g_;
  TorchHooks& hooks_;
  TensorStore& store_;
  std::set<std::string> dtypes_;
  uint64_t visits_ = 0, text_bytes_ = 0;
};

// The archive's root folder: the unique "<root>/data.pkl" entry (torch.save names root after the file).
std::string find_root(const zip::Archive& ar, const std::string& path) {
  std::string root;
  for (const auto& e : ar.entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
    if (!root.empty()) throw FormatError(path, "zip archive has more than one <root>/data.pkl");
    root = e.name.substr(0, slash);
    if (root.empty()) throw FormatError(path, "zip archive has an empty root folder name");
  }
  if (root.empty()) throw FormatError(path, "zip archive has no <root>/data.pkl: not a torch.save checkpoint");
  return root;
}

TensorStore read(const std::string& path, bool upcast_half) {
  auto file = MappedFile::open(path);
  const uint8_t* d = file->data();
  const size_t n = file->size();
  if (n >= 2 && d[0] == 0x80 && d[1] <= 5)
    throw FormatError(path,
                      "legacy torch.save format (PyTorch < 1.6, a bare pickle) is not supported; re-save it with a newer torch");
  if (n >= 262 && std::memcmp(d + 257, "ustar", 5) == 0)
    throw FormatError(path, "legacy tar torch.save format is not supported; re-save it with a newer torch");
  if (n < 4 || std::memcmp(d, "PK\x03\x04", 4) != 0) throw FormatError(path, "not a PyTorch zip checkpoint (no zip signature)");

  const zip::Archive archive = zip::Archive::parse(*file);
  const std::string root = find_root(archive, path);
  if (const zip::Entry* bo = archive.find(root + "/byteorder")) {
    std::string order(reinterpret_cast<const char*>(d + bo->data_offset), bo->method == 0 ? std::min<uint64_t>(bo->size, 16) : 0);
    if (order != "little")
      throw FormatError(path, "byteorder '" + zip::printable(order) + "' is not supported (only little-endian)");
  }
  const std::string pkl_name = root + "/data.pkl";
  const zip::Entry* pkl = archive.find(pkl_name);
  if (pkl->method != 0)
    throw FormatError(path,
                      "entry '" + zip::printable(pkl_name) + "' is compressed (method " + std::to_string(pkl->method) + ")");
  if (pkl->size > kMaxPickleBytes)
    throw FormatError(path, "entry '" + zip::printable(pkl_name) + "' is " + std::to_string(pkl->size) + " bytes (limit 64 MB)");
  const uint8_t* pkl_data = d + pkl->data_offset;
  if (zip::crc32(pkl_data, pkl->size) != pkl->crc32)
    throw FormatError(path, "entry '" + zip::printable(pkl_name) + "' fails its CRC check (corrupted file)");

  TorchHooks hooks(file, archive, root, upcast_half);
  pickle::Graph graph;
  const ValueId top = pickle::unpickle(pkl_data, pkl->size, graph, hooks, path, pkl_name);

  TensorStore store;
  store.source = path;
  store.format = "pytorch-zip";
  Flattener flat(graph, hooks, store);
  flat.root(top);
  // Same convention as read_safetensors: the stored dtypes, '+'-joined when mixed ("F32", "F16+I64").
  for (const auto& s : flat.dtypes()) store.stored_dtype += (store.stored_dtype.empty() ? "" : "+") + s;
  return store;
}

}  // namespace detail::torch_zip

TensorStore read_torch_zip(const std::string& path) { return read_torch_zip(path, true); }

TensorStore read_torch_zip(const std::string& path, bool upcast_half) {
  try {
    return detail::torch_zip::read(path, upcast_half);
  } catch (const c10::Error& e) {
    // Validation above should make this unreachable; if LibTorch still objects, keep the one-line contract.
    std::string msg = e.what_without_backtrace();
    msg = msg.substr(0, msg.find('\n'));
    throw FormatError(path, "cannot build tensor: " + msg);
  }
}

}  // namespace vocablens
