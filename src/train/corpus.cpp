// Corpus handling for the trainer: prompt markers, line-wise tokenisation, window sampling, and the
// portable random tensors used for initialisation.
#include <cmath>
#include <string>

#include "train/trainer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/tokenizer.hpp"

namespace vocablens {
namespace {
constexpr std::string_view kOpen = "<prompt>", kClose = "</prompt>";
}

const char* to_string(TrainModel m) {
  switch (m) {
    case TrainModel::EmbedLM: return "embed-lm";
    case TrainModel::SkipGram: return "skipgram";
    case TrainModel::CBOW: return "cbow";
    case TrainModel::GPT: return "gpt";
    case TrainModel::GloVe: return "glove";
  }
  return "?";
}

TrainModel train_model_from_string(const std::string& s) {
  for (auto m : {TrainModel::EmbedLM, TrainModel::SkipGram, TrainModel::CBOW, TrainModel::GPT, TrainModel::GloVe})
    if (s == to_string(m)) return m;
  if (s == "skip-gram") return TrainModel::SkipGram;
  throw UsageError("unknown model kind '" + s + "' (embed-lm, skipgram, cbow, gpt, glove)");
}

std::string strip_prompt_markers(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, kOpen.size(), kOpen) == 0) i += kOpen.size();
    else if (text.compare(i, kClose.size(), kClose) == 0) i += kClose.size();
    else out += text[i++];
  }
  return out;
}

TokenStream tokenize_marked_text(const Tokenizer& tok, std::string_view text) {
  TokenStream s;
  EncodeOptions eo;
  eo.add_bos = false;
  auto nl = tok.encode("\n", eo);
  // A tokenizer that drops whitespace (WordPiece) ends lines with its end-of-sequence token ([SEP]).
  if (nl.size() != 1 && tok.eos_id() >= 0 && nl.empty()) nl.assign(1, tok.eos_id());
  if (nl.size() != 1)
    throw UsageError("the tokenizer (" + tok.source() + ") has no single token for a newline (nor an end-of-sequence token)");
  const int64_t newline = nl[0];
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const bool has_nl = end != std::string_view::npos;
    if (!has_nl) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    ++line_no;
    s.line_starts.push_back(static_cast<int64_t>(s.ids.size()));
    bool in_prompt = false;
    size_t i = 0, seg = 0;
    auto flush = [&](size_t upto) {
      if (upto > seg) {
        for (int64_t id : tok.encode(line.substr(seg, upto - seg), eo)) {
          s.ids.push_back(id);
          s.target.push_back(in_prompt ? 0 : 1);
        }
      }
    };
    while (i < line.size()) {
      if (line.compare(i, kOpen.size(), kOpen) == 0) {
        if (in_prompt) throw UsageError("corpus line " + std::to_string(line_no) + ": nested <prompt>");
        flush(i);
        in_prompt = true;
        i += kOpen.size();
        seg = i;
      } else if (line.compare(i, kClose.size(), kClose) == 0) {
        if (!in_prompt) throw UsageError("corpus line " + std::to_string(line_no) + ": </prompt> without <prompt>");
        flush(i);
        in_prompt = false;
        i += kClose.size();
        seg = i;
      } else {
        ++i;
      }
    }
    if (in_prompt) throw UsageError("corpus line " + std::to_string(line_no) + ": <prompt> is not closed on its line");
    flush(line.size());
    s.line_ends.push_back(static_cast<int64_t>(s.ids.size()));
    if (has_nl) {
      s.ids.push_back(newline);
      s.target.push_back(1);
    }
    pos = has_nl ? end + 1 : end;
  }
  return s;
}

