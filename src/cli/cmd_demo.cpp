// `vocablens demo [--out DIR]`: the main job on a fresh machine with nothing downloaded. Generates the
// synthetic corpus, trains its BPE and a small GPT (and skip-gram vectors) from scratch, runs every
// analysis on the result, checks that they find the structure planted in the corpus, and writes results
// and the HTML report under one directory.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "cli/command.hpp"
#include "cli/output.hpp"
#include "vocablens/anisotropy.hpp"
#include "vocablens/atomic_file.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/heads.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/neighbours.hpp"
#include "vocablens/neurons.hpp"
#include "vocablens/positions.hpp"
#include "vocablens/project.hpp"
#include "vocablens/report.hpp"
#include "vocablens/spectrum.hpp"
#include "vocablens/synthetic.hpp"
#include "vocablens/tokenizer.hpp"
#include "vocablens/train.hpp"
#include "vocablens/unembed.hpp"

namespace vocablens::cli {
std::function<void(const TrainProgress&)> train_progress_printer(const std::string& label, bool quiet);
std::string format_seconds(double s);
}  // namespace vocablens::cli

namespace {

using vocablens::UsageError;
using json = nlohmann::json;

struct DemoCli {
  std::string out = "vocablens-demo";
  int64_t steps = 0;            // 0 = the tuned default
  int64_t skipgram_steps = 0;
  uint64_t seed = 1;
  std::string positions = "learned";
  bool report = true;
  bool skipgram = true;
  bool quiet = false;
};

// The demo's tuned configuration (docs/train.md, "The demo"): about 2 minutes on 2 cores.
constexpr int64_t kDemoLines = 40000;
constexpr int64_t kDemoSteps = 1200;
constexpr int64_t kDemoSkipgramSteps = 1500;

vocablens::TrainOptions gpt_options(const DemoCli& c, const std::string& dir) {
  vocablens::TrainOptions o;
  o.model = vocablens::TrainModel::GPT;
  o.synthetic = true;
  o.synthetic_options.lines = kDemoLines;
  o.synthetic_options.seed = c.seed;
  o.vocab_size = 1024;
  o.out_dir = dir;
  o.overwrite = true;
  o.seed = c.seed;
  o.steps = c.steps > 0 ? c.steps : kDemoSteps;
  o.batch_size = 16;
  o.lr = 1e-2;
  o.warmup_steps = 50;
  o.d_model = 64;
  o.n_layers = 2;
  o.n_heads = 4;
  o.n_ctx = 64;
  o.positions = vocablens::position_kind_from_string(c.positions);
  return o;
}

vocablens::TrainOptions skipgram_options(const DemoCli& c, const std::string& dir, const std::string& tokenizer) {
  vocablens::TrainOptions o;
  o.model = vocablens::TrainModel::SkipGram;
  o.synthetic = true;
  o.synthetic_options.lines = kDemoLines;
  o.synthetic_options.seed = c.seed;
  o.tokenizer = tokenizer;
  o.out_dir = dir;
  o.overwrite = true;
  o.seed = c.seed;
  o.steps = c.skipgram_steps > 0 ? c.skipgram_steps : kDemoSkipgramSteps;
  o.batch_size = 256;
  o.lr = 1e-2;
  o.d_model = 32;
  o.window = 3;
  return o;
}

int64_t word_token(const vocablens::Tokenizer& tok, const std::string& word) {
  if (auto id = tok.token_to_id(" " + word)) return *id;
  vocablens::EncodeOptions eo;
  eo.add_bos = false;
  auto ids = tok.encode(" " + word, eo);
  return ids.empty() ? -1 : ids[0];
}

// ---- the planted-structure checks (also what tests/demo_test.cpp asserts, with thresholds) ----

struct FactCheck {
  std::vector<std::string> layer_labels;
  std::vector<int64_t> correct_by_layer;   // top-1 == answer, per lens layer
  std::vector<std::vector<json>> rows;
  int64_t n = 0;
};

FactCheck check_facts(const vocablens::Model& m, const vocablens::Tokenizer& tok, const vocablens::SyntheticCorpus& world) {
  FactCheck fc;
  vocablens::EncodeOptions eo;
  eo.add_bos = false;
  for (const auto& f : world.facts) {
    const int64_t target = word_token(tok, f.answer);
    auto ids = tok.encode(f.prompt, eo);
    vocablens::LensOptions lo;
    lo.top_k = 1;
    lo.target = target;
    auto L = vocablens::logit_lens(m, ids, lo);
    const int64_t T = L.n_positions(), n = L.n_layers();
    if (fc.layer_labels.empty()) {
      for (auto& l : L.layers) fc.layer_labels.push_back(l.label);
      fc.correct_by_layer.assign(static_cast<size_t>(n), 0);
    }
    json ranks = json::array();
    for (int64_t li = 0; li < n; ++li) {
      fc.correct_by_layer[static_cast<size_t>(li)] += L.top_id(li, T - 1, 0) == target;
      ranks.push_back(L.target_rank[L.at(li, T - 1)]);
    }
    const int64_t top = L.top_id(n - 1, T - 1, 0);
    fc.rows.push_back({f.relation, f.prompt, f.answer, tok.display(top), top == target,
                       L.target_prob[L.at(n - 1, T - 1)], ranks.dump()});
    ++fc.n;
  }
  return fc;
}

// Copying: lines "repeat w1 .. wk : w1 .. wk" from a held-out seed; the repeated w2..wk are predictable only
// by finding the earlier occurrence of the previous word and copying what followed it (induction).
struct CopyCheck {
  std::vector<std::string> layer_labels;
  std::vector<int64_t> correct_by_layer;
  int64_t n = 0;
};

CopyCheck check_copying(const vocablens::Model& m, const vocablens::Tokenizer& tok, uint64_t seed, int64_t lines) {
  vocablens::SyntheticOptions so;
  so.seed = seed;
  so.lines = lines;
  so.facts = so.classes = so.counting = 0;
  so.copying = 1;
  so.mark_prompts = false;
  const std::string text = vocablens::synthetic_corpus(so).text;
  vocablens::EncodeOptions eo;
  eo.add_bos = false;
  const auto colon = tok.token_to_id(" :");
  CopyCheck cc;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    auto ids = tok.encode(text.substr(pos, end - pos), eo);
    pos = end + 1;
    auto it = colon ? std::find(ids.begin(), ids.end(), *colon) : ids.end();
    if (it == ids.end()) continue;
    const int64_t p = it - ids.begin(), T = static_cast<int64_t>(ids.size());
    vocablens::LensOptions lo;
    lo.top_k = 1;
    auto L = vocablens::logit_lens(m, ids, lo);
    if (cc.layer_labels.empty()) {
      for (auto& l : L.layers) cc.layer_labels.push_back(l.label);
      cc.correct_by_layer.assign(L.layers.size(), 0);
    }
    for (int64_t t = p + 1; t + 1 < T; ++t) {  // predicting w2 .. wk of the repeat
      for (int64_t li = 0; li < L.n_layers(); ++li)
        cc.correct_by_layer[static_cast<size_t>(li)] += L.top_id(li, t, 0) == ids[static_cast<size_t>(t + 1)];
      ++cc.n;
    }
  }
  return cc;
}

