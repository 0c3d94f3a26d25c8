// `spectrum`: its options declared once, and the call every surface makes (vocablens/analysis_registry.hpp).
// The matrix is an option of type Matrix: a name the model resolves or a .npy path on the command line, also a
// 2-D tensor from Python. `vocablens spectrum` takes its flags from here (src/cli/cmd_spectrum.cpp).
#include <algorithm>

#include "entry_common.hpp"
#include "vocablens/analysis_estimate.hpp"
#include "vocablens/analysis_registry.hpp"
#include "vocablens/anisotropy.hpp"
#include "declared_options.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens::entries {

SpectrumOptions spectrum_options(const nlohmann::json& o) {
  SpectrumOptions so;
  so.k = o.at("k").get<int64_t>();
  so.method = spectrum_method_from_string(o.at("method").get<std::string>());
  so.ncv = o.at("ncv").get<int64_t>();
  so.loadings = o.at("loadings").get<int64_t>();
  so.keep_left_vectors = o.at("left_vectors").get<bool>();
  return so;
}

AnisotropyOptions anisotropy_options(const nlohmann::json& o) {
  AnisotropyOptions ao;
  ao.remove_top = o.at("remove_top").get<std::vector<int64_t>>();
  return ao;
}

Result spectrum_result(const SpectrumResult& s, const AnisotropyResult* a, const Tokenizer* tok, const nlohmann::json& o) {
  Result r = s.to_result(tok);
  if (a) {
    Result ar = a->to_result();
    r.summary["anisotropy"] = ar.summary;
    for (auto& t : ar.tables) {
      t.name = "anisotropy";
      r.tables.push_back(std::move(t));
    }
  }
  r.settings["method"] = o.at("method").get<std::string>();
  return r;
}

Result spectrum_of_matrix(const at::Tensor& M, const std::string& label, const std::string& row_kind, const Tokenizer* tok,
                          const nlohmann::json& o) {
  const auto s = matrix_spectrum(M, spectrum_options(o), label, row_kind);
  std::unique_ptr<AnisotropyResult> a;
  if (o.at("anisotropy").get<bool>()) a = std::make_unique<AnisotropyResult>(anisotropy(M, anisotropy_options(o), label));
  return spectrum_result(s, a.get(), tok, o);
}

void register_spectrum_entry(AnalysisRegistry& r) {
  AnalysisDecl d;
  d.name = d.command = "spectrum";
  d.summary = "Singular spectrum, PCA, effective rank, norms, loadings and anisotropy of W_E (or W_U, W_pos, ...)";
  d.options = {
      {"matrix", OptionType::Matrix, "W_E",
       "W_E, W_U, W_pos, W_in.L, W_gate.L, W_out.L, or a 2-D .npy file (Python: also a 2-D torch.Tensor)"},
      {"k", OptionType::Integer, 32, "Top singular values / directions", 1, 1e6},
      OptionDecl{"method", OptionType::Choice, "auto",
                 "auto (gram), gram (Spectra on the float64 Gram), lanczos (Spectra, matrix-free x -> M^T(Mx)), dense"}
          .with_choices({"auto", "gram", "lanczos", "dense"}),
      {"ncv", OptionType::Integer, 0, "Spectra's Lanczos basis size (0: min(n, max(2k+1, k+20)))", 0, 1e6},
      {"loadings", OptionType::Integer, 10, "Rows listed per direction and sign", 0, 1e6},
      {"left_vectors", OptionType::Flag, false, "Also export U_k [rows, k]"},
      {"remove_top", OptionType::Indices, nlohmann::json::array({1, 2, 3, 5, 10}),
       "Anisotropy after removing these numbers of top PCs", 0, 1e6},
      {"anisotropy", OptionType::Flag, true, "The anisotropy section"},
  };
  r.add({std::move(d),
         [](const AnalysisRequest& q) {
           std::string label, kind;
           const at::Tensor M = entry::matrix_of(q, "matrix", label, kind);
           return spectrum_of_matrix(M, label, kind, kind == "token" ? q.tok : nullptr, q.options);
         },
         [](const AnalysisRequest& q) {
           const auto& cf = q.model.config();
           const std::string name = q.options.at("matrix").is_string() ? q.options.at("matrix").get<std::string>() : "";
           double rows = 0, cols = static_cast<double>(cf.d_model);
           if (name == "W_E" || name == "W_U") rows = static_cast<double>(cf.vocab_size);
           else if (name == "W_pos") rows = static_cast<double>(cf.n_ctx);
           else if (name.rfind("W_in.", 0) == 0 || name.rfind("W_gate.", 0) == 0 || name.rfind("W_out.", 0) == 0)
             rows = static_cast<double>(cf.d_mlp);
           if (rows == 0) {
             std::string label, kind;
             const at::Tensor M = entry::matrix_of(q, "matrix", label, kind);
             rows = static_cast<double>(M.size(0));
             cols = static_cast<double>(M.size(1));
           }
           const SpectrumOptions so = spectrum_options(q.options);
           const double basis = std::min<double>(
               std::max<double>(static_cast<double>(so.ncv), 2.0 * static_cast<double>(so.k) + 1), std::min(rows, cols));
           return entry::weights_phase_estimate(
               q, "spectrum: the matrix, its centred copy and the Lanczos basis", (2 * rows * cols + (rows + cols) * basis) * 4,
               "the spectrum of " + (name.empty() ? std::string("the matrix") : name) + " of " + q.model.source(),
               q.spelled("k") + " (fewer singular values)");
         }});
}

}  // namespace vocablens::entries
