// python/src/common.hpp — what every part of the Python binding shares: the model handle, argument
// checking that names the argument, tensors and JSON crossing into Python, progress with Ctrl-C.
//
// Tensors cross as torch.Tensor objects of Debian's python3-torch (same libtorch_cpu.so as libtorch-dev):
// torch/csrc/utils/pybind.h supplies the at::Tensor <-> torch.Tensor caster (THPVariable_Wrap /
// THPVariable_Unpack), so a returned at::Tensor shares its storage with the Python object, no copy.
//
// Rules for a binding (docs/python.md, "Adding an analysis"):
//  - read every keyword through Options (TypeError / ValueError naming the argument, unknown keywords refused);
//  - run the C++ work inside `py::gil_scoped_release` (other Python threads keep running);
//  - long loops tick a Progress, which also turns a pending Ctrl-C into KeyboardInterrupt between steps.
#pragma once
#include <torch/csrc/autograd/python_variable.h>  // the at::Tensor caster (torch/csrc/utils/pybind.h)
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/model.hpp"
#include "vocablens/result.hpp"
#include "vocablens/tokenizer.hpp"

namespace py = pybind11;

namespace vlpy {

/// A loaded model and, when one was found beside it, its tokenizer.
struct PyModel {
  explicit PyModel(vocablens::Model m) : model(std::move(m)) {}
  vocablens::Model model;
  std::shared_ptr<const vocablens::Tokenizer> tok;  ///< null when none was found
  std::string tok_error;                            ///< why not (the FormatError's message)
  std::string path;                                 ///< as given to load_model
  std::string tokenizer_path;                       ///< as given (empty = searched beside the model)
  /// The tokenizer, or UsageError(tok_error) when the model has none.
  const vocablens::Tokenizer& tokenizer() const;
};

/// Python value of a JSON value (dict, list, str, int, float, bool, None).
py::object json_to_py(const nlohmann::json& j);
/// JSON of a Python value made of dict/list/tuple/str/int/float/bool/None; TypeError naming `arg` otherwise.
nlohmann::json py_to_json(py::handle h, const std::string& arg);

/// Token ids from a Python value: str (encoded with the model's tokenizer, BOS as it decides unless `bos`
/// says), list/tuple of int, 1-D (or [1, T]) integer torch.Tensor or numpy array. TypeError / ValueError
/// naming `arg`. Empty sequences are a ValueError.
std::vector<int64_t> ids_from(const PyModel& m, py::handle v, const std::string& arg, std::optional<bool> bos = {});

/// A single token: int id, or str (its bytes, its display form, or text that encodes to one token).
int64_t token_from(const PyModel& m, py::handle v, const std::string& arg);

/// Progress over `total` steps: a tqdm bar when tqdm imports (or a plain stderr line when `mode` is True
/// without tqdm), nothing when `mode` is False; a callable is called as f(done, total). advance() may be
/// called with the GIL released: it takes the GIL, updates the bar and calls PyErr_CheckSignals, so a
/// pending Ctrl-C raises KeyboardInterrupt (thrown as py::error_already_set through the C++ work, whose
/// destructors clean up).
class Progress {
 public:
  Progress(py::object mode, int64_t total, const std::string& description, const std::string& unit = "it");
  ~Progress();
  void advance(int64_t n = 1);
  void set(int64_t done);
  void set(int64_t done, int64_t total);  ///< also (re)sets the total
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  void update_locked(int64_t delta);
  py::object bar_, callback_;
  bool plain_ = false;
  int64_t total_ = 0, done_ = 0;
  std::string desc_;
};

/// Provenance of a result computed from Python: what the CLI records (model path, config hash, sizes,
/// version, UTC time; see vocablens/provenance.hpp) with `call` as the command line.
void fill_provenance(vocablens::Result& r, const PyModel& m, const std::string& call);

/// "name(k=v, ...)" for provenance, from the keyword dict as given.
std::string describe_call(const std::string& name, const py::dict& kwargs);

}  // namespace vlpy
