// SAEs and transcoders from Python (docs/features.md): vocablens.load_sae(path) -> Sae with encode / decode /
// forward on torch tensors and its weights as tensors (views of the loaded file, stored dtype kept). The feature
// analyses (feature_logits, feature_lens, feature_corpus) are declared in analyses/features_entry.cpp.
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
      "check_sae_fits", [](const vocablens::Sae& s, const PyModel& m) { vocablens::check_sae_fits(s, m.model); },
      py::arg("sae"), py::arg("model"));
}

}  // namespace vlpy
