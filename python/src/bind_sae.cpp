// SAEs and transcoders from Python (docs/features.md): vocablens.load_sae(path) -> Sae with encode / decode /
// forward on torch tensors and its weights as tensors (views of the loaded file, stored dtype kept), and the
// "feature_logits" analysis (vocablens.feature_logits(model, sae, top_k=...)).
#include <memory>

#include "analyses.hpp"
#include "common.hpp"
#include "vocablens/features.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_corpus.hpp"

namespace vlpy {
namespace {

using SaePtr = std::shared_ptr<vocablens::Sae>;

py::object tensor_or_none(const at::Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

std::shared_ptr<const vocablens::Sae> sae_arg(Options& o) {
  py::object s = o.raw("sae");
  if (s.is_none()) o.type_error("sae", "a vocablens.Sae (from vocablens.load_sae); it is required");
  try {
    return s.cast<SaePtr>();
  } catch (const py::cast_error&) {
    o.type_error("sae", "a vocablens.Sae (from vocablens.load_sae)");
  }
}

RegisterAnalysis reg_features{
    "feature_logits",
    "SAE / transcoder features in vocabulary space: top and bottom tokens of each decoder direction through W_U",
    [](const PyModel& m, Options& o) {
      auto sae = sae_arg(o);
      vocablens::FeatureLogitsOptions fo;
      fo.top_k = o.integer_at_least("top_k", 10, 1);
      fo.features = o.indices("features");
      fo.bottom = o.flag("bottom", true);
      fo.final_norm_scale = o.flag("final_norm", false);
      py::object progress = o.raw("progress");
      o.finish();
      const int64_t total = fo.features.empty() ? sae->d_sae : static_cast<int64_t>(fo.features.size());
      Progress bar(progress, total, "features", "feature");
      py::gil_scoped_release nogil;
      vocablens::check_sae_fits(*sae, m.model);
      int64_t last = 0;
      fo.progress = [&](int64_t done, int64_t) {
        bar.advance(done - last);
        last = done;
      };
      auto a = vocablens::feature_logits(m.model, *sae, fo, m.tok.get());
      return a.to_result(m.tok.get());
    }};

RegisterAnalysis reg_lens{
    "feature_lens", "Feature lens: the SAE's features firing at each position of a prompt, with their top tokens",
    [](const PyModel& m, Options& o) {
      auto sae = sae_arg(o);
      py::object prompt = o.raw("prompt");
      if (prompt.is_none()) o.type_error("prompt", "text or token ids; it is required");
      std::vector<int64_t> ids = ids_from(m, prompt, "prompt");
      const std::string text = py::isinstance<py::str>(prompt) ? prompt.cast<std::string>() : std::string();
      vocablens::FeatureLensOptions fo;
      fo.top_features = o.integer_at_least("top_features", 5, 1);
      fo.top_k = o.integer_at_least("top_k", 5, 1);
      fo.final_norm_scale = o.flag("final_norm", false);
      o.finish();
      py::gil_scoped_release nogil;
      return vocablens::feature_lens(m.model, *sae, ids, fo, m.tok.get()).to_result(m.tok.get(), text);
    }};

RegisterAnalysis reg_corpus{
    "feature_corpus",
    "An SAE over a text file: firing density, histograms, dead features, L0, max-activating contexts, MSE, "
    "explained variance, CE loss recovered",
    [](const PyModel& m, Options& o) {
      auto sae = sae_arg(o);
      vocablens::SaeCorpusOptions so;
      so.window = o.integer_at_least("window", 0, 0);
      so.max_tokens = o.integer_at_least("max_tokens", 0, 0);
      so.contexts = o.integer_at_least("contexts", 5, 0);
      so.ce_metrics = o.flag("ce", true);
      const std::string path = o.str("path", "");
      py::object progress = o.raw("progress");
      o.finish();
      if (path.empty()) throw py::value_error("feature_corpus(): path is empty: give a text file");
      const auto& tok = m.tokenizer();
      Progress bar(progress, 0, "feature corpus", "B");
      so.progress = [&bar](uint64_t done, uint64_t total) {
        bar.set(static_cast<int64_t>(done), static_cast<int64_t>(total));
      };
      py::gil_scoped_release nogil;
      return vocablens::sae_corpus_stats(m.model, *sae, tok, path, so).to_result(&tok);
    }};

}  // namespace

void register_sae(py::module_& mod) {
  py::class_<vocablens::Sae, SaePtr>(mod, "Sae", "An SAE or transcoder read by vocablens.load_sae (vocablens/sae.hpp)")
      .def("encode", [](const vocablens::Sae& s, const at::Tensor& x) { return s.encode(x); }, py::arg("x"),
           "x [..., d_in] -> feature activations [..., d_sae] (float64 input computes in float64)",
           py::call_guard<py::gil_scoped_release>())
      .def("decode",
           [](const vocablens::Sae& s, const at::Tensor& f, std::optional<at::Tensor> x) {
             return s.decode(f, x ? *x : at::Tensor());
           },
           py::arg("f"), py::arg("x") = py::none(),
           "f [..., d_sae] -> reconstruction [..., d_out]; x (the input) is needed for per-input normalisation "
           "and skip connections",
           py::call_guard<py::gil_scoped_release>())
      .def("forward", [](const vocablens::Sae& s, const at::Tensor& x) { return s.forward(x); }, py::arg("x"),
           "decode(encode(x), x)", py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("W_enc", [](const vocablens::Sae& s) { return s.W_enc; })
      .def_property_readonly("W_dec", [](const vocablens::Sae& s) { return s.W_dec; })
      .def_property_readonly("b_enc", [](const vocablens::Sae& s) { return tensor_or_none(s.b_enc); })
      .def_property_readonly("b_dec", [](const vocablens::Sae& s) { return s.b_dec; })
      .def_property_readonly("threshold", [](const vocablens::Sae& s) { return tensor_or_none(s.threshold); })
      .def_property_readonly("W_skip", [](const vocablens::Sae& s) { return tensor_or_none(s.W_skip); })
      .def_property_readonly("scaling_factor", [](const vocablens::Sae& s) { return tensor_or_none(s.scaling_factor); })
      .def_property_readonly("cfg", [](const vocablens::Sae& s) { return json_to_py(s.cfg); })
      .def_property_readonly("hook_name", [](const vocablens::Sae& s) { return s.hook_name; })
      .def_property_readonly("hook_name_out", [](const vocablens::Sae& s) { return s.hook_name_out; })
      .def_property_readonly("layout", [](const vocablens::Sae& s) { return s.layout; })
      .def_property_readonly("architecture", [](const vocablens::Sae& s) { return std::string(to_string(s.architecture)); })
      .def_property_readonly("normalize_activations", [](const vocablens::Sae& s) { return std::string(to_string(s.normalize)); })
      .def_property_readonly("apply_b_dec_to_input", [](const vocablens::Sae& s) { return s.apply_b_dec_to_input; })
      .def_property_readonly("stored_dtype", [](const vocablens::Sae& s) { return s.stored_dtype; })
      .def_property_readonly("source", [](const vocablens::Sae& s) { return s.source; })
      .def_property_readonly("d_in", [](const vocablens::Sae& s) { return s.d_in; })
      .def_property_readonly("d_sae", [](const vocablens::Sae& s) { return s.d_sae; })
      .def_property_readonly("d_out", [](const vocablens::Sae& s) { return s.d_out; })
      .def("__repr__", [](const vocablens::Sae& s) {
        return "<vocablens.Sae " + s.layout + " " + to_string(s.architecture) + " d_in=" + std::to_string(s.d_in) +
               " d_sae=" + std::to_string(s.d_sae) + " hook=" + (s.hook_name.empty() ? "?" : s.hook_name) + ">";
      });
  mod.def(
      "load_sae",
      [](const std::string& path, const std::string& hook_name) {
        vocablens::SaeLoadOptions o;
        o.hook_name = hook_name;
        return std::make_shared<vocablens::Sae>(vocablens::load_sae(path, o));
      },
      py::arg("path"), py::arg("hook_name") = "", py::call_guard<py::gil_scoped_release>());
  mod.def(
      "check_sae_fits", [](const vocablens::Sae& s, const PyModel& m) { vocablens::check_sae_fits(s, m.model); },
      py::arg("sae"), py::arg("model"));
}

}  // namespace vlpy
