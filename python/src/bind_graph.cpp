// What vocablens.Graph (python/vocablens/_graph.py) needs of the library beyond the declared `graph` analysis:
// the transcoders exactly as the graph read them (load_graph_transcoders: the plain layer_{i} folders too),
// for interventions on a feature (its encoder, decoder rows and skip connection), and the vocabulary label of
// any feature as graph_result writes it, so that a pruning made in Python labels its nodes (and writes
// Neuronpedia's JSON) as the CLI does.
#include "analyses.hpp"
#include "common.hpp"
#include "vocablens/error.hpp"
#include "vocablens/graph.hpp"

namespace vlpy {

namespace {

/// The set with the model it was checked against (its labels read the model's unembedding).
struct PyGraphTranscoders {
  std::shared_ptr<PyModel> model;
  std::unique_ptr<vocablens::GraphTranscoders> tcs;
  void check_layer(int64_t l, const char* what) const {
    if (l < 0 || l >= tcs->n_layers())
      throw vocablens::UsageError(std::string(what) + ": layer " + std::to_string(l) + " is not in 0.." +
                                  std::to_string(tcs->n_layers() - 1));
  }
};

}  // namespace

void register_graph(py::module_& mod) {
  using T = PyGraphTranscoders;
  py::class_<T, std::shared_ptr<T>>(mod, "GraphTranscoders",
                                    "A transcoder set as the attribution graph reads it (vocablens/graph.hpp)")
      .def_property_readonly("n_layers", [](const T& t) { return t.tcs->n_layers(); })
      .def("n_features",
           [](const T& t, int64_t l) {
             t.check_layer(l, "n_features");
             return t.tcs->n_features(l);
           })
      .def_property_readonly("input",
                             [](const T& t) {
                               switch (t.tcs->input()) {
                                 case vocablens::GraphInput::Ln2Normalized: return std::string("ln2.hook_normalized");
                                 case vocablens::GraphInput::ResidMid: return std::string("hook_resid_mid");
                                 default: return std::string("mlp.hook_in");
                               }
                             })
      .def(
          "encode",
          [](const T& t, int64_t l, const at::Tensor& x) {
            t.check_layer(l, "encode");
            return t.tcs->encode(l, x);
          },
          py::arg("layer"), py::arg("x"), "activations [T, n_features(layer)] of x [T, d_model] read at `input`",
          py::call_guard<py::gil_scoped_release>())
      .def("writes", [](const T& t, int64_t src, int64_t out) { return t.tcs->writes(src, out); })
      .def(
          "decoder_rows",
          [](const T& t, int64_t src, int64_t out, const at::Tensor& f) {
            t.check_layer(src, "decoder_rows");
            t.check_layer(out, "decoder_rows");
            return t.tcs->decoder_rows(src, out, f);
          },
          py::arg("src"), py::arg("out"), py::arg("features"),
          "[n, d_model]: what a unit activation of each feature read at src adds to the MLP output of block out",
          py::call_guard<py::gil_scoped_release>())
      .def(
          "skip",
          [](const T& t, int64_t l) -> py::object {
            t.check_layer(l, "skip");
            at::Tensor s = t.tcs->skip(l);
            return s.defined() ? py::cast(s) : py::none();
          },
          py::arg("layer"), "[d_model, d_model] in x @ W orientation, or None")
      .def_property_readonly("source", [](const T& t) { return t.tcs->source(); })
      .def(
          "feature_labels",
          [](const T& t, const std::vector<int64_t>& layers, const std::vector<int64_t>& features, int64_t label_tokens) {
            if (layers.size() != features.size())
              throw vocablens::UsageError("feature_labels(): layers and features differ in length");
            std::vector<std::pair<int64_t, int64_t>> lf;
            for (size_t i = 0; i < layers.size(); ++i) lf.emplace_back(layers[i], features[i]);
            py::gil_scoped_release nogil;
            return vocablens::graph_feature_labels(t.model->model, t.model->tok.get(), *t.tcs, lf, label_tokens);
          },
          py::arg("layers"), py::arg("features"), py::arg("label_tokens"),
          "Each (layer, feature)'s label as the graph result writes it (its top tokens through W_U)");
  mod.def(
      "load_graph_transcoders",
      [](const std::shared_ptr<PyModel>& model, const std::string& dir) {
        if (!model) throw py::type_error("load_graph_transcoders(): model must be a vocablens.Model");
        auto t = std::make_shared<T>();
        t->model = model;
        py::gil_scoped_release nogil;
        t->tcs = vocablens::load_graph_transcoders(dir, model->model);
        return t;
      },
      py::arg("model"), py::arg("transcoders"));
}

}  // namespace vlpy