void assign_segments(TokenStream& s, const std::string& source) {
  bool has_prompt = false;
  for (uint8_t t : s.target) has_prompt |= t == 0;
  std::string src = source == "auto" ? (has_prompt ? "prompt" : "lines") : source;
  if (src != "prompt" && src != "lines")
    throw UsageError("--segment-source must be auto, prompt or lines (it is '" + source + "')");
  if (src == "prompt" && !has_prompt) throw UsageError("--segment-source prompt: the corpus has no <prompt>...</prompt> span");
  s.segment.assign(s.ids.size(), 0);
  s.segment_source = src;
  for (size_t l = 0; l < s.line_starts.size(); ++l) {
    const int64_t a = s.line_starts[l], b = s.line_ends[l];
    const int64_t e = l + 1 < s.line_starts.size() ? s.line_starts[l + 1] : static_cast<int64_t>(s.ids.size());
    if (src == "lines") {
      for (int64_t i = a; i < e; ++i) s.segment[static_cast<size_t>(i)] = static_cast<uint8_t>(l % 2);
    } else {
      int64_t last_prompt = -1;  // segment B = the tokens after the line's last prompt span
      for (int64_t i = a; i < b; ++i)
        if (!s.target[static_cast<size_t>(i)]) last_prompt = i;
      if (last_prompt >= 0)
        for (int64_t i = last_prompt + 1; i < b; ++i) s.segment[static_cast<size_t>(i)] = 1;
    }
  }
}

namespace train_detail {

at::Tensor normal_tensor(at::IntArrayRef shape, double std, std::mt19937_64& rng) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  float* p = t.data_ptr<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = uniform01(rng), u2 = uniform01(rng);
    if (u1 < 1e-300) u1 = 1e-300;
    const double r = std::sqrt(-2.0 * std::log(u1)), th = 6.283185307179586 * u2;
    p[i] = static_cast<float>(std * r * std::cos(th));
    if (i + 1 < n) p[i + 1] = static_cast<float>(std * r * std::sin(th));
  }
  return t;
}

at::Tensor uniform_tensor(at::IntArrayRef shape, double a, std::mt19937_64& rng) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(a * (2.0 * uniform01(rng) - 1.0));
  return t;
}

std::vector<int64_t> window_starts(const TokenStream& s, int64_t n_ctx) {
  const int64_t N = static_cast<int64_t>(s.ids.size());
  std::vector<int64_t> out;
  for (int64_t st : s.line_starts)
    if (st + n_ctx + 1 <= N) out.push_back(st);
  if (out.empty())
    throw UsageError("the corpus has " + std::to_string(N) + " tokens: too short for one training window of " +
                     std::to_string(n_ctx + 1) + " tokens (use a longer corpus or a smaller --ctx)");
  return out;
}

void sample_windows(const TokenStream& s, const std::vector<int64_t>& starts, int64_t batch, int64_t n_ctx, std::mt19937_64& rng,
                    at::Tensor& inputs, at::Tensor& targets, at::Tensor* segments) {
  inputs = at::empty({batch, n_ctx}, at::TensorOptions().dtype(at::kLong));
  targets = at::empty({batch, n_ctx}, at::TensorOptions().dtype(at::kLong));
  int64_t* in = inputs.data_ptr<int64_t>();
  int64_t* tg = targets.data_ptr<int64_t>();
  int64_t* sg = nullptr;
  if (segments) {
    if (s.segment.size() != s.ids.size()) throw UsageError("the token stream has no segment ids");
    *segments = at::empty({batch, n_ctx}, at::TensorOptions().dtype(at::kLong));
    sg = segments->data_ptr<int64_t>();
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t st = starts[below(rng, starts.size())];
    for (int64_t t = 0; t < n_ctx; ++t) {
      in[b * n_ctx + t] = s.ids[static_cast<size_t>(st + t)];
      if (sg) sg[b * n_ctx + t] = s.segment[static_cast<size_t>(st + t)];
      const size_t nx = static_cast<size_t>(st + t + 1);
      tg[b * n_ctx + t] = s.target[nx] ? s.ids[nx] : -100;
    }
  }
}

}  // namespace train_detail
}  // namespace vocablens
