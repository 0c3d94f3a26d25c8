// SAEs and transcoders from Python (docs/features.md): vocablens.load_sae(path) -> Sae with encode / decode /
// forward on torch tensors and its weights as tensors (views of the loaded file, stored dtype kept). The feature
// analyses (feature_logits, feature_lens, feature_corpus) are declared in analyses/features_entry.cpp.
// vocablens.load_transcoders(dir) -> TranscoderSet (vocablens/transcoders.hpp): circuit-tracer's folders, each
// layer's transcoder an Sae sharing the set's tensors.
#include <memory>

#include "analyses.hpp"
#include "common.hpp"
#include "vocablens/features.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/sae_corpus.hpp"
#include "vocablens/transcoders.hpp"

namespace vlpy {
namespace {

using SaePtr = std::shared_ptr<vocablens::Sae>;

py::object tensor_or_none(const at::Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

}  // namespace

void register_sae(py::module_& mod) {
  py::class_<vocablens::Sae, SaePtr>(mod, "Sae", "An SAE or transcoder read by vocablens.load_sae (vocablens/sae.hpp)")
      .def(
          "encode", [](const vocablens::Sae& s, const at::Tensor& x) { return s.encode(x); }, py::arg("x"),
          "x [..., d_in] -> feature activations [..., d_sae] (float64 input computes in float64)",
          py::call_guard<py::gil_scoped_release>())
      .def(
          "decode",
          [](const vocablens::Sae& s, const at::Tensor& f, std::optional<at::Tensor> x) {
            return s.decode(f, x ? *x : at::Tensor());
          },
          py::arg("f"), py::arg("x") = py::none(),
          "f [..., d_sae] -> reconstruction [..., d_out]; x (the input) is needed for per-input normalisation "
          "and skip connections",
          py::call_guard<py::gil_scoped_release>())
      .def(
          "forward", [](const vocablens::Sae& s, const at::Tensor& x) { return s.forward(x); }, py::arg("x"),
          "decode(encode(x), x)", py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("W_enc", [](const vocablens::Sae& s) { return s.W_enc; })
      .def_property_readonly("W_dec", [](const vocablens::Sae& s) { return s.W_dec; })
      .def_property_readonly("b_enc", [](const vocablens::Sae& s) { return tensor_or_none(s.b_enc); })
      .def_property_readonly("b_dec", [](const vocablens::Sae& s) { return s.b_dec; })
      .def_property_readonly("threshold", [](const vocablens::Sae& s) { return tensor_or_none(s.threshold); })
      .def_property_readonly("W_skip", [](const vocablens::Sae& s) { return tensor_or_none(s.W_skip); })
      .def_property_readonly("scaling_factor", [](const vocablens::Sae& s) { return tensor_or_none(s.scaling_factor); })
      .def_property_readonly("_cfg", [](const vocablens::Sae& s) { return json_to_py(s.cfg); })
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
      "check_sae_fits", [](const vocablens::Sae& s, const PyModel& m) { vocablens::check_sae_fits(s, m.model); }, py::arg("sae"),
      py::arg("model"));
  register_transcoders(mod);
}

void register_transcoders(py::module_& mod) {
  using vocablens::TranscoderSet;
  py::class_<TranscoderSet, std::shared_ptr<TranscoderSet>>(
      mod, "TranscoderSet", "A model's transcoders read by vocablens.load_transcoders (vocablens/transcoders.hpp)")
      .def(
          "layer", [](const TranscoderSet& t, int64_t l) { return std::make_shared<vocablens::Sae>(t.layer(l)); },
          py::arg("layer"), "layer l's transcoder as a vocablens.Sae (hook_name / hook_name_out: the set's points)")
      .def(
          "encode", [](const TranscoderSet& t, int64_t l, const at::Tensor& x) { return t.encode(l, x); }, py::arg("layer"),
          py::arg("x"), "x [..., d_in] read at input_hook(layer) -> features [..., d_transcoder]",
          py::call_guard<py::gil_scoped_release>())
      .def(
          "decoder_rows", [](const TranscoderSet& t, int64_t l, int64_t f) { return t.decoder_rows(l, f); }, py::arg("layer"),
          py::arg("feature"), "[n_outputs(layer), d_out] float32: row j is what the feature writes into block layer + j",
          py::call_guard<py::gil_scoped_release>())
      .def(
          "decode",
          [](const TranscoderSet& t, int64_t out, const std::vector<at::Tensor>& f, std::optional<at::Tensor> x) {
            return t.decode(out, f, x ? *x : at::Tensor());
          },
          py::arg("block"), py::arg("features"), py::arg("x") = py::none(),
          "what the set writes at `block` from the features of every layer <= block (per-layer sets: that block's)",
          py::call_guard<py::gil_scoped_release>())
      .def("n_outputs", &TranscoderSet::n_outputs, py::arg("layer"))
      .def("input_hook", &TranscoderSet::input_hook, py::arg("layer"))
      .def("output_hook", &TranscoderSet::output_hook, py::arg("layer"))
      .def(
          "check_fits", [](const TranscoderSet& t, const PyModel& m) { vocablens::check_transcoders_fit(t, m.model); },
          py::arg("model"))
      .def_property_readonly(
          "kind",
          [](const TranscoderSet& t) {
            return std::string(t.kind == vocablens::TranscoderKind::CrossLayer ? "cross_layer_transcoder" : "transcoder_set");
          })
      .def_readonly("n_layers", &TranscoderSet::n_layers)
      .def_readonly("d_in", &TranscoderSet::d_in)
      .def_readonly("d_transcoder", &TranscoderSet::d_transcoder)
      .def_readonly("d_out", &TranscoderSet::d_out)
      .def_readonly("source", &TranscoderSet::source)
      .def_readonly("stored_dtype", &TranscoderSet::stored_dtype)
      .def_readonly("feature_input_hook", &TranscoderSet::feature_input_hook)
      .def_readonly("feature_output_hook", &TranscoderSet::feature_output_hook)
      .def("__len__", [](const TranscoderSet& t) { return t.n_layers; })
      .def("__repr__", [](const TranscoderSet& t) {
        return "<vocablens.TranscoderSet " +
               std::string(t.kind == vocablens::TranscoderKind::CrossLayer ? "cross-layer" : "per-layer") +
               " n_layers=" + std::to_string(t.n_layers) + " d_transcoder=" + std::to_string(t.d_transcoder) + " reads " +
               t.input_hook(0).substr(t.input_hook(0).find('.', 7) + 1) + ">";
      });
  mod.def(
      "load_transcoders",
      [](const std::string& path) { return std::make_shared<TranscoderSet>(vocablens::load_transcoders(path)); }, py::arg("path"),
      py::call_guard<py::gil_scoped_release>());
}

}  // namespace vlpy
