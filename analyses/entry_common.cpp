// Shared pieces of the analyses' option declarations (see entry_common.hpp).
#include "entry_common.hpp"
#include "vocablens/experts.hpp"

#include <cctype>

#include <fmt/format.h>

#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_inputs.hpp"
#include "vocablens/analysis_registry.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/hooks.hpp"
#include "vocablens/memory_estimate.hpp"
#include "vocablens/timings.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/sae.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/token_id.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entry {

std::vector<OptionDecl> token_filter_decls() {
  return {
      {"alpha_only", OptionType::Flag, false, "Only tokens made of ASCII letters (after one optional space)"},
      OptionDecl{"allow", OptionType::Indices, nullptr,
                 "Only these token ids (CLI: a file of whitespace-separated ids, # comments)", 0}
          .spelled("--allow-list")
          .file_on_cli(),
  };
}

TokenFilter token_filter_of(const nlohmann::json& o) {
  TokenFilter f;
  f.alpha_only = o.at("alpha_only").get<bool>();
  if (!o.at("allow").is_null()) f.allow = o.at("allow").get<std::vector<int64_t>>();
  return f;
}

std::vector<OptionDecl> inverse_decls(const std::string& what) {
  return {
      OptionDecl{"inverse", OptionType::Choice, "pinv", what + " read through: pinv (exact E+), transpose (E^T), embed (W_E)"}
          .with_choices({"pinv", "transpose", "embed"}),
      {"pinv_rtol", OptionType::Real, 1e-6, "Singular values below rtol*max are dropped from E+", 0.0, 1.0},
  };
}

InverseKind inverse_of(const nlohmann::json& o) { return parse_inverse_kind(o.at("inverse").get<std::string>()); }

namespace {
std::string analysis_of(const AnalysisRequest& q) { return q.decl ? q.decl->name : std::string("analysis"); }
}  // namespace

int64_t layer_of(const AnalysisRequest& q, const char* name) {
  const int64_t L = q.model.config().n_layers;
  int64_t l = q.options.at(name).get<int64_t>();
  if (l < -L || l >= L)
    throw UsageError(analysis_of(q) + ": " + q.spelled(name) + " " + std::to_string(l) + " is out of range (the model has " +
                     std::to_string(L) + " layers)");
  return l < 0 ? l + L : l;
}

std::vector<int64_t> indices_below(const AnalysisRequest& q, const char* name, int64_t count, const std::string& what) {
  const auto& v = q.options.at(name);
  if (v.is_null()) return {};
  auto out = v.get<std::vector<int64_t>>();
  for (int64_t i : out)
    if (i >= count)
      throw UsageError(analysis_of(q) + ": " + q.spelled(name) + ": " + what + " " + std::to_string(i) + " is out of range (0.." +
                       std::to_string(count - 1) + ")");
  return out;
}

std::vector<OptionDecl> prompt_decls() {
  return {
      OptionDecl{"prompt", OptionType::Prompt, nullptr, "Text to run (tokenised with the model's tokenizer), or token ids"}
          .as_required(),
      {"bos", OptionType::Flag, nullptr, "Prepend the BOS token (default: the tokenizer's convention; llama2.c adds it)"},
  };
}

std::vector<int64_t> prompt_of(const AnalysisRequest& q) { return prompt_ids_of(q, q.options.at("prompt"), "prompt"); }

std::vector<int64_t> prompt_ids_of(const AnalysisRequest& q, const nlohmann::json& p, const std::string& name) {
  const auto& o = q.options;
  const Tokenizer* tok = q.tok;
  const Model& m = q.model;
  const std::string analysis = analysis_of(q), option = q.spelled(name);
  const int64_t V = m.config().vocab_size, n_ctx = m.config().n_ctx;
  std::vector<int64_t> ids;
  if (p.is_string()) {
    if (!tok) throw UsageError(analysis + ": " + option + ": the model has no tokenizer; give token ids instead");
    timings::Phase phase("tokenise");  // `--timings`: on every surface, whoever calls
    EncodeOptions eo;
    if (o.contains("bos") && o.at("bos").is_boolean()) eo.add_bos = o.at("bos").get<bool>();
    ids = tok->encode(p.get<std::string>(), eo);
    if (ids.empty()) throw UsageError(analysis + ": " + option + ": empty prompt: it encodes to no tokens");
  } else {
    ids = p.get<std::vector<int64_t>>();
    for (int64_t id : ids)
      if (id < 0 || id >= V)
        throw UsageError(analysis + ": " + option + ": token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                         std::to_string(V - 1) + ")");
  }
  if (static_cast<int64_t>(ids.size()) > n_ctx)
    throw UsageError(analysis + ": " + option + ": the prompt is " + std::to_string(ids.size()) +
                     " tokens, longer than the model's context of " + std::to_string(n_ctx) + " tokens");
  return ids;
}

