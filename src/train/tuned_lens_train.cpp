// Training the tuned lens (see vocablens/tuned_lens_train.hpp): the tuned-lens package's recipe (KL to the
// model's own distribution, SGD with Nesterov momentum, linear decay, weight decay, gradient clipping),
// checkpoints for --resume, and gradients summed over MPI ranks (vocablens/dist.hpp).
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "train/safetensors_writer.hpp"
#include "vocablens/detail/atomic_file.hpp"
#include "vocablens/dist.hpp"
#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/tuned_lens_train.hpp"
#include "util/regular_file.hpp"

namespace vocablens {
namespace {
namespace fs = std::filesystem;

// The corpus as tokens: read in 1 MB pieces cut after a line end, BOS only before the first piece.
std::vector<int32_t> tokenize_file(const Tokenizer& tok, const std::string& path, uint64_t& bytes) {
  detail::check_regular_file(path, detail::kMaxCorpusBytes, "corpora");  // not /dev/zero, not a FIFO
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FormatError(path, "cannot read");
  std::vector<int32_t> out;
  std::string carry, buf(1 << 20, '\0');
  bool first = true;
  bytes = 0;
  while (true) {
    f.read(&buf[0], static_cast<std::streamsize>(buf.size()));
    const size_t got = static_cast<size_t>(f.gcount());
    if (got == 0 && f.bad()) throw FormatError(path, "read error");
    bytes += got;
    const bool eof = got < buf.size() || f.peek() == std::char_traits<char>::eof();
    std::string text = carry + buf.substr(0, got);
    carry.clear();
    if (!eof) {
      const size_t nl = text.rfind('\n');
      if (nl != std::string::npos && nl + 1 < text.size()) {
        carry = text.substr(nl + 1);
        text.resize(nl + 1);
      }
    }
    if (!text.empty()) {
      EncodeOptions eo;
      if (!first) eo.add_bos = false;
      for (int64_t id : tok.encode(text, eo)) out.push_back(static_cast<int32_t>(id));
      first = false;
    }
    if (eof) break;
  }
  return out;
}

// Fisher-Yates with a portable generator: the same order on every machine and every rank.
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(epoch));
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[static_cast<size_t>(i)], p[rng() % static_cast<uint64_t>(i + 1)]);
  return p;
}

// One call of train_tuned_lens, as named steps: the options checked, the corpus read, the schedule (window, windows
// per step, micro-batches, learning rate), the translators (fresh, or from the checkpoint of --resume), then per step
// the windows of this rank, the gradients of the KL (summed over ranks), the SGD update and the checkpoint; at the
// end the lens, train_log.json and the report.
class LensTrainer {
 public:
  LensTrainer(const Model& m, const TunedLensTrainOptions& o)
      : m_(m), o_(o), cfg_(m.config()), t_start_(std::chrono::steady_clock::now()), rank_(dist::rank()), ranks_(dist::size()) {}

  // ---- options and data --------------------------------------------------------------------------------------
  void check_options() {
    if (o_.out_dir.empty()) throw UsageError("--out DIR is required");
    if (o_.steps < 1) throw UsageError("--steps must be >= 1 (got " + std::to_string(o_.steps) + ")");
    if (o_.tokens_per_step < 0) throw UsageError("--tokens-per-step must be >= 1 (or 0: scaled to the model and corpus)");
    if (!(o_.lr_scale > 0) || !(o_.momentum >= 0 && o_.momentum < 1) || !(o_.weight_decay >= 0) || !(o_.max_grad_norm > 0))
      throw UsageError("--lr-scale must be > 0, --momentum in [0, 1), --weight-decay >= 0, --max-grad-norm > 0");
    W_ = o_.window > 0 ? o_.window : cfg_.n_ctx;
    if (W_ < 1 || W_ > cfg_.n_ctx)
      throw UsageError("--window must be in [1, " + std::to_string(cfg_.n_ctx) + "] (got " + std::to_string(W_) + ")");
  }

