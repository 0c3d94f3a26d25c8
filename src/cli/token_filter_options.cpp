// The token flags shared by the projection commands (see token_filter_options.hpp).
#include "cli/token_filter_options.hpp"

#include "vocablens/error.hpp"

namespace vocablens::cli {

void add_token_filter_options(CLI::App& sub, TokenFilterFlags& f) {
  sub.add_flag("--alpha-only", f.alpha_only, "Only tokens made of ASCII letters (after one optional space)");
  sub.add_option("--allow-list", f.allow_list, "Only these token ids (file: whitespace-separated ids, # comments)");
  sub.add_option("--tokenizer", f.tokenizer, "Tokenizer file or directory (default: found beside the model)");
}

TokenFilter token_filter(const TokenFilterFlags& f) {
  TokenFilter filter;
  filter.alpha_only = f.alpha_only;
  if (!f.allow_list.empty()) filter.allow = read_token_id_list(f.allow_list);
  return filter;
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_path, const TokenFilterFlags& f, bool required) {
  try {
    return load_tokenizer_for(model_path, f.tokenizer);
  } catch (const FormatError&) {
    if (required || !f.tokenizer.empty() || f.alpha_only) throw;
  }
  return nullptr;
}

}  // namespace vocablens::cli