struct NeighbourCheck {
  std::map<std::string, std::pair<int64_t, int64_t>> by_class;  // class -> (same-class neighbours, all)
  std::vector<std::vector<json>> rows;
};

NeighbourCheck check_neighbours(const at::Tensor& X, const vocablens::Tokenizer& tok, const vocablens::SyntheticCorpus& world,
                                int64_t k) {
  NeighbourCheck nc;
  for (const char* cls : {"country", "city", "animal", "fruit"}) {
    for (const auto& w : vocablens::synthetic_class_members(cls)) {
      const int64_t id = word_token(tok, w);
      vocablens::NeighbourOptions no;
      no.k = k;
      auto nb = vocablens::neighbours(X, &tok, "#" + std::to_string(id), no);
      int64_t same = 0;
      std::string list;
      for (auto& n : nb.neighbours) {
        std::string t = tok.token_bytes(n.id);
        if (!t.empty() && t[0] == ' ') t = t.substr(1);
        auto it = world.classes.find(t);
        same += it != world.classes.end() && it->second == cls;
        list += (list.empty() ? "" : " ") + t;
      }
      auto& bc = nc.by_class[cls];
      bc.first += same;
      bc.second += static_cast<int64_t>(nb.neighbours.size());
      nc.rows.push_back({cls, w, list, same, static_cast<int64_t>(nb.neighbours.size())});
    }
  }
  return nc;
}