std::shared_ptr<const Sae> sae_of(const AnalysisRequest& q, const char* name, const char* hook_option) {
  const auto& hook = q.options.at(hook_option);
  std::shared_ptr<const Sae> sae;
  if (q.inputs && q.inputs->saes.count(name)) {
    sae = q.inputs->saes.at(name);
    if (!hook.is_null()) {  // a copy naming another hook point (the weights are shared, not copied)
      auto s = std::make_shared<Sae>(*sae);
      s->hook_name = hook.get<std::string>();
      sae = s;
    }
  } else {
    SaeLoadOptions lo;
    if (!hook.is_null()) lo.hook_name = hook.get<std::string>();
    sae = std::make_shared<const Sae>(load_sae(q.options.at(name).get<std::string>(), lo));
  }
  check_sae_fits(*sae, q.model);
  return sae;
}

at::Tensor matrix_of(const AnalysisRequest& q, const char* name, std::string& label, std::string& row_kind) {
  if (q.inputs && q.inputs->tensors.count(name)) {
    at::Tensor M = q.inputs->tensors.at(name);
    if (M.dim() != 2)
      throw UsageError(analysis_of(q) + ": " + q.spelled(name) + " must be 2-D, got " + std::to_string(M.dim()) + "-D");
    if (!at::isFloatingType(M.scalar_type()))
      throw OptionTypeError(analysis_of(q) + ": " + q.spelled(name) + " must be a floating-point tensor");
    label = "tensor";
    row_kind = "row";
    return M;
  }
  label = q.options.at(name).get<std::string>();
  if (q.surface == Surface::Http && label.find_first_of("/.") != std::string::npos && label.rfind("W_in.", 0) != 0 &&
      label.rfind("W_out.", 0) != 0 && label.rfind("W_gate.", 0) != 0)
    throw UsageError(analysis_of(q) + ": " + q.spelled(name) + ": '" + label +
                     "' names a file on the server, which the HTTP API does not open (give a matrix name: W_E, W_U, "
                     "W_pos, W_in.L, W_gate.L, W_out.L)");
  row_kind = "row";
  return model_matrix(q.model, label, &row_kind);
}

SecondModel model_of(const AnalysisRequest& q, const char* name, const std::string& tokenizer) {
  SecondModel out;
  if (q.inputs && q.inputs->models.count(name)) {
    out.model = q.inputs->models.at(name).model;
    out.tok = q.inputs->models.at(name).tok;
    return out;
  }
  const std::string path = q.options.at(name).get<std::string>();
  out.owned_model = std::make_shared<Model>(load_model(path));
  out.model = out.owned_model.get();
  out.owned_tok = std::shared_ptr<Tokenizer>(load_tokenizer_for(path, tokenizer).release());
  out.tok = out.owned_tok.get();
  return out;
}

std::string prompt_text(const AnalysisRequest& q, const std::vector<int64_t>& ids) {
  const auto& p = q.options.at("prompt");
  if (p.is_string()) return p.get<std::string>();
  return q.tok ? q.tok->decode(ids) : "";
}

bool prompt_is_ids(const nlohmann::json& o) { return o.at("prompt").is_array(); }

int64_t token_of(const AnalysisRequest& q, const nlohmann::json& v, const std::string& name) {
  const Tokenizer* tok = q.tok;
  const Model& m = q.model;
  const std::string analysis = analysis_of(q), option = q.spelled(name);
  const int64_t V = m.config().vocab_size;
  auto checked = [&](int64_t id) {
    if (id < 0 || id >= V)
      throw UsageError(analysis + ": " + option + ": token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                       std::to_string(V - 1) + ")");
    return id;
  };
  if (v.is_number_integer()) return checked(v.get<int64_t>());
  const std::string s = v.get<std::string>();
  if (s.size() > 1 && s[0] == '#') {
    bool digits = s.size() < 12;
    for (size_t i = 1; i < s.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(s[i]));
    if (digits) return checked(std::stoll(s.substr(1)));
  }
  if (!tok) throw UsageError(analysis + ": " + option + ": the model has no tokenizer; give a token id");
  std::vector<int64_t> ids;
  if (auto id = single_token_id(*tok, s, &ids)) return *id;
  throw UsageError(analysis + ": " + option + " '" + s + "' is " + std::to_string(ids.size()) +
                   " tokens: " + display_ids(*tok, ids) + " (it must be a single token; #ID names one by id)");
}

