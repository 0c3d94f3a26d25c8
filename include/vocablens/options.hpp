// vocablens/options.hpp — every analysis's options, declared once.
//
// An analysis declares its options in one list (name, type, default, range or choices, help). From that
// list alone come the CLI flags (`--top-k`), the Python keyword arguments with their real defaults (and the
// `.pyi` stubs), the HTTP API's JSON body and the machine-readable schema (`GET /api/analyses`,
// `vocablens schema`). Values are checked here, once, whatever surface they came from; the messages name the
// option as that surface spells it (`--top-k` on the command line, `top_k` in Python and JSON).
//
//   vocablens::AnalysisDecl d{"neurons", "MLP neurons in vocabulary space", "neurons", {
//       {"layer", OptionType::Integer, 0, "Layer (0-based; negative counts from the end)"},
//       {"top_k", OptionType::Integer, 30, "Tokens per vector", 1},
//   }};
//   nlohmann::json o = vocablens::resolve_options(d, {{"top_k", 5}}, Surface::Python);
//   o["top_k"] == 5; o["layer"] == 0;                      // every declared option present, defaults filled
//   vocablens::resolve_options(d, {{"top_k", 0}}, Surface::Cli);  // UsageError "neurons: --top-k: must be >= 1 (got 0)"
//
// The declaration also tells a server what it needs to know of the analysis, so that no server code names one:
// whether its forward pass may be replayed (reads_forward_only, OptionDecl::edits_forward), how big its answer
// will be (answer_size) and the short routes that call it (http_aliases).
//
// Guarantees: resolve_options returns an object holding exactly the declared names; an absent option
// without a default is null; unknown names are refused with the closest declared one suggested; integers
// are int64, reals finite, choices one of the list, index lists expanded and bounded (kMaxIndexListEntries).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocablens/error.hpp"

namespace vocablens {

/// A value of the wrong type for its option (a string where an integer is declared): a UsageError that
/// Python raises as TypeError (wrong values stay ValueError, as Python's own conventions have it).
class OptionTypeError : public UsageError {
 public:
  using UsageError::UsageError;
};

enum class OptionType {
  Integer,  ///< int64; JSON number without fraction; CLI "12"
  Real,     ///< finite double
  Flag,     ///< bool; CLI: `--name` when the default is false, `--no-name` when it is true
  Text,     ///< string
  Choice,   ///< one of `choices`
  Indices,  ///< list of int64; CLI and strings "0,5,10-20"; JSON a list or that string
  Texts,    ///< list of strings; CLI repeatable or comma-separated
  Token,    ///< a token as text (" Paris", "#464") or as id (int): resolved by the analysis with the tokenizer
  Prompt,   ///< text, or token ids (a JSON list of int): what a forward pass reads
  // Inputs that are not JSON values. On the command line each is a path the analysis opens; Python passes
  // the loaded object instead (vocablens/analysis_inputs.hpp), the JSON value then only labels it; the HTTP
  // API refuses Model and Sae (they name files on the server).
  Model,   ///< another model: a path (CLI); a vocablens.Model (Python)
  Sae,     ///< an SAE or transcoder: a path (CLI); a vocablens.Sae (Python)
  Matrix,  ///< a matrix: a name the model resolves ("W_E", "W_in.2", ...) or a 2-D .npy path; Python: also a tensor
};

const char* to_string(OptionType t);

class Model;
struct ModelConfig;

/// An option that `vocablens serve` may fix from a flag of its own, declared with it (OptionDecl::on_server):
/// `vocablens serve MODEL --<option> VALUE` checks VALUE once at start-up and offers it to every HTTP request that
/// gives {"<option>": true}; any other value of the option is refused over HTTP (it would name a file on the
/// server). graph's transcoders are one: `serve --transcoders DIR`, then POST /api/graph {"transcoders": true}.
struct ServedOption {
  std::string value_name = "PATH";  ///< how serve's --help and the messages name the value ("DIR": a folder)
  std::string help;                 ///< serve's --help for the flag
  /// Run once at start-up on the loaded model: throws Error when VALUE is not usable (the server stops before
  /// binding with "--<option>: <message>"); returns what GET /api/model reports under the option's name.
  std::function<nlohmann::json(const Model&, const std::string& value)> check;
};

struct OptionDecl {
  std::string name;  ///< [a-z][a-z0-9_]*: Python keyword, JSON key; CLI `--` + name with '-'
  OptionType type = OptionType::Text;
  nlohmann::json default_value;  ///< null: no default (absent = not given)
  std::string help;
  std::optional<double> min;  ///< Integer/Real: inclusive bounds
  std::optional<double> max;
  std::vector<std::string> choices;  ///< Choice: the allowed values
  bool required = false;
  std::string positional;  ///< CLI: a positional argument of this name ("QUERY") instead of a flag
  std::string cli;         ///< CLI spelling when not derived from the name ("--allow-list")
  /// CLI only: the flag names a file holding the value (Indices: whitespace-separated ids, '#' comments).
  bool cli_reads_file = false;
  /// CLI only, Texts: each occurrence of the flag is one value, never split at commas (prompts hold commas).
  bool cli_whole = false;
  /// `vocablens serve` may fix this option from a flag of its own (ServedOption); the HTTP API then takes only true.
  std::optional<ServedOption> server;
  /// Given (not null), the option changes the forward pass itself (an expert's ablation or scaling): a request that
  /// sets it is neither replayed from nor kept in a server's memo of forward passes (AnalysisDecl::reads_forward_only).
  bool edits_forward = false;

