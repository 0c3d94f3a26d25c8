// vocablens/analysis_inputs.hpp — the inputs of a declared analysis that are not JSON values: a second model, an
// SAE, a matrix as a tensor (the option types Model, Sae and Matrix of vocablens/options.hpp).
//
// On the command line such an option is a path, and the analysis opens it. A surface that already holds the
// object (Python's vocablens.Model, vocablens.Sae, a torch.Tensor) hands it over here, keyed by the option's
// name; the option's JSON value then only labels it (the SAE's source, "tensor") for the Result's settings.
//
//   vocablens::AnalysisInputs in;
//   in.saes["sae"] = sae;                                  // std::shared_ptr<const vocablens::Sae>
//   auto r = vocablens::run_analysis(a, model, tok, {{"sae", sae->source}}, Surface::Python, {}, nullptr, &in);
//
// Guarantees: the objects are only read, during the call; the analysis checks them against the model as it
// checks a path's contents (vocablens::check_sae_fits, the matrix's shape).
#pragma once
#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>

namespace vocablens {

class Model;
class Tokenizer;
struct Sae;

struct AnalysisInputs {
  struct ModelInput {
    const Model* model = nullptr;
    const Tokenizer* tok = nullptr;  ///< may be null (no tokenizer beside the model)
  };
  std::map<std::string, ModelInput> models;                ///< OptionType::Model
  std::map<std::string, std::shared_ptr<const Sae>> saes;  ///< OptionType::Sae
  std::map<std::string, at::Tensor> tensors;               ///< OptionType::Matrix given as a 2-D floating tensor
};

}  // namespace vocablens
