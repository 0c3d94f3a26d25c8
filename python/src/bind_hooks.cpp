// Python hooks into the C++ forward pass (docs/python.md, "Hooks"): the runner behind Model.forward,
// run_with_hooks, run_with_cache and gradients (python/vocablens/_hooks.py builds on these three functions).
//
// A Python hook is a C++ HookFn (vocablens/hooks.hpp) that takes the GIL only around the call: the forward
// itself runs with the GIL released. The HookFn hands the activation to Python as a torch.Tensor sharing its
// storage (THPVariable_Wrap, no copy), so an in-place edit is seen by the rest of the pass; a returned tensor
// replaces the activation (the Python wrapper has already checked its shape and dtype). A Python exception
// inside a hook is parked, the pass is unwound with a private C++ exception, and the exception is raised
// again as itself once the GIL is back: nothing of the model changes, so it stays usable.
//
// The cache: the points vocablens::CacheSpec records (resid_pre/mid/post, attn_out, mlp_out, pattern,
// final_norm, the norms' scale and normalized, mlp_in, final_scale) come back as the runner's own tensors (no
// copy); the others (embed, pos_embed, q/k/v, attn_scores, z, result, mlp pre/post) are kept by a C++ hook that
// stores the point's tensor (the hook table's one copy of it: hooks.hpp copies a hooked point before its
// callbacks), without Python.
#include <ATen/core/grad_mode.h>

#include <map>
#include <optional>

#include "common.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/model.hpp"

