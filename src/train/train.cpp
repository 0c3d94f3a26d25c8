// train(): corpus and tokenizer, the optimisation loop, checkpoints and resume (see vocablens/train.hpp).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <ATen/Parallel.h>

#include <nlohmann/json.hpp>

#include "train/safetensors_writer.hpp"
#include "train/trainer.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/bpe_trainer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/detail/sha256.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/wordpiece_trainer.hpp"
#include "util/regular_file.hpp"

namespace vocablens {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using namespace train_detail;

std::string read_all(const std::string& path) {
  detail::check_regular_file(path, detail::kMaxCorpusBytes, "files");  // not /dev/zero, not a FIFO
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FormatError(path, "cannot open (no such file or not readable)");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw FormatError(path, "read error");
  return ss.str();
}

json options_to_json(const TrainOptions& o) {
  const auto& s = o.synthetic_options;
  return {{"model", to_string(o.model)},
          {"corpus", o.corpus},
          {"synthetic", o.synthetic},
          {"synthetic_options",
           {{"seed", s.seed},
            {"lines", s.lines},
            {"facts", s.facts},
            {"classes", s.classes},
            {"counting", s.counting},
            {"copying", s.copying},
            {"max_number", s.max_number},
            {"copy_min", s.copy_min},
            {"copy_max", s.copy_max},
            {"mark_prompts", s.mark_prompts}}},
          {"tokenizer", o.tokenizer},
          {"vocab_size", o.vocab_size},
          {"tokenizer_algo", o.tokenizer_algo},
          {"seed", o.seed},
          {"steps", o.steps},
          {"batch_size", o.batch_size},
          {"lr", o.lr},
          {"warmup_steps", o.warmup_steps},
          {"min_lr_ratio", o.min_lr_ratio},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"weight_decay", o.weight_decay},
          {"grad_clip", o.grad_clip},
          {"d_model", o.d_model},
          {"tied", o.tied},
          {"n_layers", o.n_layers},
          {"n_heads", o.n_heads},
          {"d_mlp", o.d_mlp},
          {"n_ctx", o.n_ctx},
          {"positions", to_string(o.positions)},
          {"rope_theta", o.rope_theta},
          {"segments", o.segments},
          {"segment_source", o.segment_source},
          {"window", o.window},
          {"negatives", o.negatives},
          {"subsample", o.subsample},
          {"glove_x_max", o.glove_x_max},
          {"glove_alpha", o.glove_alpha},
          {"checkpoint_every", o.checkpoint_every}};
}

