// `vocablens generate MODEL --steps N`: greedy decoding, printed as text (like llama2.c's run.c -t 0).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "vocablens/error.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

struct GenerateOptions {
  std::string model;
  std::string tokenizer;
  std::string prompt;
  std::vector<int64_t> prompt_ids;
  int64_t steps = 64;
  int64_t runc_n = -1;   // -n: run.c's meaning (positions incl. the prompt); -1 = not given
  int64_t stop_id = -2;  // -2: the model's convention; -1: never stop early
  bool print_ids = false;
};

int run_generate(const GenerateOptions& o) {
  vocablens::Model m = vocablens::load_model(o.model);
  vocablens::adapt_threads_to(m);
  const auto& c = m.config();
  std::unique_ptr<vocablens::Tokenizer> tok;
  try {
    tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);
  } catch (const vocablens::FormatError& e) {
    if (!o.tokenizer.empty() || !o.prompt.empty()) throw;  // asked for explicitly: an error
  }
  std::vector<int64_t> prompt = o.prompt_ids;
  if (!o.prompt.empty()) {
    if (!prompt.empty()) throw vocablens::UsageError("give either --prompt or --prompt-ids, not both");
    prompt = tok->encode(o.prompt);  // llama2.c vocabularies add BOS themselves, as run.c does
  }
  if (prompt.empty()) {
    int64_t bos = tok ? tok->bos_id() : c.bos_token_id;
    if (bos < 0) bos = c.bos_token_id;
    if (bos < 0) throw vocablens::UsageError("the model has no BOS token: give --prompt or --prompt-ids");
    prompt = {bos};
  }
  if (o.steps < 0) throw vocablens::UsageError("--steps must be >= 0");
  if (static_cast<int64_t>(prompt.size()) > c.n_ctx)
    throw vocablens::UsageError("the prompt has " + std::to_string(prompt.size()) +
                                " tokens, longer than the model's context of " + std::to_string(c.n_ctx));
  int64_t steps = o.steps;
  if (o.runc_n >= 0) {
    // run.c: -n counts positions from the first prompt token (0 or more than seq_len: seq_len); the token
    // predicted at the last position is printed, so it prints n - (prompt length - 1) new tokens.
    const int64_t n = o.runc_n == 0 || o.runc_n > c.n_ctx ? c.n_ctx : o.runc_n;
    steps = std::max<int64_t>(0, n - (static_cast<int64_t>(prompt.size()) - 1));
  }
  // llama2.c's run.c ends a sample when the model emits BOS; Hugging Face models end at EOS.
  int64_t stop = o.stop_id;
  if (stop == -2) stop = c.architecture == "llama2.c" ? c.bos_token_id : c.eos_token_id;
  std::vector<int64_t> ids = m.generate_greedy(prompt, steps, stop);
  if (!ids.empty() && ids.back() == stop && stop >= 0 && ids.size() > prompt.size()) ids.pop_back();
  if (o.print_ids || !tok) {
    if (!tok) std::cerr << "vocablens: no tokenizer found beside the model; printing ids (use --tokenizer)\n";
    fmt::print("{}\n", fmt::join(ids, " "));
    return 0;
  }
  std::string text = tok->decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

vocablens::cli::Register reg{
    "generate", "Greedy decoding from a prompt (default: BOS), printed as text",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<GenerateOptions>();
      sub.add_option("MODEL", o->model, "Hugging Face directory, llama2.c .bin, or llama2.c ckpt.pt")->required();
      auto* steps = sub.add_option("--steps", o->steps,
                                   "Number of NEW tokens to generate after the prompt (stops earlier at the stop token or "
                                   "when the context is full: as run.c, the token predicted at the last position is kept)")
                        ->capture_default_str();
      sub.add_option("-n", o->runc_n,
                     "run.c's -n: positions to run counting the prompt (prints n - prompt tokens + 1 new tokens; "
                     "0 or more than the context = the context). Unlike --steps, which counts new tokens only")
          ->excludes(steps);
      sub.add_option("--prompt,-p", o->prompt, "Prompt text (encoded with the model's tokenizer)");
      sub.add_option("--prompt-ids", o->prompt_ids, "Prompt as token ids, e.g. --prompt-ids 1 403 407")->delimiter(',');
      sub.add_option("--tokenizer,-z", o->tokenizer, "Tokenizer file or directory when it is not beside the model");
      sub.add_option("--stop-id", o->stop_id,
                     "Stop when this id is generated (default: BOS for llama2.c models as run.c does, EOS otherwise; -1: never)");
      sub.add_flag("--ids", o->print_ids, "Print token ids instead of text");
      return [o] { return run_generate(*o); };
    }};

}  // namespace