int run_demo(const DemoCli& c) {
  namespace fs = std::filesystem;
  using namespace vocablens;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const std::string dir = c.out, model_dir = dir + "/model", sg_dir = dir + "/skipgram", res_dir = dir + "/results";
  ensure_directory(dir);
  if (fs::exists(res_dir)) fs::remove_all(res_dir);  // results of an earlier demo run
  ensure_directory(res_dir);
  auto say = [&](const std::string& s) {
    if (!c.quiet) fmt::print("{}\n", s);
    std::fflush(stdout);
  };
  say("vocablens demo: a small GPT trained from scratch on a synthetic world, then read in vocabulary space");

  // 1. corpus (the trainer regenerates the same text from the same options; written here to look at)
  TrainOptions go = gpt_options(c, model_dir);
  SyntheticCorpus world = synthetic_corpus(go.synthetic_options);
  write_file_atomic(dir + "/corpus.txt", world.text);
  SyntheticOptions eval_opts = go.synthetic_options;
  eval_opts.seed = go.synthetic_options.seed + 1000;
  eval_opts.lines = 400;
  eval_opts.mark_prompts = false;
  write_file_atomic(dir + "/eval.txt", synthetic_corpus(eval_opts).text);
  say(fmt::format("[1/4] corpus: {} lines of facts, class sentences, counting and copying -> {}/corpus.txt",
                  go.synthetic_options.lines, dir));

  // 2. the GPT
  go.on_progress = cli::train_progress_printer("      gpt", c.quiet);
  say(fmt::format("[2/4] training a GPT-2-style model ({} layers, d_model {}, {} heads, {} positions) for {} steps",
                  go.n_layers, go.d_model, go.n_heads, to_string(go.positions), go.steps));
  TrainReport gr = train(go);
  say(fmt::format("      final loss {:.3f} nats/token (mean of the last 50 steps; started at {:.3f}), {} -> {}",
                  gr.final_loss, gr.losses.empty() ? 0.0 : gr.losses.front(), cli::format_seconds(gr.seconds), model_dir));

  // 3. skip-gram vectors over the same tokenizer
  std::unique_ptr<WordVectors> wv;
  if (c.skipgram) {
    TrainOptions so = skipgram_options(c, sg_dir, model_dir);
    so.on_progress = cli::train_progress_printer("      skip-gram", c.quiet);
    say(fmt::format("[3/4] training skip-gram vectors (d {}, window {}) for {} steps", so.d_model, so.window, so.steps));
    TrainReport sr = train(so);
    say(fmt::format("      final loss {:.3f}, {} -> {}", sr.final_loss, cli::format_seconds(sr.seconds), sg_dir));
    wv = std::make_unique<WordVectors>(load_word_vectors(sg_dir));
  } else {
    say("[3/4] skip-gram: skipped (--no-skipgram)");
  }

  // 4. analyses, through their public headers, on the model as written to disk
  say("[4/4] analyses -> " + res_dir);
  Model m = load_model(model_dir);
  adapt_threads_to(m);
  auto tok = load_tokenizer_for(model_dir);
  int failures = 0;
  std::vector<std::string> lines;
  auto emit = [&](Result r) {
    cli::fill_provenance(r, m);
    r.provenance["tokenizer"] = tok->source();
    write_result(r, res_dir);
  };
  auto step = [&](const std::string& name, const std::function<std::string()>& fn) {
    try {
      std::string line = fn();
      say(fmt::format("      {:<11} {}", name, line));
    } catch (const std::exception& e) {
      ++failures;
      say(fmt::format("      {:<11} FAILED: {}", name, e.what()));
    }
  };
  const std::string prompt = "the capital of france is";
  EncodeOptions eo;
  eo.add_bos = false;
  const auto prompt_ids = tok->encode(prompt, eo);
  PinvOptions pinv;
  pinv.use_cache = false;

  json checks = json::object();
  Result planted;
  planted.kind = "planted_structure";
  planted.settings = {{"facts", world.facts.size()}, {"neighbours_k", 5}};

  {
    Result tr;
    tr.kind = "training";
    tr.settings = {{"steps", gr.step}, {"batch", go.batch_size}, {"lr", go.lr}, {"seed", go.seed},
                   {"n_ctx", go.n_ctx}, {"corpus_lines", go.synthetic_options.lines}};
    tr.summary = {{"final_loss", gr.final_loss}, {"first_loss", gr.losses.empty() ? 0.0 : gr.losses.front()},
                  {"seconds", gr.seconds}, {"parameters", gr.parameters}, {"vocab_size", gr.vocab_size},
                  {"corpus_tokens", gr.corpus_tokens}, {"tokenizer", gr.tokenizer}};
    tr.arrays["losses"] = NdArray::f64({static_cast<int64_t>(gr.losses.size())}, gr.losses.data());
    emit(tr);
  }
  step("logit lens", [&] {
    LensOptions lo;
    lo.top_k = 5;
    emit(logit_lens(m, prompt_ids, lo).to_result(tok.get(), prompt));
    FactCheck fc = check_facts(m, *tok, world);
    std::string per;
    json acc = json::object();
    for (size_t i = 0; i < fc.layer_labels.size(); ++i) {
      const double a = static_cast<double>(fc.correct_by_layer[i]) / static_cast<double>(fc.n);
      acc[fc.layer_labels[i]] = a;
      per += fmt::format("{}{} {:.0f}%", per.empty() ? "" : ", ", fc.layer_labels[i], 100 * a);
    }
    checks["fact_top1_by_layer"] = acc;
    planted.tables.push_back({"facts", {"relation", "prompt", "answer", "final_top1", "correct", "final_prob", "rank_by_layer"}, fc.rows});
    return fmt::format("{} fact prompts, attribute top-1 by layer: {}", fc.n, per);
  });
  step("copying", [&] {
    CopyCheck cc = check_copying(m, *tok, go.synthetic_options.seed + 2000, 100);
    std::string per;
    json acc = json::object();
    for (size_t i = 0; i < cc.layer_labels.size(); ++i) {
      const double a = static_cast<double>(cc.correct_by_layer[i]) / static_cast<double>(std::max<int64_t>(1, cc.n));
      acc[cc.layer_labels[i]] = a;
      per += fmt::format("{}{} {:.0f}%", per.empty() ? "" : ", ", cc.layer_labels[i], 100 * a);
    }
    checks["copy_top1_by_layer"] = acc;
    return fmt::format("{} repeated words of held-out copying lines, top-1 by layer: {}", cc.n, per);
  });
  step("lens corpus", [&] {
    CorpusLensOptions co;
    auto cr = logit_lens_corpus(m, *tok, dir + "/eval.txt", co);
    emit(cr.to_result());
    return fmt::format("held-out synthetic text: cross-entropy {:.3f} nats/token at the output ({} tokens)",
                       cr.mean_cross_entropy.back(), cr.predicted);
  });
  step("heads", [&] {
    HeadsOptions ho;
    ho.kinds = {CircuitKind::OV, CircuitKind::QK};
    ho.top_k = 20;
    ho.inverse = InverseKind::Embed;  // M_OV = W_E W_V W_O W_U: Elhage et al.'s full OV circuit
    ho.pinv = pinv;
    auto ha = analyze_heads(m, ho, tok.get());
    emit(ha.to_result(tok.get()));
    double best = -2;
    int64_t bl = -1, bh = -1, positive = 0, n = 0;
    std::vector<std::vector<json>> rows;
    for (auto& hc : ha.circuits) {
      if (hc.kind != CircuitKind::OV) continue;
      ++n;
      positive += hc.copying_score > 0.5;
      if (hc.copying_score > best) best = hc.copying_score, bl = hc.layer, bh = hc.head;
      rows.push_back({hc.layer, hc.head, hc.copying_score, hc.weight_copying_score});
    }
    checks["best_ov_copying_score"] = best;
    checks["best_ov_copying_head"] = {bl, bh};
    planted.tables.push_back({"ov_copying", {"layer", "head", "copying_score", "weight_copying_score"}, rows});
    return fmt::format("best OV copying score {:+.2f} (layer {} head {}); {} of {} heads above 0.5", best, bl, bh,
                       positive, n);
  });
  step("neurons", [&] {
    NeuronsOptions no;
    no.layer = m.config().n_layers - 1;
    no.top_k = 10;
    no.pinv = pinv;
    auto na = analyze_neurons(m, no, tok.get());
    emit(na.to_result(tok.get()));
    return fmt::format("layer {}: {} neurons' keys and values as tokens", no.layer, na.neurons.size());
  });
  step("projection", [&] {
    HiddenProjectionOptions po;
    po.apply_final_norm = true;
    po.top_k = 5;
    po.pinv = pinv;
    auto hp = project_hidden(m, prompt_ids, po, tok.get());
    emit(hp.to_result(tok.get()));
    return fmt::format("hidden states of \"{}\" projected to tokens ({} layers)", prompt, hp.layers.size());
  });
  step("spectrum", [&] {
    SpectrumOptions so;
    so.k = 16;
    auto s = matrix_spectrum(model_matrix(m, "W_E"), so, "W_E", "token");
    emit(s.to_result(tok.get()));
    return fmt::format("W_E: top singular value {:.2f}, effective rank {:.1f} of {}", s.singular_values.at(0),
                       s.effective_rank, s.cols);
  });
  step("anisotropy", [&] {
    auto a = anisotropy(model_matrix(m, "W_E"), {}, "W_E");
    emit(a.to_result());
    return fmt::format("W_E mean pairwise cosine {:+.3f} (centred {:+.3f})", a.mean_cosine, a.mean_cosine_centred);
  });
  if (m.config().positions == PositionKind::Learned || m.config().positions == PositionKind::Sinusoidal ||
      m.config().positions == PositionKind::Rotary) {
    step("positions", [&] {
      auto p = position_structure(m, {});
      emit(p.to_result());
      return fmt::format("{} positions of {}: first component's dominant frequency {} cycles", p.n_positions, p.source,
                         p.components.empty() ? 0 : p.components[0].dominant_frequency);
    });
  }
  if (wv) {
    step("neighbours", [&] {
      NeighbourOptions no;
      no.k = 10;
      auto nb = neighbours(wv->vectors, tok.get(), "#" + std::to_string(word_token(*tok, "france")), no);
      Result r = nb.to_result(tok.get());
      r.settings["vectors"] = sg_dir + " (skip-gram word vectors)";
      r.provenance = {{"model_path", sg_dir}, {"vocablens_version", VOCABLENS_VERSION}, {"tokenizer", tok->source()}};
      write_result(r, res_dir);
      NeighbourCheck nc = check_neighbours(wv->vectors, *tok, world, 5);
      std::string per;
      json prec = json::object();
      for (auto& [cls, v] : nc.by_class) {
        const double p = static_cast<double>(v.first) / static_cast<double>(std::max<int64_t>(1, v.second));
        prec[cls] = p;
        per += fmt::format("{}{} {:.0f}%", per.empty() ? "" : ", ", cls, 100 * p);
      }
      checks["neighbours_same_class_at5"] = prec;
      planted.tables.push_back({"neighbours", {"class", "word", "neighbours", "same_class", "k"}, nc.rows});
      std::string fr;
      for (size_t i = 0; i < nb.neighbours.size() && i < 5; ++i) fr += " " + tok->display(nb.neighbours[i].id);
      return fmt::format("skip-gram: france ->{}; same-class share of 5 nearest: {}", fr, per);
    });
  }
  planted.summary = checks;
  planted.provenance = {{"vocablens_version", VOCABLENS_VERSION}, {"model_path", model_dir}};
  write_result(planted, res_dir);

  std::string report;
  if (c.report) {
    try {
      report = write_report(res_dir);
    } catch (const std::exception& e) {
      ++failures;
      say(std::string("      report      FAILED: ") + e.what());
    }
  }
  say(fmt::format("done in {}. Where to look:", cli::format_seconds(elapsed())));
  if (!report.empty()) say(fmt::format("  {}  the report: open it in a browser", report));
  say(fmt::format("  {}/  every result as JSON + .npy + CSV (planted_structure.json: the checks)", res_dir));
  say(fmt::format("  {}/  the trained model, an ordinary Hugging Face directory; try", model_dir));
  say(fmt::format("      vocablens lens {} --prompt \"the capital of japan is\"", model_dir));
  if (wv) say(fmt::format("  {}/  skip-gram word vectors (embeddings.npy)", sg_dir));
  say(fmt::format("  {}/corpus.txt  the training corpus (<prompt> spans get no loss)", dir));
  if (failures) {
    fmt::print(stderr, "vocablens: error: {} demo step(s) failed (see above)\n", failures);
    return 1;
  }
  return 0;
}

