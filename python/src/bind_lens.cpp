// Python bindings of the forward-pass analyses not yet declared in the library: tuned_lens_eval, project (as
// `vocablens tuned-lens eval / project`). lens, lens_corpus and lens_batch are declared (analyses/lens_entry.cpp).
#include "analyses.hpp"
#include "vocablens/compare.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/project.hpp"
#include "vocablens/tuned_lens.hpp"
#include "vocablens/unembed.hpp"

namespace vlpy {
namespace {

void check_context(const PyModel& m, const std::vector<int64_t>& ids, const char* arg) {
  const int64_t n_ctx = m.model.config().n_ctx;
  if (static_cast<int64_t>(ids.size()) > n_ctx)
    throw py::value_error(std::string(arg) + " is " + std::to_string(ids.size()) +
                          " tokens, longer than the model's context of " + std::to_string(n_ctx) + " tokens");
}

vocablens::TokenFilter token_filter(Options& o) {
  vocablens::TokenFilter f;
  f.alpha_only = o.flag("alpha_only", false);
  if (o.has("allow")) f.allow = o.indices("allow");
  else o.raw("allow");
  return f;
}

RegisterAnalysis tuned_eval_reg{
    "tuned_lens_eval", "Logit lens and tuned lens side by side on held-out text (bits per byte per layer)",
    [](const PyModel& m, Options& o) {
      vocablens::TunedLensEvalOptions eo;
      eo.window = o.integer_at_least("window", 0, 0);
      eo.max_tokens = o.integer_at_least("max_tokens", 0, 0);
      std::string path = o.str("path", "");
      std::string tuned = o.str("tuned", "");
      py::object progress = o.raw("progress");
      o.finish();
      if (path.empty()) throw py::value_error("tuned_lens_eval(): path is empty: give a held-out text file");
      if (tuned.empty()) throw py::value_error("tuned_lens_eval(): tuned is empty: give a tuned lens directory");
      const auto& tok = m.tokenizer();
      auto lens = std::make_shared<vocablens::TunedLens>(vocablens::load_tuned_lens(tuned));
      Progress bar(progress, 0, "tuned lens eval", "B");
      eo.progress = [&bar](uint64_t done, uint64_t total) {
        bar.set(static_cast<int64_t>(done), static_cast<int64_t>(total));
      };
      py::gil_scoped_release nogil;
      return vocablens::evaluate_tuned_lens(m.model, tok, lens, path, eo).to_result();
    }};

RegisterAnalysis project_reg{
    "project", "Hidden states at a hook point projected to tokens (x W_U, or read through E+ / E^T)",
    [](const PyModel& m, Options& o) {
      vocablens::HiddenProjectionOptions po;
      std::string hook = o.str("hook", "resid_post");
      po.layer = -1;
      if (size_t dot = hook.find('.'); dot != std::string::npos) {
        std::string l = hook.substr(dot + 1);
        if (l.empty() || l.find_first_not_of("0123456789") != std::string::npos)
          o.value_error("hook", "must be resid_pre|resid_mid|resid_post|attn_out|mlp_out[.LAYER] or final_norm (got '" + hook + "')");
        po.layer = std::stoll(l);
        hook = hook.substr(0, dot);
      }
      if (o.has("layer")) po.layer = o.integer("layer", -1);
      else o.raw("layer");
      po.hook = hook;
      po.top_k = o.integer_at_least("top_k", 10, 1);
      po.positions = o.indices("positions");
      po.apply_final_norm = o.flag("final_norm", false);
      po.read = o.flag("read", false);
      po.inverse = vocablens::parse_inverse_kind(o.choice("inverse", "pinv", {"pinv", "transpose", "embed"}));
      po.pinv.rtol = o.real("pinv_rtol", 1e-6);
      po.filter = token_filter(o);
      py::object prompt = o.raw("prompt");
      std::optional<bool> bos = opt_flag(o, "bos");
      o.finish();
      if (hook == "final_norm" && po.layer >= 0) throw py::value_error("project(): hook final_norm takes no layer");
      if (prompt.is_none()) throw py::type_error("project(): missing the prompt (text or token ids)");
      std::vector<int64_t> ids = ids_from(m, prompt, "prompt", bos);
      check_context(m, ids, "prompt");
      std::string text = py::isinstance<py::str>(prompt) ? prompt.cast<std::string>() : "";
      py::gil_scoped_release nogil;
      auto p = vocablens::project_hidden(m.model, ids, po, m.tok.get());
      auto r = p.to_result(m.tok.get());
      if (!text.empty()) r.settings["prompt"] = text;
      return r;
    }};

}  // namespace

}  // namespace vlpy
