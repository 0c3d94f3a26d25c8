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

bool all_finite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }

}  // namespace

TunedLensTrainReport train_tuned_lens(const Model& m, const Tokenizer& tok, const TunedLensTrainOptions& o) {
  const auto& cfg = m.config();
  const auto t_start = std::chrono::steady_clock::now();
  if (o.out_dir.empty()) throw UsageError("--out DIR is required");
  if (o.steps < 1) throw UsageError("--steps must be >= 1 (got " + std::to_string(o.steps) + ")");
  if (o.tokens_per_step < 0) throw UsageError("--tokens-per-step must be >= 1 (or 0: scaled to the model and corpus)");
  if (!(o.lr_scale > 0) || !(o.momentum >= 0 && o.momentum < 1) || !(o.weight_decay >= 0) || !(o.max_grad_norm > 0))
    throw UsageError("--lr-scale must be > 0, --momentum in [0, 1), --weight-decay >= 0, --max-grad-norm > 0");
  const int64_t W = o.window > 0 ? o.window : cfg.n_ctx;
  if (W < 1 || W > cfg.n_ctx)
    throw UsageError("--window must be in [1, " + std::to_string(cfg.n_ctx) + "] (got " + std::to_string(W) + ")");
  const int rank = dist::rank(), ranks = dist::size();

  uint64_t corpus_bytes = 0;
  const std::vector<int32_t> tokens = tokenize_file(tok, o.corpus, corpus_bytes);
  for (int32_t id : tokens)
    if (id < 0 || id >= cfg.vocab_size)
      throw UsageError(o.corpus + ": the tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " +
                       std::to_string(cfg.vocab_size));
  const int64_t n_windows = static_cast<int64_t>(tokens.size()) / W;
  if (n_windows < 1)
    throw UsageError(o.corpus + ": " + std::to_string(tokens.size()) + " tokens, shorter than one training window of " +
                     std::to_string(W) + " tokens (give a longer corpus or a smaller --window)");
  const int64_t L = cfg.n_layers, d = cfg.d_model;
  // Windows per step (global). Scaled by default: the package's 2^18 tokens suit d_model >= 1024; a smaller
  // model gets 256 tokens per residual dimension, and a step never reads more windows than the corpus has.
  const bool scaled = o.tokens_per_step == 0;
  const int64_t S = scaled ? std::clamp<int64_t>(std::min<int64_t>(int64_t{1} << 18, 256 * d) / W, 1, n_windows)
                           : std::max<int64_t>(1, o.tokens_per_step / W);

  // Parameters and momentum buffers.
  TunedLens lens = TunedLens::identity(m);
  lens.config.base_model_name_or_path = m.source();
  lens.unembed_sha256 = unembedding_sha256(m);
  std::vector<at::Tensor> params, bufs;
  for (int64_t l = 0; l < L; ++l) {
    params.push_back(lens.weight[static_cast<size_t>(l)]);
    params.push_back(lens.bias[static_cast<size_t>(l)]);
  }
  bool have_bufs = false;
  int64_t start = 0;
  std::vector<double> losses;
  const std::string ck_path = o.out_dir + "/checkpoint.safetensors";
  const nlohmann::json run_id = {{"corpus_bytes", corpus_bytes}, {"corpus_tokens", tokens.size()}, {"window", W},
                                 {"windows_per_step", S},        {"seed", o.seed},                {"d_model", d},
                                 {"n_layers", L}};
  if (o.resume) {
    std::error_code ec;
    if (!fs::exists(ck_path, ec))
      throw UsageError("--resume: no checkpoint " + ck_path + " (train without --resume first)");
    TensorStore ck = read_safetensors(ck_path);
    nlohmann::json meta = ck.metadata;
    nlohmann::json saved_run;
    try {
      saved_run = nlohmann::json::parse(meta.value("run", std::string("{}")));
      start = std::stoll(meta.value("step", std::string("0")));
      losses = nlohmann::json::parse(meta.value("losses", std::string("[]"))).get<std::vector<double>>();
    } catch (const std::exception& e) {
      throw FormatError(ck_path, std::string("unreadable checkpoint metadata: ") + e.what());
    }
    if (saved_run != run_id)
      throw UsageError("--resume: " + ck_path + " was trained with " + saved_run.dump() + ", this run would use " +
                       run_id.dump() + " (same corpus, --window, --tokens-per-step and --seed needed)");
    if (start >= o.steps)
      throw UsageError("--resume: the checkpoint is at step " + std::to_string(start) + "; give --steps larger than that");
    have_bufs = ck.has("momentum.0.weight");
    for (int64_t l = 0; l < L; ++l) {
      const std::string k = std::to_string(l);
      params[static_cast<size_t>(2 * l)].copy_(ck.get(k + ".weight"));
      params[static_cast<size_t>(2 * l + 1)].copy_(ck.get(k + ".bias"));
      if (have_bufs) {
        bufs.push_back(ck.get("momentum." + k + ".weight").clone());
        bufs.push_back(ck.get("momentum." + k + ".bias").clone());
      }
    }
    losses.resize(static_cast<size_t>(start));
  }
  std::error_code dir_ec;
  const bool made_dir = !fs::exists(o.out_dir, dir_ec);
  ensure_directory(o.out_dir);
  for (auto& p : params) p.requires_grad_(true);

  auto save_checkpoint = [&](int64_t step) {
    if (rank != 0) return;
    std::map<std::string, at::Tensor> t;
    for (int64_t l = 0; l < L; ++l) {
      const std::string k = std::to_string(l);
      t[k + ".weight"] = params[static_cast<size_t>(2 * l)].detach();
      t[k + ".bias"] = params[static_cast<size_t>(2 * l + 1)].detach();
      if (have_bufs) {
        t["momentum." + k + ".weight"] = bufs[static_cast<size_t>(2 * l)];
        t["momentum." + k + ".bias"] = bufs[static_cast<size_t>(2 * l + 1)];
      }
    }
    train_detail::write_safetensors(ck_path, t,
                                    {{"format", "vocablens-tuned-lens-checkpoint"},
                                     {"step", std::to_string(step)},
                                     {"steps", std::to_string(o.steps)},
                                     {"run", run_id.dump()},
                                     {"corpus", o.corpus},
                                     {"losses", nlohmann::json(losses).dump()}});
  };

  // About 8k tokens per forward pass: the attention scores grow with W per token, and larger batches were
  // measured slower (stories260K, W 512: 128 windows per pass 2.9 GB, 4 windows 0.35 GB and faster).
  const int64_t micro = o.micro_batch > 0 ? o.micro_batch : std::max<int64_t>(1, 8192 / (W * std::max<int64_t>(1, cfg.vocab_size / 512)));
  const double base_lr = o.lr_scale * (1.0 - o.momentum);
  const double norm_scale = 1.0 / (static_cast<double>(S) * static_cast<double>(W));
  int64_t last_good = start;
  std::vector<int64_t> perm;
  int64_t perm_epoch = -1;

  const int64_t stop = o.stop_after > 0 ? std::min(o.steps, start + o.stop_after) : o.steps;
  if (o.plan) {
    TunedLensTrainPlan pl;
    pl.corpus_tokens = static_cast<int64_t>(tokens.size());
    pl.windows = n_windows;
    pl.window = W;
    pl.windows_per_step = S;
    pl.tokens_per_step = S * W;
    pl.steps = o.steps;
    pl.start_step = start;
    pl.stop_step = stop;
    pl.tokens_per_step_scaled = scaled;
    pl.corpus_passes = static_cast<double>(o.steps) * static_cast<double>(S) / static_cast<double>(n_windows);
    pl.micro_batch = std::min(micro, S);
    o.plan(pl);
  }
  // Progress within and across steps; the ETA counts training time only (not loading and tokenising).
  const auto t_loop = std::chrono::steady_clock::now();
  const int64_t windows_total = (stop - start) * S;
  auto report = [&](int64_t step_done, int64_t windows_done, bool within, double loss, double lr, bool ck) {
    if (!o.progress) return;
    TunedLensTrainProgress pr;
    pr.step = step_done;
    pr.steps = o.steps;
    pr.loss = loss;
    pr.lr = lr;
    const auto now = std::chrono::steady_clock::now();
    pr.seconds = std::chrono::duration<double>(now - t_start).count();
    pr.checkpoint = ck;
    pr.within_step = within;
    pr.windows_done = windows_done;
    pr.windows_total = windows_total;
    const double trained = std::chrono::duration<double>(now - t_loop).count();
    if (windows_done > 0)
      pr.eta_seconds = trained / static_cast<double>(windows_done) * static_cast<double>(windows_total - windows_done);
    o.progress(pr);
  };
  // A lens written before the schedule's end says so (save_tuned_lens's mark; load_tuned_lens warns).
  auto save_lens = [&](int64_t trained) {
    if (rank == 0) save_tuned_lens(lens, o.out_dir, trained, o.steps);  // (detaches the translators itself)
  };
  // Ctrl-C (SIGINT/SIGTERM) stops at the next step with a resumable checkpoint instead of killing the
  // process mid-step (vocablens/interrupt.hpp); every rank stops at the same step.
  InterruptScope interrupt_scope;
  for (int64_t step = start; step < stop; ++step) {
    int sig = interrupt_signal();
    if (ranks > 1) sig = static_cast<int>(dist::allreduce_max(sig));
    if (sig) {
      if (step == start) {
        std::error_code ec;
        if (made_dir && rank == 0) fs::remove_all(o.out_dir, ec);
        throw Interrupted(sig, o.resume ? "interrupted before training resumed; the checkpoint in " + ck_path + " is unchanged"
                                        : std::string("interrupted before the first training step; nothing was written"));
      }
      if (last_good != step) save_checkpoint(step);
      save_lens(step);  // marked unfinished: usable, with a warning, until --resume completes it
      dist::barrier();
      throw Interrupted(sig, "interrupted at step " + std::to_string(step) + " of " + std::to_string(o.steps) +
                                 ": checkpoint saved in " + ck_path + " (and the lens so far, marked unfinished); " +
                                 "continue with the same command and --resume");
    }
    // This step's windows (global order), and this rank's share.
    std::vector<int64_t> mine;
    for (int64_t j = 0; j < S; ++j) {
      const int64_t g = step * S + j;
      const int64_t epoch = g / n_windows;
      if (epoch != perm_epoch) {
        perm = permutation(n_windows, o.seed, epoch);
        perm_epoch = epoch;
      }
      if (j % ranks == rank) mine.push_back(perm[static_cast<size_t>(g % n_windows)]);
    }
    for (auto& p : params)
      if (p.grad().defined()) p.mutable_grad().zero_();
    double loss = 0;
    for (size_t b0 = 0; b0 < mine.size(); b0 += static_cast<size_t>(micro)) {
      const size_t nb = std::min(mine.size() - b0, static_cast<size_t>(micro));
      at::Tensor ids = at::empty({static_cast<int64_t>(nb), W}, at::kLong);
      auto* ip = ids.data_ptr<int64_t>();
      for (size_t i = 0; i < nb; ++i)
        for (int64_t t = 0; t < W; ++t)
          ip[static_cast<int64_t>(i) * W + t] = tokens[static_cast<size_t>(mine[b0 + i] * W + t)];
      CacheSpec spec;
      spec.resid_pre = true;
      spec.resid_post = true;
      ForwardOutput out;
      at::Tensor logp_f, p_f;
      {
        at::NoGradGuard ng;
        out = m.forward(ids, spec, /*compute_logits=*/true);
        logp_f = at::log_softmax(out.logits, -1);
        p_f = logp_f.exp();
      }
      at::AutoGradMode grad(true);
      for (int64_t l = 0; l < L; ++l) {
        const at::Tensor& h = l == 0 ? out.cache.get("resid_pre", 0) : out.cache.get("resid_post", l - 1);
        at::Tensor x = lens.translate(h, l);
        at::Tensor logq = at::log_softmax(m.unembed(m.final_norm(x)), -1);
        at::Tensor kl = (p_f * (logp_f - logq)).sum();
        at::Tensor term = kl * norm_scale;
        term.backward();
        loss += term.item<double>();
      }
      // Windows of this step done so far, over all ranks (each rank runs about 1/ranks of them).
      const int64_t step_done = std::min<int64_t>(S, static_cast<int64_t>(b0 + nb) * ranks);
      if (step_done < S) report(step, (step - start) * S + step_done, true, 0, 0, false);
    }
    if (o.inject_nan_at_step == step + 1) loss = std::numeric_limits<double>::quiet_NaN();
    // Sum the gradients (and the loss) over ranks: one flat float buffer, one allreduce.
    if (ranks > 1) {
      int64_t total = 0;
      for (auto& p : params) total += p.numel();
      at::Tensor flat = at::empty({total + 1}, at::kFloat);
      int64_t off = 0;
      for (auto& p : params) {
        at::Tensor g = p.grad().defined() ? p.grad() : at::zeros_like(p);
        flat.narrow(0, off, p.numel()).copy_(g.reshape({-1}));
        off += p.numel();
      }
      flat.narrow(0, total, 1).fill_(0);
      dist::allreduce_sum(flat.data_ptr<float>(), total);
      off = 0;
      for (auto& p : params) {
        p.mutable_grad().copy_(flat.narrow(0, off, p.numel()).reshape(p.sizes()));
        off += p.numel();
      }
      dist::allreduce_sum(&loss, 1);
    }
    auto diverged = [&](const std::string& what) {
      throw Error("tuned-lens training stopped at step " + std::to_string(step + 1) + ": " + what +
                  (last_good > 0 ? "; the last good checkpoint (step " + std::to_string(last_good) + ") is kept in " + ck_path
                                 : "; no checkpoint was written yet") +
                  " (try a smaller --lr-scale)");
    };
    if (!std::isfinite(loss)) diverged("the loss is " + std::string(std::isnan(loss) ? "NaN" : "infinite"));
    const double lr = base_lr * std::max(0.0, static_cast<double>(o.steps - step) / static_cast<double>(o.steps));
    {
      at::NoGradGuard ng;
      double sq = 0;
      for (auto& p : params) sq += p.grad().to(at::kDouble).pow(2).sum().item<double>();
      const double norm = std::sqrt(sq);
      if (!std::isfinite(norm)) diverged("a gradient is not finite");
      const double clip = o.max_grad_norm / (norm + 1e-6);
      if (clip < 1.0)
        for (auto& p : params) p.mutable_grad().mul_(clip);
      if (!have_bufs)
        for (auto& p : params) bufs.push_back(at::zeros_like(p));
      for (size_t i = 0; i < params.size(); ++i) {
        at::Tensor& p = params[i];
        at::Tensor dp = p.grad().detach().clone();
        if (o.weight_decay > 0) dp.add_(p.detach(), o.weight_decay);
        if (!have_bufs) bufs[i].copy_(dp);  // torch.optim.SGD: the first buffer is the gradient itself
        else bufs[i].mul_(o.momentum).add_(dp);
        dp.add_(bufs[i], o.momentum);  // Nesterov
        p.detach().add_(dp, -lr);
      }
      have_bufs = true;
      for (auto& p : params)
        if (!all_finite(p.detach())) diverged("a translator became non-finite");
    }
    losses.push_back(loss);
    const bool ck = (step + 1) % std::max<int64_t>(1, o.checkpoint_every) == 0 || step + 1 == stop;
    if (ck) {
      save_checkpoint(step + 1);
      last_good = step + 1;
    }
    report(step + 1, (step + 1 - start) * S, false, loss, lr, ck);
  }

  for (auto& p : params) p.requires_grad_(false);
  if (rank == 0) {
    save_tuned_lens(lens, o.out_dir, stop, o.steps);
    nlohmann::json log = {{"corpus", o.corpus},
                          {"corpus_tokens", tokens.size()},
                          {"window", W},
                          {"windows", n_windows},
                          {"windows_per_step", S},
                          {"tokens_per_step", S * W},
                          {"steps", o.steps},
                          {"trained_steps", stop},
                          {"finished", stop == o.steps},
                          {"ranks", ranks},
                          {"recipe",
                           {{"optimizer", "SGD (Nesterov)"},
                            {"momentum", o.momentum},
                            {"lr", base_lr},
                            {"schedule", "linear decay to 0"},
                            {"weight_decay", o.weight_decay},
                            {"max_grad_norm", o.max_grad_norm},
                            {"loss", "sum over layers of mean KL(final || lens_l), nats"},
                            {"seed", o.seed}}},
                          {"losses", losses}};
    write_file_atomic(o.out_dir + "/train_log.json", log.dump(1) + "\n");
  }
  dist::barrier();
  TunedLensTrainReport r;
  r.out_dir = o.out_dir;
  r.start_step = start;
  r.steps = o.steps;
  r.corpus_tokens = static_cast<int64_t>(tokens.size());
  r.windows = n_windows;
  r.window = W;
  r.windows_per_step = S;
  r.losses = losses;
  r.ranks = ranks;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  return r;
}

}  // namespace vocablens