vocablens::cli::Register reg{
    "demo",
    "Train a small GPT on the built-in synthetic corpus (about 2 minutes on 2 cores, nothing downloaded), run "
    "every analysis on it and write results and the HTML report under one directory",
    [](CLI::App& sub) -> vocablens::cli::Runner {
      auto c = std::make_shared<DemoCli>();
      sub.add_option("--out", c->out, "Output directory (default ./vocablens-demo)");
      sub.add_option("--steps", c->steps, fmt::format("GPT training steps (default {})", kDemoSteps));
      sub.add_option("--skipgram-steps", c->skipgram_steps, fmt::format("Skip-gram steps (default {})", kDemoSkipgramSteps));
      sub.add_option("--seed", c->seed, "Seed of the corpus, the weights and the batches (default 1)");
      sub.add_option("--positions", c->positions, "learned | sinusoidal | rope | alibi | none (default learned)")
          ->check(CLI::IsMember({"learned", "sinusoidal", "rope", "rotary", "alibi", "none"}));
      sub.add_flag("--report,!--no-report", c->report, "Write results/report.html (default on)");
      sub.add_flag("!--no-skipgram", c->skipgram, "Do not train skip-gram vectors");
      sub.add_flag("-q,--quiet", c->quiet, "Only errors");
      return [c] { return run_demo(*c); };
    }};

}  // namespace