TrainOptions options_from_json(const json& j, const std::string& path) {
  try {
    TrainOptions o;
    o.model = train_model_from_string(j.at("model").get<std::string>());
    o.corpus = j.at("corpus").get<std::string>();
    o.synthetic = j.at("synthetic").get<bool>();
    const json& s = j.at("synthetic_options");
    auto& so = o.synthetic_options;
    so.seed = s.at("seed").get<uint64_t>();
    so.lines = s.at("lines").get<int64_t>();
    so.facts = s.at("facts").get<double>();
    so.classes = s.at("classes").get<double>();
    so.counting = s.at("counting").get<double>();
    so.copying = s.at("copying").get<double>();
    so.max_number = s.at("max_number").get<int64_t>();
    so.copy_min = s.at("copy_min").get<int64_t>();
    so.copy_max = s.at("copy_max").get<int64_t>();
    so.mark_prompts = s.at("mark_prompts").get<bool>();
    o.tokenizer = j.at("tokenizer").get<std::string>();
    o.vocab_size = j.at("vocab_size").get<int64_t>();
    o.tokenizer_algo = j.value("tokenizer_algo", std::string("bpe"));
    o.seed = j.at("seed").get<uint64_t>();
    o.steps = j.at("steps").get<int64_t>();
    o.batch_size = j.at("batch_size").get<int64_t>();
    o.lr = j.at("lr").get<double>();
    o.warmup_steps = j.at("warmup_steps").get<int64_t>();
    o.min_lr_ratio = j.at("min_lr_ratio").get<double>();
    o.beta1 = j.at("beta1").get<double>();
    o.beta2 = j.at("beta2").get<double>();
    o.weight_decay = j.at("weight_decay").get<double>();
    o.grad_clip = j.at("grad_clip").get<double>();
    o.d_model = j.at("d_model").get<int64_t>();
    o.tied = j.at("tied").get<bool>();
    o.n_layers = j.at("n_layers").get<int64_t>();
    o.n_heads = j.at("n_heads").get<int64_t>();
    o.d_mlp = j.at("d_mlp").get<int64_t>();
    o.n_ctx = j.at("n_ctx").get<int64_t>();
    o.positions = position_kind_from_string(j.at("positions").get<std::string>());
    o.rope_theta = j.at("rope_theta").get<double>();
    o.segments = j.value("segments", false);  // absent in checkpoints written before segments
    o.segment_source = j.value("segment_source", std::string("auto"));
    o.window = j.at("window").get<int64_t>();
    o.negatives = j.at("negatives").get<int64_t>();
    o.subsample = j.at("subsample").get<double>();
    o.glove_x_max = j.value("glove_x_max", 100.0);  // absent in checkpoints written before GloVe
    o.glove_alpha = j.value("glove_alpha", 0.75);
    o.checkpoint_every = j.at("checkpoint_every").get<int64_t>();
    return o;
  } catch (const json::exception& e) {
    throw FormatError(path, std::string("malformed training options: ") + e.what());
  } catch (const UsageError& e) { throw FormatError(path, e.what()); }
}

void resolve_defaults(TrainOptions& o) {
  const bool w2v = o.model == TrainModel::SkipGram || o.model == TrainModel::CBOW;
  if (o.batch_size == 0) o.batch_size = w2v ? 256 : 32;
  if (o.lr == 0) o.lr = o.model == TrainModel::GPT ? 3e-3 : o.model == TrainModel::GloVe ? 0.05 : 1e-2;
  if (o.window == 0) o.window = o.model == TrainModel::GloVe ? 10 : 4;
}

void validate(const TrainOptions& o) {
  if (o.out_dir.empty()) throw UsageError("give an output directory (--out DIR)");
  if (o.synthetic == !o.corpus.empty()) throw UsageError("give exactly one of --corpus FILE and --synthetic");
  if (o.steps < 1) throw UsageError("--steps must be >= 1");
  if (o.batch_size < 1) throw UsageError("--batch must be >= 1");
  if (!(o.lr > 0) || !std::isfinite(o.lr)) throw UsageError("--lr must be a positive number");
  if (o.warmup_steps < 0) throw UsageError("--warmup must be >= 0");
  if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1)) throw UsageError("min_lr_ratio must be in [0, 1]");
  if (!(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1)) throw UsageError("Adam betas must be in [0, 1)");
  if (!(o.weight_decay >= 0)) throw UsageError("--weight-decay must be >= 0");
  if (!(o.grad_clip >= 0)) throw UsageError("--grad-clip must be >= 0");
  if (o.d_model < 1 || o.d_model > 65536) throw UsageError("--d-model must be in 1..65536");
  // A rotary base <= 0 makes every rotation NaN (training "diverged" at step 1).
  if (!(o.rope_theta > 0) || !std::isfinite(o.rope_theta)) throw UsageError("--rope-theta must be a positive number");
  if (o.n_ctx < 1 || o.n_ctx > 65536) throw UsageError("--ctx must be in 1..65536");
  if (o.checkpoint_every < 0) throw UsageError("--checkpoint-every must be >= 0");
  if (o.stop_after < 0) throw UsageError("--stop-after must be >= 0");
  if (o.snapshot_every < 0) throw UsageError("--snapshot-every must be >= 0");
  if (o.tokenizer_algo != "bpe" && o.tokenizer_algo != "wordpiece")
    throw UsageError("--tokenizer-algo must be bpe or wordpiece (it is '" + o.tokenizer_algo + "')");
  if (o.window < 1) throw UsageError("--window must be >= 1");
  if (o.model == TrainModel::GloVe) {
    if (!(o.glove_x_max > 0) || !std::isfinite(o.glove_x_max)) throw UsageError("--x-max must be a positive number");
    if (!(o.glove_alpha >= 0) || !std::isfinite(o.glove_alpha)) throw UsageError("--alpha must be >= 0");
    if (o.stop_after > 0 || o.checkpoint_every > 0 || o.snapshot_every > 0)
      throw UsageError(
          "glove runs in one go (seconds to minutes): --stop-after, --checkpoint-every and --snapshot-every do not apply");
  }
}

