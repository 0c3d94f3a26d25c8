// SentencePiece models through Debian's libsentencepiece (see sentencepiece_tokenizer.hpp).
#include "vocablens/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tokenizer/text_util.hpp"
#include "vocablens/error.hpp"

namespace vocablens {

struct SentencePieceTokenizer::Impl {
  sentencepiece::SentencePieceProcessor sp;
  std::string source;
  int64_t bos = -1, eos = -1;
  bool add_bos = true, add_eos = false;
  std::vector<std::pair<std::string, int32_t>> controls;  // control pieces by text, longest first

  void check(int64_t id) const {
    if (id < 0 || id >= sp.GetPieceSize())
      throw UsageError("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(sp.GetPieceSize()) + ")");
  }
  void encode_plain(std::string_view text, std::vector<int64_t>& out) const {
    if (text.empty()) return;
    std::vector<int> ids;
    auto st = sp.Encode(text, &ids);
    if (!st.ok()) throw UsageError(source + ": SentencePiece could not encode the text: " + st.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
  }
};

namespace {

std::unique_ptr<SentencePieceTokenizer::Impl> make_impl(const std::string& proto, const std::string& source) {
  auto p = std::make_unique<SentencePieceTokenizer::Impl>();
  p->source = source;
  auto st = p->sp.LoadFromSerializedProto(proto);
  if (!st.ok()) {
    std::string msg = st.ToString();
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    if (msg.find("ParseFromArray") != std::string::npos)
      throw FormatError(source, "not a SentencePiece model (the protobuf ModelProto does not parse; truncated or another format?)");
    auto k = msg.find("] ");  // "Internal: ./src/x.cc(232) [check] explanation" -> "explanation"
    if (k != std::string::npos && k + 2 < msg.size()) msg = msg.substr(k + 2);
    throw FormatError(source, "not a SentencePiece model libsentencepiece accepts: " + msg);
  }
  if (p->sp.GetPieceSize() <= 0) throw FormatError(source, "the SentencePiece model has no pieces");
  p->bos = p->sp.bos_id() >= 0 && p->sp.bos_id() < p->sp.GetPieceSize() ? p->sp.bos_id() : -1;
  p->eos = p->sp.eos_id() >= 0 && p->sp.eos_id() < p->sp.GetPieceSize() ? p->sp.eos_id() : -1;
  for (int i = 0; i < p->sp.GetPieceSize(); ++i)
    if (p->sp.IsControl(i) && !p->sp.IdToPiece(i).empty()) p->controls.emplace_back(p->sp.IdToPiece(i), i);
  std::stable_sort(p->controls.begin(), p->controls.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return p;
}

std::string dir_of(const std::string& path) {
  auto k = path.find_last_of('/');
  return k == std::string::npos ? std::string(".") : path.substr(0, k);
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<Impl> impl) : p_(std::move(impl)) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::load(const std::string& path) {
  std::string bytes = detail::read_file_bytes(path);
  if (bytes.empty()) throw FormatError(path, "the file is empty (expected a SentencePiece model)");
  auto impl = make_impl(bytes, path);
  impl->add_bos = impl->bos >= 0;  // transformers' LlamaTokenizer / GemmaTokenizer default
  // tokenizer_config.json beside the model: add_bos_token / add_eos_token as transformers reads them.
  std::string cfg_path = dir_of(path) + "/tokenizer_config.json";
  if (detail::is_regular_file(cfg_path)) {
    try {
      auto cfg = nlohmann::json::parse(detail::read_file_bytes(cfg_path));
      if (cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
        impl->add_bos = cfg["add_bos_token"].get<bool>() && impl->bos >= 0;
      if (cfg.is_object() && cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
        impl->add_eos = cfg["add_eos_token"].get<bool>() && impl->eos >= 0;
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(cfg_path, "not valid JSON");
    }
  }
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(impl)));
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(const std::string& proto,
                                                                                const std::string& source, bool add_bos,
                                                                                bool add_eos, int64_t bos_id, int64_t eos_id) {
  auto impl = make_impl(proto, source);
  auto n = impl->sp.GetPieceSize();
  if (bos_id != -2) impl->bos = bos_id >= 0 && bos_id < n ? bos_id : -1;
  if (eos_id != -2) impl->eos = eos_id >= 0 && eos_id < n ? eos_id : -1;
  impl->add_bos = add_bos && impl->bos >= 0;
  impl->add_eos = add_eos && impl->eos >= 0;
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(impl)));
}

std::string SentencePieceTokenizer::source() const { return p_->source; }
int64_t SentencePieceTokenizer::vocab_size() const { return p_->sp.GetPieceSize(); }
int64_t SentencePieceTokenizer::bos_id() const { return p_->bos; }
int64_t SentencePieceTokenizer::eos_id() const { return p_->eos; }

std::string SentencePieceTokenizer::piece(int64_t id) const {
  p_->check(id);
  return p_->sp.IdToPiece(static_cast<int>(id));
}

float SentencePieceTokenizer::score(int64_t id) const {
  p_->check(id);
  return p_->sp.GetScore(static_cast<int>(id));
}

bool SentencePieceTokenizer::is_special(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  int i = static_cast<int>(id);
  return p_->sp.IsControl(i) || p_->sp.IsUnknown(i) || id == p_->bos || id == p_->eos;
}

std::string SentencePieceTokenizer::token_bytes(int64_t id) const {
  p_->check(id);
  int i = static_cast<int>(id);
  const std::string& pc = p_->sp.IdToPiece(i);
  if (p_->sp.IsControl(i) || p_->sp.IsUnknown(i)) return "";
  if (p_->sp.IsByte(i) && pc.size() == 6) return std::string(1, static_cast<char>(std::stoi(pc.substr(3, 2), nullptr, 16)));
  std::string out;
  for (size_t k = 0; k < pc.size();) {
    if (pc.compare(k, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      k += 3;
    } else {
      out += pc[k++];
    }
  }
  return out;
}

std::string SentencePieceTokenizer::display(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "<id " + std::to_string(id) + "?>";
  if (is_special(id)) return p_->sp.IdToPiece(static_cast<int>(id));
  return display_text(token_bytes(id));
}

std::optional<int64_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  auto lookup = [&](const std::string& s) -> std::optional<int64_t> {
    if (s.empty()) return std::nullopt;
    int id = p_->sp.PieceToId(s);
    if (id >= 0 && id < p_->sp.GetPieceSize() && p_->sp.IdToPiece(id) == s) return id;
    return std::nullopt;
  };
  auto as_piece = [](std::string_view bytes) {
    std::string s;
    for (char c : bytes) {
      if (c == ' ')
        s += "\xE2\x96\x81";
      else
        s += c;
    }
    return s;
  };
  if (auto id = lookup(std::string(token))) return id;             // the piece itself ("▁Paris", "<s>")
  if (auto id = lookup(as_piece(token))) return id;                // bytes (" Paris")
  std::string raw = undisplay_text(token);                         // display form ("␣Paris", "⏎")
  if (auto id = lookup(as_piece(raw))) return id;
  if (raw.size() == 1) {                                           // a single byte: its <0xNN> piece
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned char>(raw[0]));
    if (auto id = lookup(buf)) return id;
  }
  return std::nullopt;
}

std::vector<int64_t> SentencePieceTokenizer::do_encode(std::string_view text, const EncodeOptions& opts) const {
  std::vector<int64_t> out;
  if (opts.add_bos.value_or(p_->add_bos) && p_->bos >= 0) out.push_back(p_->bos);
  if (!opts.special_tokens || p_->controls.empty()) {
    p_->encode_plain(text, out);
  } else {
    size_t pos = 0;
    for (;;) {
      size_t best = std::string_view::npos;
      const std::pair<std::string, int32_t>* hit = nullptr;
      for (const auto& c : p_->controls) {  // leftmost; the longest where several start there
        size_t k = text.find(c.first, pos);
        if (k < best) best = k, hit = &c;
      }
      if (!hit) break;
      p_->encode_plain(text.substr(pos, best - pos), out);
      out.push_back(hit->second);
      pos = best + hit->first.size();
    }
    p_->encode_plain(text.substr(pos), out);
  }
  if (opts.add_eos.value_or(p_->add_eos) && p_->eos >= 0) out.push_back(p_->eos);
  return out;
}

std::string SentencePieceTokenizer::do_decode(const int64_t* ids, size_t n) const {
  std::vector<int> v;
  v.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    p_->check(ids[i]);
    v.push_back(static_cast<int>(ids[i]));
  }
  return p_->sp.DecodeIds(v);
}

}  // namespace vocablens