  void read_corpus(const Tokenizer& tok) {
    tokens_ = tokenize_file(tok, o_.corpus, corpus_bytes_);
    for (int32_t id : tokens_)
      if (id < 0 || id >= cfg_.vocab_size)
        throw UsageError(o_.corpus + ": the tokenizer produced id " + std::to_string(id) +
                         ", outside the model's vocabulary of " + std::to_string(cfg_.vocab_size));
    n_windows_ = static_cast<int64_t>(tokens_.size()) / W_;
    if (n_windows_ < 1)
      throw UsageError(o_.corpus + ": " + std::to_string(tokens_.size()) + " tokens, shorter than one training window of " +
                       std::to_string(W_) + " tokens (give a longer corpus or a smaller --window)");
  }

  // ---- schedule ----------------------------------------------------------------------------------------------
  // Windows per step (global). Scaled by default: the package's 2^18 tokens suit d_model >= 1024; a smaller
  // model gets 256 tokens per residual dimension, and a step never reads more windows than the corpus has.
  void plan_step_size() {
    scaled_ = o_.tokens_per_step == 0;
    S_ = scaled_ ? std::clamp<int64_t>(std::min<int64_t>(int64_t{1} << 18, 256 * cfg_.d_model) / W_, 1, n_windows_)
                 : std::max<int64_t>(1, o_.tokens_per_step / W_);
  }

  // The rest of the schedule, once the start step is known; tells o.plan about it.
  void plan_schedule() {
    // About 8k tokens per forward pass: the attention scores grow with W per token, and larger batches were
    // measured slower (stories260K, W 512: 128 windows per pass 2.9 GB, 4 windows 0.35 GB and faster).
    micro_ =
        o_.micro_batch > 0 ? o_.micro_batch : std::max<int64_t>(1, 8192 / (W_ * std::max<int64_t>(1, cfg_.vocab_size / 512)));
    base_lr_ = o_.lr_scale * (1.0 - o_.momentum);
    norm_scale_ = 1.0 / (static_cast<double>(S_) * static_cast<double>(W_));
    const double passes = static_cast<double>(o_.steps - start_) * static_cast<double>(S_) / static_cast<double>(n_windows_);
    keep_windows_ = o_.keep_activations && passes > 1.0 &&
                    static_cast<double>(n_windows_) * tuned_lens_kept_bytes_per_window(cfg_, W_) <= kTunedLensKeptBudget;
    if (keep_windows_) kept_.assign(static_cast<size_t>(n_windows_), {});
    last_good_ = start_;
    stop_ = o_.stop_after > 0 ? std::min(o_.steps, start_ + o_.stop_after) : o_.steps;
    if (!o_.plan) return;
    TunedLensTrainPlan pl;
    pl.corpus_tokens = static_cast<int64_t>(tokens_.size());
    pl.windows = n_windows_;
    pl.window = W_;
    pl.windows_per_step = S_;
    pl.tokens_per_step = S_ * W_;
    pl.steps = o_.steps;
    pl.start_step = start_;
    pl.stop_step = stop_;
    pl.tokens_per_step_scaled = scaled_;
    pl.corpus_passes = static_cast<double>(o_.steps) * static_cast<double>(S_) / static_cast<double>(n_windows_);
    pl.micro_batch = std::min(micro_, S_);
    o_.plan(pl);
  }

  // ---- the translators and the checkpoint --------------------------------------------------------------------
  // Parameters (identity translators) and what identifies the run for --resume.
  void init_parameters() {
    lens_ = TunedLens::identity(m_);
    lens_.config.base_model_name_or_path = m_.source();
    lens_.unembed_sha256 = unembedding_sha256(m_);
    for (int64_t l = 0; l < cfg_.n_layers; ++l) {
      params_.push_back(lens_.weight[static_cast<size_t>(l)]);
      params_.push_back(lens_.bias[static_cast<size_t>(l)]);
    }
    ck_path_ = o_.out_dir + "/checkpoint.safetensors";
    run_id_ = {{"corpus_bytes", corpus_bytes_},
               {"corpus_tokens", tokens_.size()},
               {"window", W_},
               {"windows_per_step", S_},
               {"seed", o_.seed},
               {"d_model", cfg_.d_model},
               {"n_layers", cfg_.n_layers}};
  }

