// The extension module vocablens._vocablens: errors, Model, Tokenizer, Result (docs/python.md).
// The pure-Python package python/vocablens/ wraps it (signatures, DataFrames, progress defaults).
#include <c10/util/Exception.h>

#include <filesystem>

#include "analyses.hpp"
#include "common.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/notebook.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/report.hpp"
#include "vocablens/weight.hpp"

namespace vlpy {
namespace {

using vocablens::Result;

// ---- Result --------------------------------------------------------------------------------------------

py::object array_view(const std::shared_ptr<Result>& r, const std::string& name) {
  auto it = r->arrays.find(name);
  if (it == r->arrays.end()) throw py::key_error(name);
  const vocablens::NdArray& a = it->second;
  std::string dt = a.dtype == "|b1" ? "?" : a.dtype;
  py::dtype dtype(dt);
  std::vector<py::ssize_t> shape(a.shape.begin(), a.shape.end());
  // The array views the Result's bytes and keeps the Result alive (no copy).
  py::object owner = py::cast(r);
  return py::array(dtype, shape, {}, a.bytes.data(), owner);
}

py::list tables_of(const Result& r) {
  py::list out;
  for (const auto& t : r.tables) {
    py::list rows;
    for (const auto& row : t.rows) {
      py::list cells;
      for (const auto& c : row) cells.append(json_to_py(c));
      rows.append(std::move(cells));
    }
    out.append(py::make_tuple(t.name, py::cast(t.columns), std::move(rows)));
  }
  return out;
}

std::vector<std::string> save_result(const Result& r, const std::string& dir, bool json, bool npy, bool csv) {
  vocablens::ExportFormats f;
  f.json = json;
  f.npy = npy;
  f.csv = csv;
  py::gil_scoped_release nogil;
  return vocablens::write_result(r, dir, f);
}

std::string report_of(const std::vector<std::shared_ptr<Result>>& rs, const std::string& path, const std::string& run_dir,
                      const std::string& title) {
  std::vector<Result> copy;
  for (const auto& r : rs) copy.push_back(*r);
  py::gil_scoped_release nogil;
  vocablens::ReportOptions o;
  o.title = title;
  o.run_dir = run_dir;
  std::string html = vocablens::render_report_html(copy, o);
  std::filesystem::path p(path);
  if (p.has_parent_path()) vocablens::ensure_directory(p.parent_path().string());
  vocablens::write_file_atomic(path, html);
  return path;
}

std::vector<std::shared_ptr<Result>> load_results(const std::string& dir) {
  std::vector<Result> rs;
  {
    py::gil_scoped_release nogil;
    rs = vocablens::read_run_directory(dir);
  }
  std::vector<std::shared_ptr<Result>> out;
  for (auto& r : rs) out.push_back(std::make_shared<Result>(std::move(r)));
  return out;
}

// ---- Model ---------------------------------------------------------------------------------------------

std::shared_ptr<PyModel> load(const std::string& path, const std::string& tokenizer) {
  std::shared_ptr<PyModel> m;
  {
    py::gil_scoped_release nogil;
    m = std::make_shared<PyModel>(vocablens::load_model(path));
    m->path = path;
    m->tokenizer_path = tokenizer;
    try {
      m->tok = vocablens::load_tokenizer_for(path, tokenizer);
    } catch (const vocablens::FormatError& e) {
      if (!tokenizer.empty()) throw;
      m->tok_error = std::string("no tokenizer for this model: ") + e.what();
    }
  }
  return m;
}

py::dict config_dict(const vocablens::ModelConfig& c) {
  py::dict d;
  d["architecture"] = c.architecture;
  d["family"] = c.family;
  d["n_layers"] = c.n_layers;
  d["d_model"] = c.d_model;
  d["n_heads"] = c.n_heads;
  d["n_kv_heads"] = c.n_kv_heads;
  d["d_head"] = c.d_head;
  d["d_mlp"] = c.d_mlp;
  d["d_vocab"] = c.vocab_size;
  d["n_ctx"] = c.n_ctx;
  d["normalization"] = vocablens::to_string(c.norm);
  d["eps"] = c.norm_eps;
  d["positions"] = vocablens::to_string(c.positions);
  d["rope_theta"] = c.rope_theta;
  d["rope_interleaved"] = c.rope_interleaved;
  d["act_fn"] = vocablens::to_string(c.activation);
  d["gated_mlp"] = c.gated_mlp;
  d["attn_bias"] = c.attn_bias;
  d["mlp_bias"] = c.mlp_bias;
  d["tied_embeddings"] = c.tied_embeddings;
  d["bos_token_id"] = c.bos_token_id;
  d["eos_token_id"] = c.eos_token_id;
  d["weight_dtype"] = c.weight_dtype;
  // What ActivationCache's norm helpers need to know (apply_ln_to_stack, decompose_resid).
  d["norm_before"] = c.norm_before;
  d["final_norm"] = c.final_norm;
  d["parallel_residual"] = c.parallel_residual;
  // What model.cfg (TransformerLens's field names, python/vocablens/_tl.py) reports beside the above.
  d["rotary_dim"] = c.positions == vocablens::PositionKind::Rotary ? (c.rotary_dim > 0 ? c.rotary_dim : c.d_head) : 0;
  d["attn_softcap"] = c.attn_softcap;
  d["final_softcap"] = c.final_softcap;
  d["sliding_window"] = c.sliding_window;
  d["qk_norm"] = c.qk_norm;
  // Mixtures of experts (0 when dense): experts per block, and how many each token is routed to.
  d["n_experts"] = c.n_experts;
  d["n_experts_used"] = c.n_experts_used;
  return d;
}

int64_t check_layer(const PyModel& m, int64_t layer, const char* arg = "layer") {
  const int64_t L = m.model.config().n_layers;
  if (layer < -L || layer >= L)
    throw py::index_error(std::string(arg) + " " + std::to_string(layer) + " is out of range: the model has " +
                          std::to_string(L) + " layers");
  return layer < 0 ? layer + L : layer;
}

// Weights by role, TransformerLens names: "W_E", "blocks.0.attn.W_Q", "blocks.0.mlp.W_in", "ln_final.w", ...
py::dict weights_dict(const PyModel& pm) {
  const auto& m = pm.model;
  const auto& w = m.weights();
  py::dict d;
  // Matrices stored as F16/BF16/GGUF-quantized come back as float32 copies (F32 stays a view; weight.hpp).
  auto put = [&](const std::string& k, const at::Tensor& t) {
    if (t.defined()) d[py::str(k)] = vocablens::materialize_weight(t);
  };
  put("embed.W_E", w.W_E);
  put("pos_embed.W_pos", w.W_pos);
  for (int64_t l = 0; l < m.config().n_layers; ++l) {
    const auto& lw = w.layers[static_cast<size_t>(l)];
    const std::string b = "blocks." + std::to_string(l) + ".";
    put(b + "ln1.w", lw.ln1_w);
    put(b + "ln1.b", lw.ln1_b);
    put(b + "attn.W_Q", m.W_Q(l));
    put(b + "attn.W_K", m.W_K(l));
    put(b + "attn.W_V", m.W_V(l));
    put(b + "attn.W_O", m.W_O(l));
    put(b + "attn.b_Q", m.b_Q(l));
    put(b + "attn.b_K", m.b_K(l));
    put(b + "attn.b_V", m.b_V(l));
    put(b + "attn.b_O", lw.b_o);
    put(b + "ln2.w", lw.ln2_w);
    put(b + "ln2.b", lw.ln2_b);
    put(b + "mlp.W_in", lw.w_in);
    put(b + "mlp.b_in", lw.b_in);
    put(b + "mlp.W_gate", lw.w_gate);
    put(b + "mlp.b_gate", lw.b_gate);
    put(b + "mlp.W_out", lw.w_out);
    put(b + "mlp.b_out", lw.b_out);
    // Mixtures of experts: the router [d_model, n_experts] (TransformerLens's MoE calls it mlp.W_gate, which here is
    // a dense MLP's gate) and each expert's matrices under TransformerLens's per-expert names.
    put(b + "mlp.W_router", lw.w_router);
    put(b + "mlp.W_shared_gate", lw.w_shared_gate);
    for (size_t e = 0; e < lw.exp_gate.size(); ++e) {
      const std::string x = b + "mlp.experts." + std::to_string(e) + ".";
      put(x + "W_gate", lw.exp_gate[e]);
      put(x + "W_in", lw.exp_up[e]);
      put(x + "W_out", lw.exp_down[e]);
    }
  }
  put("ln_final.w", w.lnf_w);
  put("ln_final.b", w.lnf_b);
  put("unembed.W_U", w.W_U);
  put("unembed.b_U", w.b_U);
  return d;
}

at::Tensor layer_weight(const PyModel& pm, int64_t l, const std::string& key) {
  const auto& m = pm.model;
  const auto& lw = m.weights().layers[static_cast<size_t>(l)];
  if (key == "W_Q") return m.W_Q(l);
  if (key == "W_K") return m.W_K(l);
  if (key == "W_V") return m.W_V(l);
  if (key == "W_O") return m.W_O(l);
  if (key == "b_Q") return m.b_Q(l);
  if (key == "b_K") return m.b_K(l);
  if (key == "b_V") return m.b_V(l);
  if (key == "b_O") return lw.b_o;
  if (key == "W_in") return m.W_in(l);
  if (key == "b_in") return lw.b_in;
  if (key == "W_gate") return m.W_gate(l);
  if (key == "b_gate") return lw.b_gate;
  if (key == "W_out") return m.W_out(l);
  if (key == "b_out") return lw.b_out;
  if (key == "ln1.w") return lw.ln1_w;
  if (key == "ln1.b") return lw.ln1_b;
  if (key == "ln2.w") return lw.ln2_w;
  if (key == "ln2.b") return lw.ln2_b;
  throw py::value_error("no block weight named '" + key + "'");
}

// ---- token ids of a batch (forward, run_with_hooks, run_with_cache: python/vocablens/_hooks.py) ----------

at::Tensor batch_ids(const PyModel& m, py::handle input, std::optional<bool> bos) {
  if (THPVariable_Check(input.ptr())) {
    const at::Tensor& t = THPVariable_Unpack(input.ptr());
    if (t.dim() == 2 && t.size(0) > 1) {
      if (at::isFloatingType(t.scalar_type()) || t.scalar_type() == at::kBool)
        throw py::type_error("input must be an integer tensor of token ids, not " + std::string(t.dtype().name()));
      at::Tensor ids = t.to(at::kLong).contiguous();
      const int64_t V = m.model.config().vocab_size;
      if (ids.numel() && (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= V))
        throw py::value_error("input holds ids outside 0 .. " + std::to_string(V - 1));
      return ids;
    }
  }
  std::vector<int64_t> v = ids_from(m, input, "input", bos);
  return at::tensor(v, at::kLong).unsqueeze(0);
}

}  // namespace

void register_hooks(py::module_& mod);  // python/src/bind_hooks.cpp
}  // namespace vlpy

