// Python bindings of the interventions: patch, ablate, attribute, steer (as `vocablens patch`,
// `ablate`, `attribute`, `generate --steer`).
#include "analyses.hpp"
#include "vocablens/ablation.hpp"
#include "vocablens/attribution.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/patching.hpp"
#include "vocablens/tokenizer.hpp"

namespace vlpy {
namespace {

std::string text_of(const py::object& prompt) { return py::isinstance<py::str>(prompt) ? prompt.cast<std::string>() : ""; }

RegisterAnalysis patch_reg{
    "patch", "Activation patching: clean activations patched into a corrupted run, restored logit difference per layer x position (or head)",
    [](const PyModel& m, Options& o) {
      vocablens::PatchOptions po;
      po.over = vocablens::parse_patch_over(o.choice("over", "resid", {"resid", "attn", "mlp", "heads"}));
      py::object clean = o.raw("clean"), corrupt = o.raw("corrupt"), target = o.raw("target"), wrong = o.raw("wrong");
      po.position = o.integer("position", -1);
      std::optional<bool> bos = opt_flag(o, "bos");
      o.finish();
      if (clean.is_none() || corrupt.is_none()) throw py::type_error("patch(): give clean= and corrupt= (text or token ids)");
      if (target.is_none()) throw py::type_error("patch(): missing target= (the token the clean run should predict)");
      auto c = ids_from(m, clean, "clean", bos), k = ids_from(m, corrupt, "corrupt", bos);
      po.target = token_from(m, target, "target");
      if (!wrong.is_none()) po.wrong = token_from(m, wrong, "wrong");
      py::gil_scoped_release nogil;
      return vocablens::activation_patching(m.model, c, k, po).to_result(m.tok.get(), text_of(clean), text_of(corrupt));
    }};

RegisterAnalysis ablate_reg{
    "ablate", "Zero- or mean-ablate heads, neurons, residual positions or any hook; predictions before and after",
    [](const PyModel& m, Options& o) {
      vocablens::AblationOptions ao;
      for (const char* kind : {"head", "neuron", "resid", "hook"})
        for (const auto& s : o.strings(kind)) ao.sites.push_back(vocablens::parse_ablation_site(kind, s));
      ao.mode = o.choice("mode", "zero", {"zero", "mean"}) == "mean" ? vocablens::AblationMode::Mean : vocablens::AblationMode::Zero;
      ao.position = o.integer("position", -1);
      ao.top_k = o.integer_at_least("top_k", 10, 1);
      py::object prompt = o.raw("prompt"), target = o.raw("target");
      std::optional<bool> bos = opt_flag(o, "bos");
      o.finish();
      if (prompt.is_none()) throw py::type_error("ablate(): missing the prompt (text or token ids)");
      if (ao.sites.empty()) throw py::value_error("ablate(): nothing to ablate: give head=, neuron=, resid= or hook= (e.g. head=\"1.3\")");
      auto ids = ids_from(m, prompt, "prompt", bos);
      if (!target.is_none()) ao.target = token_from(m, target, "target");
      py::gil_scoped_release nogil;
      return vocablens::ablate(m.model, ids, ao).to_result(m.tok.get(), text_of(prompt));
    }};

RegisterAnalysis steer_reg{
    "steer", "Greedy generation with scale * (W_E[plus] - W_E[minus]) added to blocks.L.hook_resid_pre (and without, to compare)",
    [](const PyModel& m, Options& o) {
      py::object prompt = o.raw("prompt"), plus = o.raw("plus"), minus = o.raw("minus");
      const int64_t layer = o.integer("layer", m.model.config().n_layers / 2);
      const double scale = o.real("scale", 4.0);
      const int64_t steps = o.integer_at_least("steps", 20, 0);
      std::optional<bool> bos = opt_flag(o, "bos");
      o.finish();
      if (prompt.is_none() || plus.is_none() || minus.is_none())
        throw py::type_error("steer(): give prompt=, plus= and minus= (tokens: str or id)");
      auto ids = ids_from(m, prompt, "prompt", bos);
      const int64_t p = token_from(m, plus, "plus"), n = token_from(m, minus, "minus");
      if (layer < 0 || layer >= m.model.config().n_layers)
        throw py::value_error("steer(): layer " + std::to_string(layer) + " is out of range (0.." +
                              std::to_string(m.model.config().n_layers - 1) + ")");
      std::vector<int64_t> steered, plain;
      {
        py::gil_scoped_release nogil;
        at::Tensor v = vocablens::embedding_difference(m.model, p, n);
        steered = vocablens::generate_greedy_with_hooks(m.model, ids, steps, -1, vocablens::steering_hooks(v, layer, scale));
        plain = m.model.generate_greedy(ids, steps, -1);
      }
      vocablens::Result r;
      r.kind = "steering";
      r.settings = {{"plus", p}, {"minus", n}, {"layer", layer}, {"scale", scale}, {"steps", steps},
                    {"hook", "blocks." + std::to_string(layer) + ".hook_resid_pre"}};
      if (!text_of(prompt).empty()) r.settings["prompt"] = text_of(prompt);
      r.summary = {{"steered_ids", steered}, {"plain_ids", plain}};
      if (m.tok) {
        r.summary["steered_text"] = m.tok->decode(steered);
        r.summary["plain_text"] = m.tok->decode(plain);
      }
      return r;
    }};

}  // namespace
}  // namespace vlpy