  // --resume: translators, momentum buffers, step and losses from the checkpoint of the same run.
  void resume() {
    std::error_code ec;
    if (!fs::exists(ck_path_, ec)) throw UsageError("--resume: no checkpoint " + ck_path_ + " (train without --resume first)");
    TensorStore ck = read_safetensors(ck_path_);
    nlohmann::json meta = ck.metadata;
    nlohmann::json saved_run;
    try {
      saved_run = nlohmann::json::parse(meta.value("run", std::string("{}")));
      start_ = std::stoll(meta.value("step", std::string("0")));
      losses_ = nlohmann::json::parse(meta.value("losses", std::string("[]"))).get<std::vector<double>>();
    } catch (const std::exception& e) { throw FormatError(ck_path_, std::string("unreadable checkpoint metadata: ") + e.what()); }
    if (saved_run != run_id_)
      throw UsageError("--resume: " + ck_path_ + " was trained with " + saved_run.dump() + ", this run would use " +
                       run_id_.dump() + " (same corpus, --window, --tokens-per-step and --seed needed)");
    if (start_ >= o_.steps)
      throw UsageError("--resume: the checkpoint is at step " + std::to_string(start_) + "; give --steps larger than that");
    have_bufs_ = ck.has("momentum.0.weight");
    for (int64_t l = 0; l < cfg_.n_layers; ++l) {
      const std::string k = std::to_string(l);
      params_[static_cast<size_t>(2 * l)].copy_(ck.get(k + ".weight"));
      params_[static_cast<size_t>(2 * l + 1)].copy_(ck.get(k + ".bias"));
      if (have_bufs_) {
        bufs_.push_back(ck.get("momentum." + k + ".weight").clone());
        bufs_.push_back(ck.get("momentum." + k + ".bias").clone());
      }
    }
    losses_.resize(static_cast<size_t>(start_));
  }

  void prepare_out_dir() {
    std::error_code dir_ec;
    made_dir_ = !fs::exists(o_.out_dir, dir_ec);
    ensure_directory(o_.out_dir);
    for (auto& p : params_) p.requires_grad_(true);
  }

  void save_checkpoint(int64_t step) const {
    if (rank_ != 0) return;
    std::map<std::string, at::Tensor> t;
    for (int64_t l = 0; l < cfg_.n_layers; ++l) {
      const std::string k = std::to_string(l);
      t[k + ".weight"] = params_[static_cast<size_t>(2 * l)].detach();
      t[k + ".bias"] = params_[static_cast<size_t>(2 * l + 1)].detach();
      if (have_bufs_) {
        t["momentum." + k + ".weight"] = bufs_[static_cast<size_t>(2 * l)];
        t["momentum." + k + ".bias"] = bufs_[static_cast<size_t>(2 * l + 1)];
      }
    }
    train_detail::write_safetensors(ck_path_, t,
                                    {{"format", "vocablens-tuned-lens-checkpoint"},
                                     {"step", std::to_string(step)},
                                     {"steps", std::to_string(o_.steps)},
                                     {"run", run_id_.dump()},
                                     {"corpus", o_.corpus},
                                     {"losses", nlohmann::json(losses_).dump()}});
  }

  // A lens written before the schedule's end says so (save_tuned_lens's mark; load_tuned_lens warns).
  void save_lens(int64_t trained) const {
    if (rank_ == 0) save_tuned_lens(lens_, o_.out_dir, trained, o_.steps);  // (detaches the translators itself)
  }

  // ---- the steps ---------------------------------------------------------------------------------------------
  // Ctrl-C (SIGINT/SIGTERM) stops at the next step with a resumable checkpoint instead of killing the
  // process mid-step (vocablens/interrupt.hpp); every rank stops at the same step.
  void train() {
    t_loop_ = std::chrono::steady_clock::now();  // the ETA counts training time only (not loading and tokenising)
    InterruptScope interrupt_scope;
    for (int64_t step = start_; step < stop_; ++step) {
      stop_if_interrupted(step);
      double loss = accumulate_gradients(step, windows_of_step(step));
      if (o_.inject_nan_at_step == step + 1) loss = std::numeric_limits<double>::quiet_NaN();
      if (ranks_ > 1) sum_gradients_over_ranks(loss);
      if (!std::isfinite(loss)) diverged(step, "the loss is " + std::string(std::isnan(loss) ? "NaN" : "infinite"));
      const double lr = base_lr_ * std::max(0.0, static_cast<double>(o_.steps - step) / static_cast<double>(o_.steps));
      sgd_update(step, lr);
      losses_.push_back(loss);
      const bool ck = (step + 1) % std::max<int64_t>(1, o_.checkpoint_every) == 0 || step + 1 == stop_;
      if (ck) {
        save_checkpoint(step + 1);
        last_good_ = step + 1;
      }
      report_progress(step + 1, (step + 1 - start_) * S_, false, loss, lr, ck);
    }
  }

