// Python binding of the forward-pass analysis not yet declared in the library: project (`vocablens project`).
// lens, lens_corpus, lens_batch and tuned_lens_eval are declared (analyses/lens_entry.cpp, tuned_lens_entry.cpp).
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
