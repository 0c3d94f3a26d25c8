// Shared pieces of the Python binding (see common.hpp).
#include "common.hpp"

#include <cmath>
#include <cstdio>

#include "vocablens/error.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/provenance.hpp"
#include "vocablens/token_id.hpp"

namespace vlpy {

const vocablens::Tokenizer& PyModel::tokenizer() const {
  if (!tok) throw vocablens::UsageError(tok_error.empty() ? "this model has no tokenizer" : tok_error);
  return *tok;
}

// ---- JSON <-> Python ------------------------------------------------------------------------------------

py::object json_to_py(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(j.get<double>());
    case nlohmann::json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      // Token strings are valid UTF-8 by construction; anything else is shown, not raised.
      PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
      if (!o) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(o);
    }
    case nlohmann::json::value_t::array: {
      py::list l;
      for (const auto& e : j) l.append(json_to_py(e));
      return std::move(l);
    }
    case nlohmann::json::value_t::object: {
      py::dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d[py::str(it.key())] = json_to_py(it.value());
      return std::move(d);
    }
    default: return py::none();
  }
}

nlohmann::json py_to_json(py::handle h, const std::string& arg) {
  if (h.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(h)) return h.cast<bool>();
  if (py::isinstance<py::int_>(h)) {
    // 2**63 and beyond: pybind's cast would say only "Unable to cast Python instance"; name the argument instead.
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow != 0)
      throw py::value_error(arg + ": " + std::string(py::str(h)) + " is out of range (integers here are 64-bit)");
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return static_cast<int64_t>(v);
  }
  if (py::isinstance<py::float_>(h)) return h.cast<double>();
  if (py::isinstance<py::str>(h)) return h.cast<std::string>();
  if (py::isinstance<py::dict>(h)) {
    nlohmann::json o = nlohmann::json::object();
    for (auto kv : py::reinterpret_borrow<py::dict>(h)) {
      if (!py::isinstance<py::str>(kv.first)) throw py::type_error(arg + ": dictionary keys must be str");
      o[kv.first.cast<std::string>()] = py_to_json(kv.second, arg);
    }
    return o;
  }
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    nlohmann::json a = nlohmann::json::array();
    for (auto e : h) a.push_back(py_to_json(e, arg));
    return a;
  }
  throw py::type_error(arg + ": cannot store a " + std::string(py::str(h.get_type().attr("__name__"))) +
                       " (use dict, list, str, int, float, bool or None)");
}

namespace {
std::string type_name(py::handle v) { return py::str(v.get_type().attr("__name__")); }
bool is_int(py::handle v) {
  if (py::isinstance<py::bool_>(v)) return false;
  if (py::isinstance<py::int_>(v)) return true;
  // numpy integer scalars, 0-d integer tensors: anything with __index__ that is not a float/bool
  return PyIndex_Check(v.ptr()) && !py::isinstance<py::float_>(v);
}
// An integer (anything with __index__) as int64; beyond 64 bits a ValueError naming `what`, not pybind's
// "Unable to cast".
int64_t index_of(py::handle e, const std::string& what) {
  py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(e.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0) throw py::value_error(what + " = " + std::string(py::str(i)) + " is out of range");
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<int64_t>(v);
}
}  // namespace

// ---- token ids ---------------------------------------------------------------------------------------------

std::vector<int64_t> ids_from(const PyModel& m, py::handle v, const std::string& arg, std::optional<bool> bos) {
  std::vector<int64_t> ids;
  if (py::isinstance<py::str>(v)) {
    std::string text = v.cast<std::string>();
    if (text.empty()) throw py::value_error(arg + " is empty: give at least one character of text");
    vocablens::EncodeOptions eo;
    eo.add_bos = bos;
    ids = m.tokenizer().encode(text, eo);
    if (ids.empty()) throw py::value_error(arg + " encodes to no tokens");
    return ids;
  }
  if (py::isinstance<py::bytes>(v)) throw py::type_error(arg + " must be str or token ids, not bytes (decode it first)");
  if (THPVariable_Check(v.ptr())) {
    const at::Tensor& t = THPVariable_Unpack(v.ptr());
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()) || t.scalar_type() == at::kBool)
      throw py::type_error(arg + " must be an integer tensor of token ids, not " + std::string(t.dtype().name()));
    if (t.dim() == 2 && t.size(0) == 1) return ids_from(m, py::cast(t[0]), arg, bos);
    if (t.dim() != 1)
      throw py::value_error(arg + " must be 1-D [T] (or [1, T]) token ids, got shape " +
                            std::string(py::str(py::cast(t.sizes().vec()))));
    at::Tensor c = t.to(at::kLong).contiguous();
    ids.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  } else if (py::hasattr(v, "__array_interface__") && py::hasattr(v, "dtype")) {
    std::string kind = py::str(v.attr("dtype").attr("kind"));
    if (kind != "i" && kind != "u")
      throw py::type_error(arg + " must be an integer array of token ids, not dtype " + std::string(py::str(v.attr("dtype"))));
    int ndim = v.attr("ndim").cast<int>();
    py::tuple shape = v.attr("shape");
    if (ndim == 2 && shape[0].cast<int64_t>() == 1) return ids_from(m, v[py::int_(0)], arg, bos);
    if (ndim != 1)
      throw py::value_error(arg + " must be 1-D [T] (or [1, T]) token ids, got shape " + std::string(py::str(shape)));
    for (auto e : v) ids.push_back(index_of(e, arg + "[" + std::to_string(ids.size()) + "]"));
  } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v) ||
             py::isinstance(v, py::module_::import("builtins").attr("range"))) {
    for (auto e : v) {
      if (!is_int(e)) throw py::type_error(arg + " must hold int token ids, not " + type_name(e));
      ids.push_back(index_of(e, arg + "[" + std::to_string(ids.size()) + "]"));
    }
  } else {
    throw py::type_error(arg + " must be a str, a list of token ids or an integer tensor, not " + type_name(v));
  }
  if (ids.empty()) throw py::value_error(arg + " holds no tokens");
  const int64_t V = m.model.config().vocab_size;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= V)
      throw py::value_error(arg + "[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                            " is not a token id of this model (0 .. " + std::to_string(V - 1) + ")");
  return ids;
}