  void stop_if_interrupted(int64_t step) {
    int sig = interrupt_signal();
    if (ranks_ > 1) sig = static_cast<int>(dist::allreduce_max(sig));
    if (!sig) return;
    if (step == start_) {
      std::error_code ec;
      if (made_dir_ && rank_ == 0) fs::remove_all(o_.out_dir, ec);
      throw Interrupted(sig, o_.resume ? "interrupted before training resumed; the checkpoint in " + ck_path_ + " is unchanged"
                                       : std::string("interrupted before the first training step; nothing was written"));
    }
    if (last_good_ != step) save_checkpoint(step);
    save_lens(step);  // marked unfinished: usable, with a warning, until --resume completes it
    dist::barrier();
    throw Interrupted(sig, "interrupted at step " + std::to_string(step) + " of " + std::to_string(o_.steps) +
                               ": checkpoint saved in " + ck_path_ + " (and the lens so far, marked unfinished); " +
                               "continue with the same command and --resume");
  }

  // This step's windows (global order: a permutation of the corpus's windows per epoch), and this rank's share.
  std::vector<int64_t> windows_of_step(int64_t step) {
    std::vector<int64_t> mine;
    for (int64_t j = 0; j < S_; ++j) {
      const int64_t g = step * S_ + j;
      const int64_t epoch = g / n_windows_;
      if (epoch != perm_epoch_) {
        perm_ = permutation(n_windows_, o_.seed, epoch);
        perm_epoch_ = epoch;
      }
      if (j % ranks_ == rank_) mine.push_back(perm_[static_cast<size_t>(g % n_windows_)]);
    }
    return mine;
  }

  // The gradients of sum_l KL(final || lens_l) / (S·W) over this rank's windows, in micro-batches; returns the
  // rank's share of the loss.
  double accumulate_gradients(int64_t step, const std::vector<int64_t>& mine) {
    for (auto& p : params_)
      if (p.grad().defined()) p.mutable_grad().zero_();
    double loss = 0;
    for (size_t b0 = 0; b0 < mine.size(); b0 += static_cast<size_t>(micro_)) {
      const size_t nb = std::min(mine.size() - b0, static_cast<size_t>(micro_));
      const std::vector<at::Tensor> in = loss_inputs(std::vector<int64_t>(mine.begin() + static_cast<std::ptrdiff_t>(b0),
                                                                          mine.begin() + static_cast<std::ptrdiff_t>(b0 + nb)));
      const at::Tensor& logp_f = in[static_cast<size_t>(cfg_.n_layers)];
      const at::Tensor& p_f = in[static_cast<size_t>(cfg_.n_layers) + 1];
      at::AutoGradMode grad(true);
      for (int64_t l = 0; l < cfg_.n_layers; ++l) {
        const at::Tensor& h = in[static_cast<size_t>(l)];
        at::Tensor x = lens_.translate(h, l);
        at::Tensor logq = at::log_softmax(m_.unembed(m_.final_norm(x)), -1);
        at::Tensor kl = (p_f * (logp_f - logq)).sum();
        at::Tensor term = kl * norm_scale_;
        term.backward();
        loss += term.item<double>();
      }
      // Windows of this step done so far, over all ranks (each rank runs about 1/ranks of them).
      const int64_t step_done = std::min<int64_t>(S_, static_cast<int64_t>(b0 + nb) * ranks_);
      if (step_done < S_) report_progress(step, (step - start_) * S_ + step_done, true, 0, 0, false);
    }
    return loss;
  }