void append(std::vector<OptionDecl>& into, const std::vector<OptionDecl>& more) {
  into.insert(into.end(), more.begin(), more.end());
}

AnalysisEstimate weights_phase_estimate(const AnalysisRequest& q, const std::string& phase, double bytes, std::string what,
                                        std::string reduce) {
  AnalysisEstimate e;
  e.memory = model_memory(q.model);
  e.memory.add_phase(phase, bytes);
  e.what = std::move(what);
  e.reduce = std::move(reduce);
  return e;
}

double space_vectors_bytes(const AnalysisRequest& q) {
  if (vector_space_from_string(q.options.at("space").get<std::string>()) != VectorSpace::PseudoInverse) return 0;
  const auto& cf = q.model.config();
  return 3.0 * static_cast<double>(cf.d_model) * static_cast<double>(cf.vocab_size) * 4;
}

AnalysisEstimate one_forward_estimate(const AnalysisRequest& q, int64_t T, const CacheSpec& spec, bool logits,
                                      const std::string& extra, double extra_bytes, bool extra_is_phase, std::string what,
                                      std::string reduce) {
  AnalysisEstimate e;
  e.memory = estimate_forward_memory(q.model, 1, T, spec, logits);
  if (extra_is_phase) e.memory.add_phase(extra, extra_bytes);
  else e.memory.add(extra, extra_bytes);
  e.what = std::move(what);
  e.reduce = std::move(reduce);
  return e;
}

std::vector<OptionDecl> expert_ablation_decls() {
  return {
      OptionDecl{"ablate_expert", OptionType::Texts, nullptr,
                 "Ablate expert LAYER.EXPERT, e.g. 0.5 (mixtures of experts); repeatable"}
          .editing_forward(),
      OptionDecl{"ablate_mode", OptionType::Choice, "zero",
                 "zero: its router weight set to 0 where chosen, the others' weights kept (not renormalised); "
                 "reroute: its router logit set to -inf, so each token goes to its next-best expert"}
          .with_choices({"zero", "reroute"}),
      OptionDecl{"scale_expert", OptionType::Texts, nullptr,
                 "Scale expert LAYER.EXPERT's output by FACTOR where chosen, e.g. 0.5=2 (its router weight times FACTOR; 0 "
                 "is the zero ablation); repeatable"}
          .editing_forward(),
  };
}

void expert_ablations_of(const AnalysisRequest& q, std::vector<ExpertAblation>& out, ExpertAblationMode& mode) {
  const auto& o = q.options;
  mode = parse_expert_ablation_mode(o.at("ablate_mode").get<std::string>());
  if (o.at("ablate_expert").is_null()) return;
  out = parse_expert_ablations(o.at("ablate_expert").get<std::vector<std::string>>(), q.model.config(), q.model.source());
}

std::vector<ExpertScale> expert_scales_of(const AnalysisRequest& q) {
  const auto& o = q.options;
  if (o.at("scale_expert").is_null()) return {};
  return parse_expert_scales(o.at("scale_expert").get<std::vector<std::string>>(), q.model.config(), q.model.source());
}

ExpertInterventions expert_interventions_of(const AnalysisRequest& q) {
  ExpertInterventions out;
  std::vector<ExpertAblation> ablate;
  ExpertAblationMode mode = ExpertAblationMode::Zero;
  expert_ablations_of(q, ablate, mode);
  const auto scales = expert_scales_of(q);
  if (ablate.empty() && scales.empty()) return out;
  out.hooks = std::make_shared<HookList>();
  add_expert_ablations(*out.hooks, q.model.config(), ablate, mode);
  add_expert_scales(*out.hooks, scales);
  if (!ablate.empty()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : ablate) a.push_back(std::to_string(x.layer) + "." + std::to_string(x.expert));
    out.settings["ablate_expert"] = a;
    out.settings["ablate_mode"] = to_string(mode);
  }
  if (!scales.empty()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : scales) a.push_back(fmt::format("{}.{}={}", x.layer, x.expert, x.factor));
    out.settings["scale_expert"] = a;
  }
  return out;
}

}  // namespace vocablens::entry

namespace vocablens::entries {

std::vector<int64_t> prompt_ids(const AnalysisRequest& q) { return entry::prompt_of(q); }
std::string prompt_text(const AnalysisRequest& q, const std::vector<int64_t>& ids) { return entry::prompt_text(q, ids); }

}  // namespace vocablens::entries