PYBIND11_MODULE(_vocablens, mod) {
  using namespace vlpy;
  using vocablens::Result;
  py::module_::import("torch");  // THPVariableClass must be set before any tensor crosses
  mod.doc() = "vocablens C++ core (use the `vocablens` package, not this module directly)";

  // ---- errors: the library's one-line messages, unchanged
  static py::exception<vocablens::Error> error(mod, "Error", PyExc_RuntimeError);
  static py::exception<vocablens::FormatError> format_error(mod, "FormatError", error.ptr());
  static PyObject* usage_bases = PyTuple_Pack(2, error.ptr(), PyExc_ValueError);
  static py::exception<vocablens::UsageError> usage_error(mod, "UsageError", usage_bases);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const vocablens::FormatError& e) {
      PyErr_SetString(format_error.ptr(), e.what());
    } catch (const vocablens::UsageError& e) { PyErr_SetString(usage_error.ptr(), e.what()); } catch (const vocablens::Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    } catch (const c10::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what_without_backtrace());
    } catch (const c10::Error& e) { PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace()); }
  });

  // ---- Tokenizer
  py::class_<vocablens::Tokenizer, std::shared_ptr<vocablens::Tokenizer>>(mod, "Tokenizer")
      .def_property_readonly("kind", &vocablens::Tokenizer::kind)
      .def_property_readonly("source", &vocablens::Tokenizer::source)
      .def_property_readonly("vocab_size", &vocablens::Tokenizer::vocab_size)
      .def_property_readonly("bos_id", &vocablens::Tokenizer::bos_id)
      .def_property_readonly("eos_id", &vocablens::Tokenizer::eos_id)
      .def(
          "token_bytes", [](const vocablens::Tokenizer& t, int64_t id) { return py::bytes(t.token_bytes(id)); }, py::arg("id"))
      .def("display", &vocablens::Tokenizer::display, py::arg("id"))
      .def(
          "token_to_id", [](const vocablens::Tokenizer& t, const std::string& s) { return t.token_to_id(s); }, py::arg("token"))
      .def("is_special", &vocablens::Tokenizer::is_special, py::arg("id"))
      .def("__repr__", [](const vocablens::Tokenizer& t) {
        return "<vocablens.Tokenizer " + t.kind() + ", " + std::to_string(t.vocab_size()) + " tokens, " + t.source() + ">";
      });

  // ---- Model
  py::class_<PyModel, std::shared_ptr<PyModel>>(mod, "Model", py::dynamic_attr())  // Python keeps hook contexts on it
      .def_property_readonly("source", [](const PyModel& m) { return m.model.source(); })
      .def_property_readonly("config", [](const PyModel& m) { return config_dict(m.model.config()); })
      .def_property_readonly("tokenizer",
                             [](const PyModel& m) -> py::object {
                               if (!m.tok) return py::none();
                               // shares ownership with the model handle
                               return py::cast(std::const_pointer_cast<vocablens::Tokenizer>(m.tok));
                             })
      .def_property_readonly("tokenizer_error", [](const PyModel& m) { return m.tok_error; })
      .def("parameter_count", [](const PyModel& m) { return m.model.parameter_count(); })
      .def(
          "tokenize",
          [](const PyModel& m, py::object text, std::optional<bool> bos, bool eos, bool special) {
            if (!py::isinstance<py::str>(text))
              throw py::type_error("text must be a str, not " + std::string(py::str(text.get_type().attr("__name__"))));
            vocablens::EncodeOptions eo;
            eo.add_bos = bos;
            eo.add_eos = eos;
            eo.special_tokens = special;
            std::string s = text.cast<std::string>();
            return m.tokenizer().encode(s, eo);
          },
          py::arg("text"), py::arg("bos") = py::none(), py::arg("eos") = false, py::arg("special_tokens") = false)
      .def(
          "decode_bytes",
          [](const PyModel& m, py::handle ids) {
            std::vector<int64_t> v = ids_from(m, ids, "ids");
            return py::bytes(m.tokenizer().decode(v));
          },
          py::arg("ids"))
      .def(
          "token_strings",
          [](const PyModel& m, py::handle ids) {
            std::vector<int64_t> v = ids_from(m, ids, "ids");
            std::vector<std::string> out;
            for (int64_t id : v) out.push_back(m.tokenizer().display(id));
            return out;
          },
          py::arg("ids"))
      .def(
          "to_ids", [](const PyModel& m, py::handle input, std::optional<bool> bos) { return ids_from(m, input, "input", bos); },
          py::arg("input"), py::arg("bos") = py::none())
      .def(
          "token_id", [](const PyModel& m, py::handle token) { return token_from(m, token, "token"); }, py::arg("token"))
      // forward, run_with_hooks, run_with_cache, gradients: python/vocablens/_hooks.py over bind_hooks.cpp.
      .def(
          "_batch_ids",
          [](const PyModel& m, py::handle input, std::optional<bool> bos) {
            at::Tensor ids = batch_ids(m, input, bos);
            if (ids.size(1) > m.model.config().n_ctx)
              throw py::value_error("input is " + std::to_string(ids.size(1)) + " tokens, longer than the model's context of " +
                                    std::to_string(m.model.config().n_ctx));
            return ids;
          },
          py::arg("input"), py::arg("bos") = py::none())
      // The C++ greedy loop (its keys and values cached): model.generate's path without Python hooks or sampling
      // (python/vocablens/_generate.py). ids are checked there.
      .def(
          "_generate_greedy",
          [](const PyModel& m, std::vector<int64_t> ids, int64_t steps, int64_t stop) {
            py::gil_scoped_release nogil;
            return m.model.generate_greedy(std::move(ids), steps, stop);
          },
          py::arg("ids"), py::arg("steps"), py::arg("stop"))
      .def("weights", &weights_dict)
      .def_property_readonly("W_E", [](const PyModel& m) { return m.model.W_E(); })
      .def_property_readonly("W_U", [](const PyModel& m) { return m.model.W_U(); })
      .def_property_readonly("W_pos", [](const PyModel& m) { return m.model.W_pos(); })
      .def_property_readonly("b_U", [](const PyModel& m) { return m.model.weights().b_U; })
      // One block's weight by its TransformerLens name (W_Q ... b_out, ln1.w ...), float32, None when the model has
      // none; the stacked properties model.W_Q, ... and model.blocks[l] are made from it (python/vocablens/_tl.py).
      .def(
          "_layer_weight",
          [](const PyModel& m, int64_t l, const std::string& key) -> py::object {
            at::Tensor t = layer_weight(m, check_layer(m, l), key);
            if (!t.defined()) return py::none();
            return py::cast(vocablens::materialize_weight(t));
          },
          py::arg("layer"), py::arg("key"))
      .def(
          "final_norm",
          [](const PyModel& m, const at::Tensor& x) {
            if (x.dim() < 1 || x.size(-1) != m.model.config().d_model)
              throw py::value_error("x must have d_model = " + std::to_string(m.model.config().d_model) + " as last dimension");
            return m.model.final_norm(x.to(at::kFloat));
          },
          py::arg("x"))
      .def(
          "_final_norm_weight",
          [](const PyModel& m, const std::string& which) -> py::object {
            const auto& w = m.model.weights();
            const at::Tensor& t = which == "w" ? w.lnf_w : which == "b" ? w.lnf_b : at::Tensor();
            if (!t.defined()) return py::none();
            return py::cast(vocablens::materialize_weight(t));
          },
          py::arg("which"))
      .def(
          "_unembed",
          [](const PyModel& m, const at::Tensor& x) {
            if (x.dim() < 1 || x.size(-1) != m.model.config().d_model)
              throw py::value_error("x must have d_model = " + std::to_string(m.model.config().d_model) + " as last dimension");
            return m.model.unembed(x.to(at::kFloat));
          },
          py::arg("x"));

  mod.def("load_model", &load, py::arg("path"), py::arg("tokenizer") = "");
  // The CLI's --compute (alias --dtype) / VOCABLENS_COMPUTE (vocablens/weight.hpp): process-wide, as the runner
  // reads it per product. set_compute/get_compute are its names; set_dtype/get_dtype the older ones, kept.
  const char* set_doc =
      "How every model's products with weights stored as F16/BF16/quantized are computed, for the whole process: "
      "'float32' (default; exact against the stored weights), 'bfloat16' (activations and weights rounded to bf16, "
      "float32 accumulation, ~1e-2 relative error; about twice as fast on CPUs with AVX512-BF16) or 'int8' "
      "(llama.cpp's numerics and speed for GGUF Q4_0/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K weights: activations quantized per "
      "block as llama.cpp does, integer dot products; other weight types stay exact, said once on stderr). Float32 "
      "weights are always multiplied in float32. Results record the mode in provenance['compute'].";
  auto set_compute = [](const std::string& d) { vocablens::set_compute_dtype(vocablens::compute_dtype_from_string(d)); };
  auto get_compute = [] { return std::string(vocablens::compute_dtype_name(vocablens::compute_dtype())); };
  mod.def("set_compute", set_compute, py::arg("mode"), set_doc);
  mod.def("get_compute", get_compute, "The compute mode set_compute chose: 'float32', 'bfloat16' or 'int8'.");
  mod.def("set_dtype", set_compute, py::arg("dtype"), "The older name of set_compute (same modes).");
  mod.def("get_dtype", get_compute, "The older name of get_compute.");
  // VOCABLENS_THREADS, as the CLI reads it (vocablens/model.hpp); called by __init__.py only when the variable is
  // set, so that an unset one leaves torch's own default.
  mod.def("_init_runtime", [] { vocablens::init_runtime(); });

  // ---- Result
  py::class_<Result, std::shared_ptr<Result>>(mod, "Result")
      .def_readwrite("kind", &Result::kind)
      .def_property_readonly("settings", [](const Result& r) { return json_to_py(r.settings); })
      .def_property_readonly("provenance", [](const Result& r) { return json_to_py(r.provenance); })
      .def_property_readonly("summary", [](const Result& r) { return json_to_py(r.summary); })
      .def("set_summary", [](Result& r, const std::string& key, py::handle v) { r.summary[key] = py_to_json(v, key); })
      .def("array_names",
           [](const Result& r) {
             std::vector<std::string> n;
             for (const auto& kv : r.arrays) n.push_back(kv.first);
             return n;
           })
      .def("array", [](const std::shared_ptr<Result>& r, const std::string& name) { return array_view(r, name); })
      .def("tables", [](const Result& r) { return tables_of(r); })
      .def("save", &save_result, py::arg("dir"), py::arg("json") = true, py::arg("npy") = true, py::arg("csv") = true)
      .def(
          "to_json", [](const Result& r, bool inline_arrays) { return vocablens::result_to_json(r, inline_arrays); },
          py::arg("inline_arrays") = false);

  mod.def("report", &report_of, py::arg("results"), py::arg("path"), py::arg("run_dir") = "", py::arg("title") = "");
  mod.def(
      "notebook",
      [](const std::vector<std::shared_ptr<Result>>& rs, const std::string& run_dir) {
        std::vector<Result> copy;
        for (const auto& r : rs) copy.push_back(*r);
        py::gil_scoped_release nogil;
        return vocablens::write_notebook(copy, run_dir);
      },
      py::arg("results"), py::arg("run_dir"));
  mod.def("load_results", &load_results, py::arg("dir"));
  mod.attr("__version__") = VOCABLENS_VERSION;

  register_declared(mod);
  register_compare(mod);
  register_hooks(mod);
  register_sae(mod);
  register_graph(mod);
}