  // What the loss reads of these windows [nb, W, ...]: the residual entering each layer (n_layers tensors), then
  // the final log-probabilities and probabilities. From one forward pass, or from the windows kept by an
  // earlier one (keep_windows_: the same values).
  std::vector<at::Tensor> loss_inputs(const std::vector<int64_t>& windows) {
    const size_t L = static_cast<size_t>(cfg_.n_layers);
    bool all_kept = keep_windows_;
    for (int64_t w : windows) all_kept = all_kept && !kept_[static_cast<size_t>(w)].empty();
    std::vector<at::Tensor> in(L + 2);
    if (all_kept) {
      std::vector<at::Tensor> parts(windows.size());
      for (size_t j = 0; j < L + 2; ++j) {
        for (size_t i = 0; i < windows.size(); ++i) parts[i] = kept_[static_cast<size_t>(windows[i])][j];
        in[j] = at::stack(parts);
      }
      return in;
    }
    const int64_t W = W_, nb = static_cast<int64_t>(windows.size());
    at::Tensor ids = at::empty({nb, W}, at::kLong);
    auto* ip = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < nb; ++i)
      for (int64_t t = 0; t < W; ++t) ip[i * W + t] = tokens_[static_cast<size_t>(windows[static_cast<size_t>(i)] * W + t)];
    CacheSpec spec;
    spec.resid_pre = true;
    spec.resid_post = true;
    at::NoGradGuard ng;
    ForwardOutput out = m_.forward(ids, spec, /*compute_logits=*/true);
    for (size_t l = 0; l < L; ++l)
      in[l] = l == 0 ? out.cache.get("resid_pre", 0) : out.cache.get("resid_post", static_cast<int64_t>(l) - 1);
    in[L] = at::log_softmax(out.logits, -1);
    in[L + 1] = in[L].exp();
    if (keep_windows_)
      for (int64_t i = 0; i < nb; ++i) {
        auto& k = kept_[static_cast<size_t>(windows[static_cast<size_t>(i)])];
        k.clear();
        for (const at::Tensor& t : in) k.push_back(t.select(0, i).clone());
      }
    return in;
  }

  // Sum the gradients (and the loss) over ranks: one flat float buffer, one allreduce.
  void sum_gradients_over_ranks(double& loss) {
    int64_t total = 0;
    for (auto& p : params_) total += p.numel();
    at::Tensor flat = at::empty({total + 1}, at::kFloat);
    int64_t off = 0;
    for (auto& p : params_) {
      at::Tensor g = p.grad().defined() ? p.grad() : at::zeros_like(p);
      flat.narrow(0, off, p.numel()).copy_(g.reshape({-1}));
      off += p.numel();
    }
    flat.narrow(0, total, 1).fill_(0);
    dist::allreduce_sum(flat.data_ptr<float>(), total);
    off = 0;
    for (auto& p : params_) {
      p.mutable_grad().copy_(flat.narrow(0, off, p.numel()).reshape(p.sizes()));
      off += p.numel();
    }
    dist::allreduce_sum(&loss, 1);
  }

  // Gradient clipping, then SGD with weight decay and Nesterov momentum (as torch.optim.SGD).
  void sgd_update(int64_t step, double lr) {
    at::NoGradGuard ng;
    double sq = 0;
    for (auto& p : params_) sq += p.grad().to(at::kDouble).pow(2).sum().item<double>();
    const double norm = std::sqrt(sq);
    if (!std::isfinite(norm)) diverged(step, "a gradient is not finite");
    const double clip = o_.max_grad_norm / (norm + 1e-6);
    if (clip < 1.0)
      for (auto& p : params_) p.mutable_grad().mul_(clip);
    if (!have_bufs_)
      for (auto& p : params_) bufs_.push_back(at::zeros_like(p));
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor& p = params_[i];
      at::Tensor dp = p.grad().detach().clone();
      if (o_.weight_decay > 0) dp.add_(p.detach(), o_.weight_decay);
      if (!have_bufs_) bufs_[i].copy_(dp);  // torch.optim.SGD: the first buffer is the gradient itself
      else bufs_[i].mul_(o_.momentum).add_(dp);
      dp.add_(bufs_[i], o_.momentum);  // Nesterov
      p.detach().add_(dp, -lr);
    }
    have_bufs_ = true;
    for (auto& p : params_)
      if (!all_finite(p.detach())) diverged(step, "a translator became non-finite");
  }

  [[noreturn]] void diverged(int64_t step, const std::string& what) const {
    throw Error("tuned-lens training stopped at step " + std::to_string(step + 1) + ": " + what +
                (last_good_ > 0 ? "; the last good checkpoint (step " + std::to_string(last_good_) + ") is kept in " + ck_path_
                                : "; no checkpoint was written yet") +
                " (try a smaller --lr-scale)");
  }

  // ---- progress and the outputs ------------------------------------------------------------------------------
  // Progress within and across steps.
  void report_progress(int64_t step_done, int64_t windows_done, bool within, double loss, double lr, bool ck) const {
    if (!o_.progress) return;
    const int64_t windows_total = (stop_ - start_) * S_;
    TunedLensTrainProgress pr;
    pr.step = step_done;
    pr.steps = o_.steps;
    pr.loss = loss;
    pr.lr = lr;
    const auto now = std::chrono::steady_clock::now();
    pr.seconds = std::chrono::duration<double>(now - t_start_).count();
    pr.checkpoint = ck;
    pr.within_step = within;
    pr.windows_done = windows_done;
    pr.windows_total = windows_total;
    const double trained = std::chrono::duration<double>(now - t_loop_).count();
    if (windows_done > 0)
      pr.eta_seconds = trained / static_cast<double>(windows_done) * static_cast<double>(windows_total - windows_done);
    o_.progress(pr);
  }

  // The lens (marked unfinished when stop < steps) and train_log.json, by rank 0; then every rank meets.
  void write_outputs() {
    for (auto& p : params_) p.requires_grad_(false);
    if (rank_ == 0) {
      save_tuned_lens(lens_, o_.out_dir, stop_, o_.steps);
      nlohmann::json log = {{"corpus", o_.corpus},
                            {"corpus_tokens", tokens_.size()},
                            {"window", W_},
                            {"windows", n_windows_},
                            {"windows_per_step", S_},
                            {"tokens_per_step", S_ * W_},
                            {"steps", o_.steps},
                            {"trained_steps", stop_},
                            {"finished", stop_ == o_.steps},
                            {"ranks", ranks_},
                            {"recipe",
                             {{"optimizer", "SGD (Nesterov)"},
                              {"momentum", o_.momentum},
                              {"lr", base_lr_},
                              {"schedule", "linear decay to 0"},
                              {"weight_decay", o_.weight_decay},
                              {"max_grad_norm", o_.max_grad_norm},
                              {"loss", "sum over layers of mean KL(final || lens_l), nats"},
                              {"seed", o_.seed}}},
                            {"losses", losses_}};
      write_file_atomic(o_.out_dir + "/train_log.json", log.dump(1) + "\n");
    }
    dist::barrier();
  }

  TunedLensTrainReport report() const {
    TunedLensTrainReport r;
    r.out_dir = o_.out_dir;
    r.start_step = start_;
    r.steps = o_.steps;
    r.corpus_tokens = static_cast<int64_t>(tokens_.size());
    r.windows = n_windows_;
    r.window = W_;
    r.windows_per_step = S_;
    r.losses = losses_;
    r.ranks = ranks_;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count();
    return r;
  }

 private:
  const Model& m_;
  const TunedLensTrainOptions& o_;
  const ModelConfig& cfg_;
  const std::chrono::steady_clock::time_point t_start_;
  std::chrono::steady_clock::time_point t_loop_;
  const int rank_, ranks_;
  // data
  std::vector<int32_t> tokens_;
  uint64_t corpus_bytes_ = 0;
  int64_t n_windows_ = 0;
  // schedule
  int64_t W_ = 0, S_ = 0, micro_ = 1, start_ = 0, stop_ = 0, last_good_ = 0;
  bool keep_windows_ = false;
  std::vector<std::vector<at::Tensor>> kept_;  ///< per window: loss_inputs' tensors [W, ...] (keep_windows_)
  bool scaled_ = false;
  double base_lr_ = 0, norm_scale_ = 0;
  std::vector<int64_t> perm_;
  int64_t perm_epoch_ = -1;
  // the translators, their momentum buffers, the run's identity and its losses
  TunedLens lens_;
  std::vector<at::Tensor> params_, bufs_;
  bool have_bufs_ = false, made_dir_ = false;
  std::string ck_path_;
  nlohmann::json run_id_;
  std::vector<double> losses_;
};

}  // namespace

TunedLensTrainReport train_tuned_lens(const Model& m, const Tokenizer& tok, const TunedLensTrainOptions& o) {
  LensTrainer t(m, o);
  t.check_options();
  t.read_corpus(tok);
  t.plan_step_size();
  t.init_parameters();
  if (o.resume) t.resume();
  t.prepare_out_dir();
  t.plan_schedule();
  t.train();
  t.write_outputs();
  return t.report();
}

}  // namespace vocablens