// Warm-up then cosine decay to lr · min_lr_ratio at `steps`. `step` is the 0-based index of the step.
double learning_rate(const TrainOptions& o, int64_t step) {
  if (o.warmup_steps > 0 && step < o.warmup_steps)
    return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  const double span = static_cast<double>(std::max<int64_t>(1, o.steps - o.warmup_steps));
  const double p = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
  return o.lr * (o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + std::cos(3.141592653589793 * p)));
}

std::vector<std::string> split_sources(const std::string& source) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t k = source.find(" + ", pos);
    out.push_back(source.substr(pos, k == std::string::npos ? std::string::npos : k - pos));
    if (k == std::string::npos) break;
    pos = k + 3;
  }
  return out;
}

double mean_tail(const std::vector<double>& v, size_t n) {
  if (v.empty()) return 0;
  n = std::min(n, v.size());
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(n);
}

// Removes a directory this run created when the run fails before its first checkpoint.
struct RemoveIfFailed {
  std::string dir;
  bool armed = false;
  ~RemoveIfFailed() {
    std::error_code ec;
    if (armed) fs::remove_all(dir, ec);
  }
};

struct RunPaths {
  std::string dir, ckdir, state_path;
  explicit RunPaths(const std::string& d) : dir(d), ckdir(d + "/checkpoint"), state_path(d + "/checkpoint/state.json") {}
};

// The run's options: the given ones for a new run (its directory made, `cleanup` armed when this run created
// it), or the saved ones with the given steps/stop/snapshot/progress for --resume (`state` read).
TrainOptions open_run(const TrainOptions& given, const RunPaths& p, json& state, RemoveIfFailed& cleanup) {
  TrainOptions o = given;
  if (!o.resume) {
    resolve_defaults(o);
    validate(o);
    if (fs::exists(p.state_path) && !o.overwrite)
      throw UsageError(p.dir +
                       " already holds a training run (checkpoint/state.json): pass --resume to continue it or "
                       "--overwrite to start again");
    // A run that fails before its first checkpoint (bad corpus, too few tokens, ...) leaves nothing behind
    // in a directory it created.
    std::error_code ec;
    cleanup.dir = p.dir;
    cleanup.armed = !fs::exists(p.dir, ec);
    ensure_directory(p.dir);
    ensure_directory(p.ckdir);
    return o;
  }
  if (!fs::exists(p.state_path)) throw UsageError(p.dir + " has no checkpoint to resume (" + p.state_path + " not found)");
  try {
    state = json::parse(read_all(p.state_path));
  } catch (const json::exception& e) { throw FormatError(p.state_path, std::string("malformed JSON: ") + e.what()); }
  TrainOptions saved = options_from_json(state.at("options"), p.state_path);
  if (saved.model == TrainModel::GloVe)
    throw UsageError(p.dir + " holds a glove run, which is not resumable (it runs in one go): train again with --overwrite");
  saved.out_dir = o.out_dir;
  saved.steps = given.steps > 0 ? given.steps : saved.steps;
  saved.stop_after = given.stop_after;
  saved.snapshot_every = given.snapshot_every;
  if (given.checkpoint_every > 0) saved.checkpoint_every = given.checkpoint_every;
  saved.on_progress = given.on_progress;
  saved.resume = true;
  resolve_defaults(saved);
  validate(saved);
  return saved;
}