namespace vlpy {
namespace {

// Thrown through the C++ forward when a Python hook raised; the Python exception waits in HookRun::error.
struct PythonHookFailed {};

bool spec_point(vocablens::HookPoint p, vocablens::CacheSpec& spec, const char** key) {
  using vocablens::HookPoint;
  switch (p) {
    case HookPoint::ResidPre:
      spec.resid_pre = true;
      *key = "resid_pre";
      return true;
    case HookPoint::AttnOut:
      spec.attn_out = true;
      *key = "attn_out";
      return true;
    case HookPoint::ResidMid:
      spec.resid_mid = true;
      *key = "resid_mid";
      return true;
    case HookPoint::MlpOut:
      spec.mlp_out = true;
      *key = "mlp_out";
      return true;
    case HookPoint::ResidPost:
      spec.resid_post = true;
      *key = "resid_post";
      return true;
    case HookPoint::Pattern:
      spec.pattern = true;
      *key = "pattern";
      return true;
    case HookPoint::FinalNorm:
      spec.final_norm = true;
      *key = "final_norm";
      return true;
    case HookPoint::Ln1Scale:
      spec.ln1_scale = true;
      *key = "ln1_scale";
      return true;
    case HookPoint::Ln1Normalized:
      spec.ln1_normalized = true;
      *key = "ln1_normalized";
      return true;
    case HookPoint::Ln2Scale:
      spec.ln2_scale = true;
      *key = "ln2_scale";
      return true;
    case HookPoint::Ln2Normalized:
      spec.ln2_normalized = true;
      *key = "ln2_normalized";
      return true;
    case HookPoint::MlpIn:
      spec.mlp_in = true;
      *key = "mlp_in";
      return true;
    case HookPoint::FinalScale:
      spec.final_scale = true;
      *key = "final_scale";
      return true;
    default: return false;
  }
}

vocablens::HookSite site_of(const PyModel& m, const std::string& name, const std::string& arg) {
  try {
    return vocablens::parse_hook_name(name, m.model.config());
  } catch (const vocablens::UsageError& e) { throw py::value_error(arg + ": " + e.what()); }
}

// One forward pass with Python hooks and a cache.
//   ids: int64 [B, T] (checked by Model._batch_ids); hooks: [(hook name, callable(tensor) -> tensor | None)],
//   run in list order; record: hook names to return; grad: run with autograd on (weights stay frozen: they
//   never require grad, so only activations a hook marked requires_grad build a graph).
// Returns (logits or None, {TransformerLens name: tensor}).
py::tuple run_hooked(const PyModel& m, const at::Tensor& ids, const py::list& hooks, const py::list& record, bool compute_logits,
                     bool grad) {
  const auto& cfg = m.model.config();
  // The parked exception of a failing hook; read and dropped only with the GIL held.
  std::optional<py::error_already_set> error;
  vocablens::HookList list;
  std::vector<py::object> callables;  // kept alive here; destroyed after the pass, GIL held
  for (auto item : hooks) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(item);
    std::string name = t[0].cast<std::string>();
    py::object fn = t[1];
    site_of(m, name, "fwd_hooks");
    callables.push_back(fn);
    PyObject* f = fn.ptr();
    list.add(name, [f, &error](at::Tensor& act) {
      py::gil_scoped_acquire gil;
      try {
        py::object r = py::reinterpret_borrow<py::object>(f)(act);
        if (!r.is_none()) act = THPVariable_Unpack(r.ptr());
      } catch (py::error_already_set& e) {
        error.emplace(std::move(e));
        throw PythonHookFailed{};
      }
    });
  }
  vocablens::CacheSpec spec;
  std::vector<std::pair<std::string, std::string>> from_spec;  // (TL name, ResidualCache key)
  auto kept = std::make_shared<std::map<std::string, at::Tensor>>();
  for (auto item : record) {
    std::string name = item.cast<std::string>();
    vocablens::HookSite s = site_of(m, name, "names");
    const char* key = nullptr;
    if (spec_point(s.point, spec, &key)) {
      from_spec.push_back({s.tl_name(), s.layer < 0 ? std::string(key) : vocablens::ResidualCache::key(key, s.layer)});
    } else {
      std::string tl = s.tl_name();
      list.add(tl, [kept, tl](at::Tensor& act) { (*kept)[tl] = act; });  // after every user hook: the final value
    }
  }
  vocablens::ForwardOutput out;
  bool failed = false;
  {
    py::gil_scoped_release nogil;
    try {
      at::AutoGradMode mode(grad);
      out = vocablens::run_forward(cfg, m.model.weights(), ids, spec, compute_logits, at::Tensor(), &list);
    } catch (const PythonHookFailed&) { failed = true; }
  }
  if (failed) {
    py::error_already_set e = std::move(*error);
    error.reset();
    throw e;
  }
  py::dict cache;
  for (const auto& [tl, key] : from_spec) cache[py::str(tl)] = out.cache.get(key);
  for (const auto& [tl, t] : *kept) cache[py::str(tl)] = t;
  py::object logits = out.logits.defined() ? py::cast(out.logits) : py::none();
  return py::make_tuple(logits, cache);
}

// Every hook point of this model by its TransformerLens name, in forward order (vocablens::hook_sites: pos_embed
// only for learned positions, the ln1 / ln2 points only in pre-norm blocks, ln_final.hook_scale only with a final
// norm, the router's only in mixtures of experts).
std::vector<std::string> hook_names(const PyModel& m) {
  std::vector<std::string> out;
  for (const auto& s : vocablens::hook_sites(m.model.config())) out.push_back(s.tl_name());
  return out;
}

}  // namespace

void register_hooks(py::module_& mod) {
  mod.def("_run_hooked", &run_hooked, py::arg("model"), py::arg("ids"), py::arg("hooks"), py::arg("record"),
          py::arg("compute_logits") = true, py::arg("grad") = false);
  mod.def("_hook_names", &hook_names, py::arg("model"));
  mod.def(
      "_hook_site",
      [](const PyModel& m, const std::string& name, const std::string& arg) {
        vocablens::HookSite s = site_of(m, name, arg);
        return py::make_tuple(s.tl_name(), s.short_name(), s.layer);
      },
      py::arg("model"), py::arg("name"), py::arg("arg") = "name");
}

}  // namespace vlpy