  OptionDecl() = default;
  OptionDecl(std::string n, OptionType t, nlohmann::json def, std::string h, std::optional<double> lo = std::nullopt,
             std::optional<double> hi = std::nullopt)
      : name(std::move(n)), type(t), default_value(std::move(def)), help(std::move(h)), min(lo), max(hi) {}
  OptionDecl& with_choices(std::vector<std::string> c) {
    choices = std::move(c);
    return *this;
  }
  OptionDecl& as_required() {
    required = true;
    return *this;
  }
  OptionDecl& as_positional(std::string p) {
    positional = std::move(p);
    return *this;
  }
  OptionDecl& spelled(std::string c) {
    cli = std::move(c);
    return *this;
  }
  OptionDecl& file_on_cli() {
    cli_reads_file = true;
    return *this;
  }
  OptionDecl& whole_on_cli() {
    cli_whole = true;
    return *this;
  }
  OptionDecl& on_server(ServedOption s) {
    server = std::move(s);
    return *this;
  }
  OptionDecl& editing_forward() {
    edits_forward = true;
    return *this;
  }
};

/// How many values an HTTP answer's largest array will hold, estimated from the options before any work.
struct AnswerSize {
  double values = 0;  ///< double: products of hostile values do not wrap
  std::string how;    ///< how it was counted: "top_k 50257 × 21 positions × 13 layers"
};

/// The answer size of one request: its resolved options, the model's shapes, the prompt's length in tokens (1 for
/// an analysis that reads no prompt).
using AnswerSizeRule = std::function<AnswerSize(const nlohmann::json& resolved, const ModelConfig& cfg, double positions)>;

/// A second HTTP path for an analysis, with a narrower contract of its own: the explorer page's short routes
/// (`POST /api/sae/features` is feature_logits on the server's SAE, at most 256 features). The request may hold
/// only `keys` and must hold `needs`; `fixed` is set over it ({"sae": true}: the server's own SAE; a server that
/// lacks what `fixed` asks for answers 404, the route being absent there); `at_most` bounds an Integer option's
/// value, or an Indices option's length, tighter than the declaration. Everything else is the analysis's: its
/// defaults, its checks, its estimate, its answer (whose command_line names the alias).
struct HttpAlias {
  std::string path;                                      ///< "sae/features": POST /api/sae/features
  std::vector<std::string> keys;                         ///< the request keys it takes
  std::vector<std::string> needs;                        ///< of `keys`, those the request must give
  nlohmann::json fixed = nlohmann::json::object();       ///< set over the request
  std::vector<std::pair<std::string, int64_t>> at_most;  ///< (option, bound)
};

enum class Surface { Cli, Python, Http };

struct AnalysisDecl {
  std::string name;     ///< Python function and HTTP path: vocablens.<name>(), POST /api/<name>
  std::string summary;  ///< one line, for --help, docstrings and the schema
  std::string command;  ///< CLI subcommand ("" = none)
  std::vector<OptionDecl> options;
  /// What the analysis reads: "prompt" (a forward pass over one prompt), "weights" (no input text), "corpus"
  /// (a text file on the machine that runs it), "prompts" (a prompts file there), "prompts_pair" (two prompts).
  std::string input = "weights";
  /// The declared estimate itself runs the model (graph: the forward pass and the encoders, to count the active
  /// features), so a server computes it where heavy work runs — in a worker, cancellable — not on the thread
  /// that reads requests.
  bool estimate_runs_model = false;
  /// Reads the activations of one prompt's forward pass and writes none: a server may keep that pass and replay it
  /// for the next request of the same prompt (vocablens/forward_memo.hpp), unless the request gives an option that
  /// edits the forward (OptionDecl::edits_forward). Optional (false: every request runs its own forward).
  bool reads_forward_only = false;
  /// How many values the answer's largest array will hold (a server refuses a bigger one before any work, 413).
  /// Optional (empty: top_k, or k, × the prompt's positions × the length of each list option given).
  AnswerSizeRule answer_size;
  /// Other HTTP paths for this analysis, each with its own narrower contract (HttpAlias). Optional.
  std::vector<HttpAlias> http_aliases;