struct RunTokenizer {
  std::unique_ptr<Tokenizer> tok;
  std::string source;              ///< how it was made, for the log
  std::vector<std::string> notes;  ///< what the user should know about it
};

// The run's tokenizer, in the run directory: the checkpoint's (--resume), a copy of --tokenizer's files, or a
// BPE / WordPiece vocabulary learned from `text`.
RunTokenizer prepare_tokenizer(const TrainOptions& o, const std::string& dir, const std::string& text, const json& state) {
  RunTokenizer r;
  if (o.resume) {
    r.tok = load_tokenizer(dir);
    r.source = state.value("tokenizer_source", std::string());
  } else if (!o.tokenizer.empty()) {
    r.tok = load_tokenizer(o.tokenizer);
    r.source = r.tok->source();
    for (const std::string& f : split_sources(r.tok->source())) {
      const std::string to = dir + "/" + fs::path(f).filename().string();
      if (fs::weakly_canonical(f) != fs::weakly_canonical(to)) write_file_atomic(to, read_all(f));
    }
    r.tok = load_tokenizer(dir);
  } else if (o.tokenizer_algo == "wordpiece") {
    WordPieceTrainerOptions wo;
    wo.vocab_size = o.vocab_size;
    WordPieceVocabulary v = train_wordpiece(strip_prompt_markers(text), wo);
    if (v.merges == 0)
      throw UsageError("the corpus is too small to learn a single WordPiece merge; give a longer corpus or --tokenizer");
    std::error_code ec;  // a BPE of an earlier run (--overwrite) would be found first
    fs::remove(dir + "/vocab.json", ec);
    fs::remove(dir + "/merges.txt", ec);
    v.write(dir);
    r.tok = load_tokenizer(dir);
    r.source =
        "WordPiece trained on the corpus (" + std::to_string(v.size()) + " tokens, " + std::to_string(v.merges) + " merges)";
    if (v.skipped_long_words > 0)
      r.notes.push_back(std::to_string(v.skipped_long_words) + " word(s) longer than max_input_chars_per_word (" +
                        std::to_string(wo.config.max_input_chars_per_word) + " characters) were not learned and encode as " +
                        wo.config.unk_token + " (first: \"" + v.first_skipped.substr(0, 40) + "...\")");
  } else {
    BpeTrainerOptions bo;
    bo.vocab_size = o.vocab_size;
    BpeVocabulary v = train_bpe(strip_prompt_markers(text), bo);
    if (v.merges.empty())
      throw UsageError("the corpus is too small to learn a single BPE merge; give a longer corpus or --tokenizer");
    std::error_code ec;  // a WordPiece of an earlier run (--overwrite) would be found first
    fs::remove(dir + "/vocab.txt", ec);
    fs::remove(dir + "/tokenizer_config.json", ec);
    v.write(dir);
    r.tok = load_tokenizer(dir);
    r.source =
        "BPE trained on the corpus (" + std::to_string(v.size()) + " tokens, " + std::to_string(v.merges.size()) + " merges)";
  }
  return r;
}

// What every run reports whatever its model: the corpus, the tokenizer, the directory.
struct RunInputs {
  RunPaths paths;
  std::string corpus_hash;
  RunTokenizer tokenizer;
  TokenStream stream;
  int64_t vocab = 0;
  int64_t targets = 0;

  TrainReport report(const TrainOptions& o) const {
    TrainReport rep;
    rep.out_dir = paths.dir;
    rep.model = o.model;
    rep.steps = o.steps;
    rep.vocab_size = vocab;
    rep.corpus_tokens = static_cast<int64_t>(stream.ids.size());
    rep.target_tokens = targets;
    rep.tokenizer = tokenizer.source;
    rep.notes = tokenizer.notes;
    return rep;
  }
};

