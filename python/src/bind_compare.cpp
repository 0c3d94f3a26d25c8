// Python bindings of the batch and comparison analyses: lens over many prompts (`lens --prompts`), compare-embeddings
// (two models) and compare (two lens runs, no model: a module function, not a registered analysis).
#include <algorithm>

#include "analyses.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/compare_embeddings.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/lens_batch.hpp"
#include "vocablens/spectrum.hpp"

namespace vlpy {
namespace {

// prompts: a path (str) to a prompts file, or a list of str / {"prompt": ..., "target": ...} dicts.
std::vector<vocablens::LensPrompt> prompts_from(Options& o, py::object v) {
  if (v.is_none()) throw py::type_error(o.function() + "(): missing prompts (a list of str / dicts, or a prompts file path)");
  if (py::isinstance<py::str>(v)) return vocablens::read_lens_prompts(v.cast<std::string>());
  if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v))
    o.type_error("prompts", "a list of str or of {\"prompt\": str, \"target\": str} dicts, or a prompts file path");
  std::vector<vocablens::LensPrompt> out;
  int64_t i = 0;
  for (py::handle h : v) {
    ++i;
    vocablens::LensPrompt p;
    p.line = i;
    if (py::isinstance<py::str>(h)) {
      p.prompt = h.cast<std::string>();
    } else if (py::isinstance<py::dict>(h)) {
      py::dict d = py::reinterpret_borrow<py::dict>(h);
      if (!d.contains("prompt") || !py::isinstance<py::str>(d["prompt"]))
        o.value_error("prompts", "item " + std::to_string(i - 1) + " has no str \"prompt\"");
      p.prompt = d["prompt"].cast<std::string>();
      if (d.contains("target") && !d["target"].is_none()) {
        if (!py::isinstance<py::str>(d["target"])) o.value_error("prompts", "item " + std::to_string(i - 1) + ": \"target\" must be a str");
        p.target = d["target"].cast<std::string>();
      }
    } else {
      o.type_error("prompts", "items that are str or dicts");
    }
    if (p.prompt.empty()) o.value_error("prompts", "item " + std::to_string(i - 1) + " is an empty prompt");
    out.push_back(std::move(p));
  }
  if (out.empty()) o.value_error("prompts", "is empty");
  return out;
}

RegisterAnalysis lens_batch_reg{
    "lens_batch", "Logit lens over many prompts: one result with a prompt axis and a tidy per-layer table (`lens --prompts`)",
    [](const PyModel& m, Options& o) {
      vocablens::LensOptions lo = lens_options(m, o);  // tuned=, top_k=, resid_mid=, unembed=, decoder_blocks=
      std::optional<bool> bos = opt_flag(o, "bos");
      py::object pv = o.raw("prompts");
      auto prompts = prompts_from(o, pv);
      o.finish();
      const auto& tok = m.tokenizer();
      vocablens::EncodeOptions eo;
      if (bos) eo.add_bos = *bos;
      const std::string source = py::isinstance<py::str>(pv) ? pv.cast<std::string>() : std::string();
      py::gil_scoped_release nogil;
      auto b = vocablens::logit_lens_batch(m.model, tok, prompts, lo, eo);
      b.source = source;
      auto r = b.to_result(&tok);
      r.provenance["tokenizer"] = tok.source();
      return r;
    }};

RegisterAnalysis compare_embeddings_reg{
    "compare_embeddings",
    "Two embedding spaces on their shared tokens: Procrustes, linear CKA, k-NN agreement, moved tokens, spectra",
    [](const PyModel& ma, Options& o) {
      py::object mbv = o.raw("model_b");
      if (mbv.is_none() || !py::isinstance<PyModel>(mbv))
        o.type_error("model_b", "a vocablens.Model (the second model, or a later checkpoint)");
      const PyModel& mb = mbv.cast<const PyModel&>();
      std::string matrix = o.choice("matrix", "W_E", {"W_E", "W_U"});
      vocablens::CompareEmbeddingsOptions co;
      co.k = o.integer_at_least("k", 10, 1);
      co.moved = o.integer_at_least("moved", 50, 0);
      co.spectra = o.flag("spectra", true);
      co.spectrum.k = o.integer_at_least("spectrum_k", 32, 1);
      o.finish();
      const auto& ta = ma.tokenizer();
      const auto& tb = mb.tokenizer();
      py::gil_scoped_release nogil;
      std::string kind_a, kind_b;
      at::Tensor Ea = vocablens::model_matrix(ma.model, matrix, &kind_a);
      at::Tensor Eb = vocablens::model_matrix(mb.model, matrix, &kind_b);
      auto pairs = vocablens::shared_tokens(ta, tb);
      pairs.erase(std::remove_if(pairs.begin(), pairs.end(),
                                 [&](const auto& p) { return p.first >= Ea.size(0) || p.second >= Eb.size(0); }),
                  pairs.end());
      auto c = vocablens::compare_embeddings(Ea, Eb, pairs, co);
      c.matrix = matrix;
      c.model_a = ma.model.source();
      c.model_b = mb.model.source();
      auto r = c.to_result(&tb);
      r.provenance["model_a"] = ma.model.source();
      r.provenance["model_b"] = mb.model.source();
      return r;
    }};

// A run given as a Result (logit_lens) or as a run directory path.
vocablens::Result run_from(py::handle v, const char* arg, std::string& name) {
  if (py::isinstance<py::str>(v)) {
    name = v.cast<std::string>();
    py::gil_scoped_release nogil;
    return vocablens::read_lens_run(name);
  }
  if (py::isinstance<vocablens::Result>(v)) {
    const auto& r = v.cast<const vocablens::Result&>();
    return r;
  }
  throw py::type_error(std::string("compare(): ") + arg + " must be a lens Result or a run directory (str), not " +
                       std::string(py::str(v.get_type().attr("__name__"))));
}

}  // namespace

void register_compare(py::module_& mod) {
  mod.def(
      "compare_runs",
      [](py::object a, py::object b, const std::string& align) {
        vocablens::LensCompareOptions o;
        if (align == "end") o.align = vocablens::LensAlign::End;
        else if (align == "start") o.align = vocablens::LensAlign::Start;
        else if (align != "none") throw py::value_error("compare(): align must be \"none\", \"start\" or \"end\" (got '" + align + "')");
        vocablens::Result ra = run_from(a, "a", o.name_a), rb = run_from(b, "b", o.name_b);
        auto r = std::make_shared<vocablens::Result>();
        {
          py::gil_scoped_release nogil;
          *r = vocablens::compare_lens_runs(ra, rb, o).to_result();
        }
        r->provenance = ra.provenance;
        r->provenance["run_a"] = {{"dir", o.name_a == "A" ? "" : o.name_a}, {"provenance", ra.provenance}};
        r->provenance["run_b"] = {{"dir", o.name_b == "B" ? "" : o.name_b}, {"provenance", rb.provenance}};
        r->provenance["command_line"] = "python: vocablens.compare()";
        return r;
      },
      py::arg("a"), py::arg("b"), py::arg("align") = "none");
}

}  // namespace vlpy