int64_t token_from(const PyModel& m, py::handle v, const std::string& arg) {
  if (is_int(v)) {
    int64_t id = index_of(v, arg);
    if (id < 0 || id >= m.model.config().vocab_size)
      throw py::value_error(arg + " = " + std::to_string(id) + " is not a token id of this model (0 .. " +
                            std::to_string(m.model.config().vocab_size - 1) + ")");
    return id;
  }
  if (!py::isinstance<py::str>(v)) throw py::type_error(arg + " must be a token (str) or a token id (int), not " + type_name(v));
  std::string s = v.cast<std::string>();
  if (s.empty()) throw py::value_error(arg + " is empty: give one token, e.g. \" Paris\"");
  const auto& tok = m.tokenizer();
  std::vector<int64_t> pieces;
  if (auto id = vocablens::single_token_id(tok, s, &pieces)) return *id;  // the CLI's rule (token_id.hpp)
  throw py::value_error(arg + " '" + s + "' is " + std::to_string(pieces.size()) + " tokens (" +
                        vocablens::display_ids(tok, pieces) + "); give a single token or its id");
}

// ---- progress ----------------------------------------------------------------------------------------------

Progress::Progress(py::object mode, int64_t total, const std::string& description, const std::string& unit)
    : total_(total), desc_(description) {
  if (mode.is_none() || (py::isinstance<py::bool_>(mode) && mode.cast<bool>())) {
    bool forced = !mode.is_none();
    try {
      // tqdm.auto draws a widget in Jupyter, but without ipywidgets it warns ("IProgress not found") in the
      // cell's output and falls back to the text bar: take the text bar directly then.
      const bool widgets = !py::module_::import("importlib.util").attr("find_spec")("ipywidgets").is_none();
      py::object tqdm = py::module_::import(widgets ? "tqdm.auto" : "tqdm.std").attr("tqdm");
      // progress=None: the bar appears only once the call has run for a second (tqdm's delay), so quick
      // calls print nothing in a notebook; progress=True shows it at once.
      bar_ = tqdm(py::arg("total") = total, py::arg("desc") = description, py::arg("unit") = unit, py::arg("leave") = false,
                  py::arg("delay") = forced ? 0.0 : 1.0);
    } catch (const py::error_already_set&) {
      plain_ = forced;  // no tqdm: a plain line on stderr only when asked for explicitly
    }
  } else if (py::isinstance<py::bool_>(mode)) {
    // False: nothing
  } else if (PyCallable_Check(mode.ptr())) {
    callback_ = mode;
  } else {
    throw py::type_error("progress must be None, True, False or a callable f(done, total), not " + type_name(mode));
  }
}

Progress::~Progress() {
  py::gil_scoped_acquire gil;
  try {
    if (bar_) bar_.attr("close")();
    if (plain_) std::fprintf(stderr, "\r%*s\r", 70, "");
  } catch (const py::error_already_set&) {}
  bar_ = py::object();
  callback_ = py::object();
}

void Progress::update_locked(int64_t delta) {
  done_ += delta;
  if (bar_) bar_.attr("update")(delta);
  if (callback_) callback_(done_, total_);
  if (plain_) {
    double f = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
    int filled = static_cast<int>(f * 30);
    std::fprintf(stderr, "\r%s [%s%s] %lld/%lld", desc_.c_str(), std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(30 - filled), '.').c_str(), static_cast<long long>(done_),
                 static_cast<long long>(total_));
    std::fflush(stderr);
  }
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

void Progress::advance(int64_t n) {
  py::gil_scoped_acquire gil;
  update_locked(n);
}

void Progress::set(int64_t done, int64_t total) {
  py::gil_scoped_acquire gil;
  if (total != total_) {
    total_ = total;
    // No refresh: it would draw at once, and a quick call must print nothing (the bar waits a second).
    if (bar_) bar_.attr("total") = total;
  }
  update_locked(done - done_);
}

void Progress::set(int64_t done) {
  py::gil_scoped_acquire gil;
  update_locked(done - done_);
}

// ---- provenance --------------------------------------------------------------------------------------------

void fill_provenance(vocablens::Result& r, const PyModel& m, const std::string& call) {
  vocablens::fill_provenance(r, m.model, call);
  if (m.tok) r.provenance["tokenizer"] = m.tok->source();
}

std::string describe_call(const std::string& name, const py::dict& kwargs) {
  std::string s = "python: vocablens." + name + "(";
  bool first = true;
  for (auto kv : kwargs) {
    if (kv.second.is_none()) continue;
    std::string v = py::repr(kv.second);
    if (v.size() > 200) v = v.substr(0, 200) + "...";
    s += (first ? "" : ", ") + std::string(py::str(kv.first)) + "=" + v;
    first = false;
  }
  return s + ")";
}

}  // namespace vlpy