// GloVe runs in one go (counts, then epochs): its log and a non-resumable state are written at the end.
TrainReport train_glove_run(const TrainOptions& o, const RunInputs& in, const std::function<double()>& elapsed) {
  GloveRun g = run_glove(o, in.stream, in.vocab, o.synthetic ? std::string("(synthetic)") : o.corpus, elapsed);
  TrainReport rep = in.report(o);
  rep.step = o.steps;
  rep.losses = g.losses;
  rep.final_loss = g.final_cost;
  rep.parameters = 2 * in.vocab * (o.d_model + 1);
  rep.seconds = elapsed();
  json log = {{"model", "glove"},
              {"step", o.steps},
              {"steps", o.steps},
              {"final_loss", g.final_cost},
              {"final_loss_definition",
               "GloVe cost after the last epoch: mean over the nonzero counts of 1/2 f(X)(w.w~ + b + b~ - log X)^2; "
               "losses[] are the epochs' costs as the reference glove prints them (taken during the epoch)"},
              {"nonzero_counts", g.nonzero},
              {"distinct_tokens", g.distinct},
              {"seconds", rep.seconds},
              {"parameters", rep.parameters},
              {"vocab_size", in.vocab},
              {"corpus_tokens", rep.corpus_tokens},
              {"tokenizer", in.tokenizer.source},
              {"options", options_to_json(o)},
              {"losses", rep.losses}};
  write_file_atomic(in.paths.dir + "/train_log.json", log.dump(1) + "\n");
  json st = {{"format", "vocablens-train-checkpoint"},
             {"version", 1},
             {"step", o.steps},
             {"resumable", false},
             {"losses", rep.losses},
             {"corpus_sha256", in.corpus_hash},
             {"tokenizer_source", in.tokenizer.source},
             {"options", options_to_json(o)}};
  write_file_atomic(in.paths.state_path, st.dump() + "\n");
  if (o.on_progress) o.on_progress({o.steps, o.steps, rep.losses.back(), rep.losses.back(), o.lr, rep.seconds, true, true});
  return rep;
}

// Intra-op threads for the run (restored afterwards, also on errors).
struct ThreadScope {
  int prev = at::get_num_threads();
  ThreadScope(int given, int64_t parameters) {
    int want = given;
    if (want <= 0) want = std::getenv("VOCABLENS_THREADS") ? prev : threads_for_parameters(parameters, prev);
    at::set_num_threads(std::max(1, want));
  }
  ~ThreadScope() { at::set_num_threads(prev); }
};

// The optimisation state on disk: params-STEP.safetensors, optimizer-STEP.pt and state.json (the step, the
// RNG, the losses) in checkpoint/, written so that a resumed run continues byte for byte.
struct Checkpoints {
  const TrainOptions& o;
  const RunInputs& in;
  Trainable& model;
  Optimizer& opt;
  std::mt19937_64& rng;

  // Loads the checkpoint `state` names; returns its step, with `losses` and `prior_seconds` restored.
  int64_t restore(const json& state, std::vector<double>& losses, double& prior_seconds) {
    const int64_t step = state.at("step").get<int64_t>();
    losses = state.at("losses").get<std::vector<double>>();
    prior_seconds = state.value("seconds", 0.0);
    const std::string tag = std::to_string(step);
    TensorStore st = read_safetensors(in.paths.ckdir + "/params-" + tag + ".safetensors");
    {
      at::NoGradGuard ng;
      for (auto& [name, p] : model.params) {
        const at::Tensor& t = st.get(name);
        if (t.sizes() != p.sizes()) throw FormatError(st.source, "tensor '" + name + "' does not match the model's shape");
        p.copy_(t);
      }
    }
    const std::string opt_path = in.paths.ckdir + "/optimizer-" + tag + ".pt";
    opt.load(read_all(opt_path), opt_path);
    std::istringstream rs(state.at("rng").get<std::string>());
    rs >> rng;
    if (!rs) throw FormatError(in.paths.state_path, "malformed RNG state");
    return step;
  }

