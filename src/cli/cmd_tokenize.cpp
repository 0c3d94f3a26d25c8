// `vocablens tokenize MODEL "text"`: ids and tokens of a text with the model's tokenizer; `--ids` decodes.
//
//   vocablens tokenize gpt2-tiny "Hello world!"        # table: position, id, token (␣ = space, ⏎ = newline)
//   vocablens tokenize stories260K/stories260K.bin - < story.txt
//   vocablens tokenize gpt2-tiny --ids 15496 995 0      # -> Hello world!
//   vocablens tokenize gpt2-tiny --json "a<|endoftext|>" --special
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "vocablens/error.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  bool has_text = false;
  std::vector<int64_t> ids;
  std::string tokenizer;
  bool special = false;
  bool bos = false;
  bool no_bos = false;
  bool eos = false;
  bool json = false;
};

// Standard input read with a bound: `tokenize - < /dev/zero` used to read until memory ran out (2.2 GB in
// a minute). 64 MB of text is far more than anyone tokenizes to look at; a corpus goes to `lens --corpus`.
constexpr size_t kMaxStdinBytes = size_t(64) << 20;

std::string read_stdin() {
  std::string s;
  std::vector<char> chunk(1 << 20);
  while (std::cin.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || std::cin.gcount() > 0) {
    s.append(chunk.data(), static_cast<size_t>(std::cin.gcount()));
    if (s.size() > kMaxStdinBytes)
      throw vocablens::UsageError(
          "tokenize -: standard input holds more than 64 MB; tokenize a shorter text (a corpus "
          "is read by `vocablens lens --corpus FILE`)");
  }
  return s;
}

// JSON output must stay valid even for texts that are not valid UTF-8 (decoded ids can be anything).
std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

int run_tokenize(const TokenizeOptions& o) {
  using vocablens::UsageError;
  if (o.has_text == !o.ids.empty()) throw UsageError("give either TEXT or --ids (one of them)");
  if (o.bos && o.no_bos) throw UsageError("--bos and --no-bos contradict each other");
  auto tok = vocablens::load_tokenizer_for(o.model, o.tokenizer);

  if (!o.ids.empty()) {  // decode
    std::string text = tok->decode(o.ids);
    if (o.json) {
      nlohmann::json tokens = nlohmann::json::array();
      for (int64_t id : o.ids) tokens.push_back(tok->display(id));
      fmt::print("{}\n",
                 dump({{"tokenizer", tok->source()}, {"kind", tok->kind()}, {"ids", o.ids}, {"tokens", tokens}, {"text", text}}));
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputc('\n', stdout);
    }
    return 0;
  }

  std::string text = o.text == "-" ? read_stdin() : o.text;
  vocablens::EncodeOptions eo;
  eo.special_tokens = o.special;
  if (o.bos) eo.add_bos = true;
  if (o.no_bos) eo.add_bos = false;
  if (o.eos) eo.add_eos = true;
  std::vector<int64_t> ids = tok->encode(text, eo);

  if (o.json) {
    nlohmann::json tokens = nlohmann::json::array(), pieces = nlohmann::json::array();
    for (int64_t id : ids) {
      tokens.push_back(tok->display(id));
      pieces.push_back(tok->piece(id));
    }
    fmt::print("{}\n", dump({{"tokenizer", tok->source()},
                             {"kind", tok->kind()},
                             {"ids", ids},
                             {"tokens", tokens},
                             {"pieces", pieces},
                             {"bytes", text.size()}}));
    return 0;
  }
  fmt::print("{} tokens, {} bytes  ({} vocabulary of {} tokens: {})\n", ids.size(), text.size(), tok->kind(), tok->vocab_size(),
             tok->source());
  size_t id_w = std::to_string(tok->vocab_size()).size();
  fmt::print("{:>5}  {:>{}}  token\n", "pos", "id", id_w);
  for (size_t i = 0; i < ids.size(); ++i) fmt::print("{:>5}  {:>{}}  {}\n", i, ids[i], id_w, tok->display(ids[i]));
  fmt::print("ids: [{}]\n", fmt::join(ids, ", "));
  return 0;
}

vocablens::cli::Register registered_cmd_tokenize{
    "tokenize", "Show the token ids and tokens of a text (or decode ids with --ids)",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto o = std::make_shared<TokenizeOptions>();
      sub.add_option("MODEL", o->model,
                     "Model (HF directory, GGUF file, llama2.c .bin, ckpt.pt) or a tokenizer file/directory itself")
          ->required();
      sub.add_option("TEXT", o->text, "Text to encode ('-' reads standard input)");
      sub.add_option("--ids", o->ids, "Token ids to decode instead (space or comma separated)")->delimiter(',');
      sub.add_option("--tokenizer,-z", o->tokenizer, "Tokenizer file or directory (default: found beside the model)");
      sub.add_flag("--special", o->special, "Recognise special tokens such as <|endoftext|> in the text");
      sub.add_flag("--bos", o->bos, "Prepend BOS (GPT-2: <|endoftext|>)");
      sub.add_flag("--no-bos", o->no_bos, "Do not prepend BOS (llama2.c vocabularies add it by default, like run.c)");
      sub.add_flag("--eos", o->eos, "Append EOS");
      sub.add_flag("--json", o->json, "Print JSON (ids, display tokens, vocabulary pieces)");
      return [o, &sub] {
        o->has_text = sub.count("TEXT") > 0;
        return run_tokenize(*o);
      };
    }};

}  // namespace