  const OptionDecl* find(std::string_view option) const;
};

/// How `surface` spells the option: "--top-k" / "--no-keys" (CLI), "top_k" (Python, HTTP).
std::string spelling(const OptionDecl& o, Surface surface);

/// The complete options of one call: every declared name, given values checked and converted, defaults
/// filled, null for absent options without a default. `given` is a JSON object (null = {}). Throws
/// UsageError "<analysis>: <spelling>: <problem>" naming the first bad option.
nlohmann::json resolve_options(const AnalysisDecl& d, const nlohmann::json& given, Surface surface);

/// One value as typed on a command line, converted to the option's JSON type (before resolve_options).
nlohmann::json parse_option_text(const AnalysisDecl& d, const OptionDecl& o, const std::string& text);

/// Whether a request's forward pass may be replayed from a server's memo and kept there: the analysis reads it only
/// (AnalysisDecl::reads_forward_only) and `resolved` sets no option that edits it (OptionDecl::edits_forward).
bool forward_replayable(const AnalysisDecl& d, const nlohmann::json& resolved);

/// The request of an alias as the analysis's own options: `body` (a JSON object) holds only alias.keys and every
/// one of alias.needs; alias.fixed is set over it. Throws UsageError "<path>: unknown option 'x' (known: ...)" or
/// "<path>: <key>: is required".
nlohmann::json alias_request(const HttpAlias& alias, const nlohmann::json& body);

/// After resolve_options: alias.at_most holds. Throws UsageError "<path>: <option>: ..." naming the bound.
void check_alias_bounds(const AnalysisDecl& d, const HttpAlias& alias, const nlohmann::json& resolved);

/// {"name", "summary", "command", "input", "options": [{name, type, default, help, min, max, choices,
/// required, cli}]}: the machine-readable declaration (HTTP `GET /api/analyses`, `vocablens schema`).
nlohmann::json option_schema(const AnalysisDecl& d);

/// "0,5,10-20" -> {0, 5, 10, ..., 20}; UsageError on anything malformed. With limit >= 0, every index must
/// be < limit ("<what> 12 in '0-12' is out of range (0..11)"), checked before a range is expanded; lists
/// longer than kMaxIndexListEntries are refused whatever the limit.
constexpr int64_t kMaxIndexListEntries = int64_t{1} << 24;
std::vector<int64_t> parse_index_list(const std::string& spec, int64_t limit = -1, const std::string& what = "index");

/// The Python signature text "name(model, prompt, *, top_k: int = 10, ...) -> Result" (docs, .pyi stubs).
std::string python_signature(const AnalysisDecl& d);

}  // namespace vocablens