  void write(int64_t step, const std::vector<double>& losses, double seconds) {
    const std::string& ckdir = in.paths.ckdir;
    const std::string tag = std::to_string(step);
    write_safetensors(ckdir + "/params-" + tag + ".safetensors", model.params);
    write_file_atomic(ckdir + "/optimizer-" + tag + ".pt", opt.save());
    std::ostringstream rs;
    rs << rng;
    json st = {{"format", "vocablens-train-checkpoint"},
               {"version", 1},
               {"step", step},
               {"rng", rs.str()},
               {"losses", losses},
               {"seconds", seconds},
               {"corpus_sha256", in.corpus_hash},
               {"tokenizer_source", in.tokenizer.source},
               {"options", options_to_json(o)}};
    write_file_atomic(in.paths.state_path, st.dump() + "\n");
    // Older checkpoint files go once the new state names the new ones.
    std::error_code ec;
    for (auto& e : fs::directory_iterator(ckdir, ec)) {
      const std::string n = e.path().filename().string();
      const bool ours = (n.rfind("params-", 0) == 0 && n != "params-" + tag + ".safetensors") ||
                        (n.rfind("optimizer-", 0) == 0 && n != "optimizer-" + tag + ".pt");
      if (ours && n.find(".tmp-") == std::string::npos) fs::remove(e.path(), ec);
    }
    model.write(in.paths.dir);
  }

  // A loadable model directory of this step: the weights and config, and the run's tokenizer files beside them.
  void snapshot(int64_t step) {
    const std::string& dir = in.paths.dir;
    const std::string sdir = dir + "/snapshots/step-" + std::to_string(step);
    ensure_directory(sdir);
    model.write(sdir);
    std::error_code ec;
    for (const char* f : {"vocab.json", "merges.txt", "vocab.txt", "tokenizer_config.json", "tokenizer.json", "tokenizer.model"})
      if (fs::exists(dir + "/" + f, ec)) write_file_atomic(sdir + "/" + f, read_all(dir + "/" + f));
  }
};

std::unique_ptr<Trainable> make_model(const TrainOptions& o, const RunInputs& in) {
  switch (o.model) {
    case TrainModel::GPT: return make_gpt(o, in.stream, in.vocab, in.tokenizer.tok->eos_id());
    case TrainModel::EmbedLM: return make_embed_lm(o, in.stream, in.vocab);
    case TrainModel::SkipGram:
    case TrainModel::CBOW: return make_word2vec(o, in.stream, in.vocab);
    case TrainModel::GloVe: break;  // runs in one go (train_glove_run)
  }
  throw Error(std::string("internal error: no trainer for model ") + to_string(o.model));
}

}  // namespace

TrainReport train(const TrainOptions& given) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (given.out_dir.empty()) throw UsageError("give an output directory (--out DIR)");
  // Ctrl-C stops at the next step with a checkpoint (or, before the first step, removes what this run
  // created) instead of killing the process mid-way (vocablens/interrupt.hpp).
  InterruptScope interrupt_scope;
  RunInputs in{RunPaths(given.out_dir), {}, {}, {}, 0, 0};
  const RunPaths& paths = in.paths;
  RemoveIfFailed cleanup;
  json state;
  const TrainOptions o = open_run(given, paths, state, cleanup);

  // ---- corpus and tokenizer ----
  {
    std::string text = o.synthetic ? synthetic_corpus(o.synthetic_options).text : read_all(o.corpus);
    in.corpus_hash = sha256_hex(text);
    if (o.resume && state.value("corpus_sha256", std::string()) != in.corpus_hash)
      throw FormatError(o.synthetic ? std::string("synthetic corpus") : o.corpus,
                        "the corpus differs from the one the checkpoint was trained on (sha256 mismatch)");
    in.tokenizer = prepare_tokenizer(o, paths.dir, text, state);
    in.stream = tokenize_marked_text(*in.tokenizer.tok, text);
  }
  if (o.segments) {
    if (o.model != TrainModel::GPT) throw UsageError("--segments applies to --model gpt only");
    assign_segments(in.stream, o.segment_source);
  }
  for (uint8_t t : in.stream.target) in.targets += t;
  if (in.targets == 0) throw UsageError("the corpus has no prediction targets (is everything inside <prompt> spans?)");
  in.vocab = in.tokenizer.tok->vocab_size();
  auto stop_before_training = [&](int sig) {
    throw Interrupted(sig, o.resume ? "interrupted before training resumed; the checkpoint in " + paths.ckdir + " is unchanged"
                                    : std::string("interrupted before the first training step; ") +
                                          (cleanup.armed ? paths.dir + " (created by this run) was removed"
                                                         : "nothing resumable was written in " + paths.dir));
  };
  if (int sig = interrupt_signal()) stop_before_training(sig);
  if (o.model == TrainModel::GloVe) {
    TrainReport rep = train_glove_run(o, in, elapsed);
    cleanup.armed = false;
    return rep;
  }

  std::unique_ptr<Trainable> model = make_model(o, in);
  ThreadScope thread_scope(given.threads, model->parameter_count());
  Optimizer opt(model->params, o);
  std::mt19937_64 rng(o.seed ^ 0x9E3779B97F4A7C15ull);
  Checkpoints checkpoints{o, in, *model, opt, rng};

  TrainReport rep = in.report(o);
  rep.parameters = model->parameter_count();
  int64_t step = 0;
  double prior_seconds = 0;
  if (o.resume) step = checkpoints.restore(state, rep.losses, prior_seconds);
  rep.start_step = step;
  auto write_checkpoint = [&] {
    cleanup.armed = false;
    checkpoints.write(step, rep.losses, prior_seconds + elapsed());
  };

  double ema = rep.losses.empty() ? 0 : rep.losses.back();
  const int64_t end = o.stop_after > 0 ? std::min(o.steps, step + o.stop_after) : o.steps;
  while (step < end) {
    if (int sig = interrupt_signal()) {
      if (step == rep.start_step) stop_before_training(sig);
      write_checkpoint();
      throw Interrupted(sig, "interrupted at step " + std::to_string(step) + " of " + std::to_string(o.steps) +
                                 ": checkpoint saved in " + paths.ckdir + "; continue with `vocablens train --out " + paths.dir +
                                 " --resume`");
    }
    const double lr = learning_rate(o, step);
    opt.zero_grad();
    at::Tensor loss = model->loss(rng);
    loss.backward();
    if (o.grad_clip > 0) clip_grad_norm(model->params, o.grad_clip);
    opt.step(lr);
    const double lv = loss.item<double>();
    if (!std::isfinite(lv))
      throw Error("training diverged at step " + std::to_string(step + 1) + " (loss " + std::to_string(lv) +
                  "); try a lower --lr");
    ++step;
    rep.losses.push_back(lv);
    ema = rep.losses.size() == 1 ? lv : 0.95 * ema + 0.05 * lv;
    const bool ck = o.checkpoint_every > 0 && step % o.checkpoint_every == 0 && step < end;
    if (ck) write_checkpoint();
    if (o.snapshot_every > 0 && step % o.snapshot_every == 0) checkpoints.snapshot(step);
    if (o.on_progress) o.on_progress({step, o.steps, lv, ema, lr, elapsed(), ck, false});
  }
  write_checkpoint();
  rep.step = step;
  rep.final_loss = mean_tail(rep.losses, 50);
  rep.seconds = elapsed();
  json log = {{"model", to_string(o.model)},
              {"step", step},
              {"steps", o.steps},
              {"final_loss", rep.final_loss},
              {"final_loss_definition", "mean training loss (nats per target token) of the last 50 steps"},
              {"seconds", prior_seconds + rep.seconds},
              {"parameters", rep.parameters},
              {"vocab_size", in.vocab},
              {"corpus_tokens", rep.corpus_tokens},
              {"target_tokens", in.targets},
              {"tokenizer", in.tokenizer.source},
              {"options", options_to_json(o)},
              {"losses", rep.losses}};
  write_file_atomic(paths.dir + "/train_log.json", log.dump(1) + "\n");
  if (o.on_progress)
    o.on_progress({step, o.steps, rep.losses.empty() ? 0 : rep.losses.back(), ema,
                   learning_rate(o, std::max<int64_t>(0, step - 1)), rep.seconds, true, true});
  return rep;
}

}  // namespace vocablens
