// SentencePiece models through Debian's libsentencepiece (see sentencepiece_tokenizer.hpp).
#include "vocablens/sentencepiece_tokenizer.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <nlohmann/json.hpp>

#include "tokenizer/spm_charsmap.hpp"
#include "tokenizer/text_util.hpp"
#include "vocablens/error.hpp"

#ifndef VOCABLENS_SPM_SHIM
#define VOCABLENS_SPM_SHIM "libvocablens_spm.so"
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VOCABLENS_HAS_ASAN 1
#endif
#endif
#ifndef VOCABLENS_HAS_ASAN
#define VOCABLENS_HAS_ASAN 0
#endif

// The shim's handle type, declared where the shim defines it (the global namespace): function pointers whose
// parameter types name another `vl_spm` (one inside this file's namespace) are calls through a pointer of the
// wrong type, which clang's UBSan (-fsanitize=function) reports at the first call.
struct vl_spm;

namespace vocablens {
namespace {

// libsentencepiece through src/spm_shim (see there why it is loaded late, locally and deep-bound).
struct Shim {
  vl_spm* (*load)(const char*, size_t, char**);
  void (*free_)(vl_spm*);
  int (*size)(const vl_spm*);
  int (*bos)(const vl_spm*);
  int (*eos)(const vl_spm*);
  const char* (*piece)(const vl_spm*, int);
  float (*score)(const vl_spm*, int);
  int (*flags)(const vl_spm*, int);
  int (*piece_to_id)(const vl_spm*, const char*, size_t);
  long (*encode)(const vl_spm*, const char*, size_t, int**, char**);
  char* (*decode)(const vl_spm*, const int*, size_t, size_t*);
  void (*release)(void*);
};

const Shim& shim(const std::string& source) {
  static Shim s{};
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("VOCABLENS_SPM_SHIM");
    int mode = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#if defined(__SANITIZE_ADDRESS__) || VOCABLENS_HAS_ASAN  // (GCC's macro; clang 14 has only __has_feature)
    mode &= ~RTLD_DEEPBIND;  // ASan refuses RTLD_DEEPBIND; sanitizer runs use SentencePiece from LibTorch-free programs
#endif
    void* h = dlopen(env && *env ? env : VOCABLENS_SPM_SHIM, mode);
    if (!h) {
      error = std::string("cannot load libsentencepiece through ") + VOCABLENS_SPM_SHIM + ": " + dlerror();
      return;
    }
    auto sym = [&](const char* n) {
      void* p = dlsym(h, n);
      if (!p) error = std::string("libvocablens_spm lacks ") + n;
      return p;
    };
    s.load = reinterpret_cast<decltype(s.load)>(sym("vl_spm_load"));
    s.free_ = reinterpret_cast<decltype(s.free_)>(sym("vl_spm_free"));
    s.size = reinterpret_cast<decltype(s.size)>(sym("vl_spm_size"));
    s.bos = reinterpret_cast<decltype(s.bos)>(sym("vl_spm_bos"));
    s.eos = reinterpret_cast<decltype(s.eos)>(sym("vl_spm_eos"));
    s.piece = reinterpret_cast<decltype(s.piece)>(sym("vl_spm_piece"));
    s.score = reinterpret_cast<decltype(s.score)>(sym("vl_spm_score"));
    s.flags = reinterpret_cast<decltype(s.flags)>(sym("vl_spm_flags"));
    s.piece_to_id = reinterpret_cast<decltype(s.piece_to_id)>(sym("vl_spm_piece_to_id"));
    s.encode = reinterpret_cast<decltype(s.encode)>(sym("vl_spm_encode"));
    s.decode = reinterpret_cast<decltype(s.decode)>(sym("vl_spm_decode"));
    s.release = reinterpret_cast<decltype(s.release)>(sym("vl_spm_release"));
  });
  if (!error.empty()) throw FormatError(source, error);
  return s;
}

}  // namespace

struct SentencePieceTokenizer::Impl {
  const Shim* api = nullptr;
  vl_spm* h = nullptr;
  std::string source;
  int64_t n = 0;
  int64_t bos = -1, eos = -1;
  bool add_bos = true, add_eos = false;
  std::vector<std::string> pieces;
  std::vector<uint8_t> flags;                             // bit 0 control, 1 unknown, 2 byte, 3 unused
  std::vector<std::pair<std::string, int32_t>> controls;  // control pieces by text, longest first

  ~Impl() {
    if (h) api->free_(h);
  }
  void check(int64_t id) const {
    if (id < 0 || id >= n) throw UsageError("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(n) + ")");
  }
  int piece_id(const std::string& s) const { return api->piece_to_id(h, s.data(), s.size()); }
  void encode_plain(std::string_view text, std::vector<int64_t>& out) const {
    if (text.empty()) return;
    int* ids = nullptr;
    char* err = nullptr;
    long k = api->encode(h, text.data(), text.size(), &ids, &err);
    if (k < 0) {
      std::string e = err ? err : "?";
      api->release(err);
      throw UsageError(source + ": SentencePiece could not encode the text: " + e);
    }
    out.insert(out.end(), ids, ids + k);
    api->release(ids);
  }
};

namespace {

std::unique_ptr<SentencePieceTokenizer::Impl> make_impl(const std::string& proto, const std::string& source) {
  auto p = std::make_unique<SentencePieceTokenizer::Impl>();
  p->api = &shim(source);
  p->source = source;
  // The normaliser walks the charsmap's trie without bounds checks: a corrupted one is refused here, before
  // libsentencepiece sees it (spm_charsmap.hpp).
  detail::check_spm_model(proto, source);
  char* err = nullptr;
  p->h = p->api->load(proto.data(), proto.size(), &err);
  if (!p->h) {
    std::string msg = err ? err : "?";
    p->api->release(err);
    for (char& c : msg)
      if (c == '\n' || c == '\r') c = ' ';
    if (msg.find("ParseFromArray") != std::string::npos)
      throw FormatError(source,
                        "not a SentencePiece model (the protobuf ModelProto does not parse; truncated or another format?)");
    auto k = msg.find("] ");  // "Internal: ./src/x.cc(232) [check] explanation" -> "explanation"
    if (k != std::string::npos && k + 2 < msg.size()) msg = msg.substr(k + 2);
    throw FormatError(source, "not a SentencePiece model libsentencepiece accepts: " + msg);
  }
  p->n = p->api->size(p->h);
  if (p->n <= 0) throw FormatError(source, "the SentencePiece model has no pieces");
  int b = p->api->bos(p->h), e = p->api->eos(p->h);
  p->bos = b >= 0 && b < p->n ? b : -1;
  p->eos = e >= 0 && e < p->n ? e : -1;
  p->pieces.resize(p->n);
  p->flags.resize(p->n);
  for (int i = 0; i < p->n; ++i) {
    p->pieces[i] = p->api->piece(p->h, i);
    p->flags[i] = static_cast<uint8_t>(p->api->flags(p->h, i));
    if ((p->flags[i] & 1) && !p->pieces[i].empty()) p->controls.emplace_back(p->pieces[i], i);
  }
  std::stable_sort(p->controls.begin(), p->controls.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return p;
}

std::string spm_dir_of(const std::string& path) {
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
  std::string cfg_path = spm_dir_of(path) + "/tokenizer_config.json";
  if (detail::is_regular_file(cfg_path)) {
    try {
      auto cfg = nlohmann::json::parse(detail::read_file_bytes(cfg_path));
      if (cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
        impl->add_bos = cfg["add_bos_token"].get<bool>() && impl->bos >= 0;
      if (cfg.is_object() && cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
        impl->add_eos = cfg["add_eos_token"].get<bool>() && impl->eos >= 0;
    } catch (const nlohmann::json::exception& e) { throw FormatError(cfg_path, "not valid JSON"); }
  }
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(impl)));
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(const std::string& proto,
                                                                                const std::string& source, bool add_bos,
                                                                                bool add_eos, int64_t bos_id, int64_t eos_id) {
  auto impl = make_impl(proto, source);
  auto n = impl->n;
  if (bos_id != -2) impl->bos = bos_id >= 0 && bos_id < n ? bos_id : -1;
  if (eos_id != -2) impl->eos = eos_id >= 0 && eos_id < n ? eos_id : -1;
  impl->add_bos = add_bos && impl->bos >= 0;
  impl->add_eos = add_eos && impl->eos >= 0;
  return std::unique_ptr<SentencePieceTokenizer>(new SentencePieceTokenizer(std::move(impl)));
}

std::string SentencePieceTokenizer::source() const { return p_->source; }
int64_t SentencePieceTokenizer::vocab_size() const { return p_->n; }
int64_t SentencePieceTokenizer::bos_id() const { return p_->bos; }
int64_t SentencePieceTokenizer::eos_id() const { return p_->eos; }

std::string SentencePieceTokenizer::piece(int64_t id) const {
  p_->check(id);
  return p_->pieces[id];
}

float SentencePieceTokenizer::score(int64_t id) const {
  p_->check(id);
  return p_->api->score(p_->h, static_cast<int>(id));
}

bool SentencePieceTokenizer::is_special(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return false;
  return (p_->flags[id] & 3) != 0 || id == p_->bos || id == p_->eos;
}

std::string SentencePieceTokenizer::token_bytes(int64_t id) const {
  p_->check(id);
  const std::string& pc = p_->pieces[id];
  if (p_->flags[id] & 3) return "";
  if ((p_->flags[id] & 4) && pc.size() == 6) return std::string(1, static_cast<char>(std::stoi(pc.substr(3, 2), nullptr, 16)));
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
  if (is_special(id)) return p_->pieces[id];
  return display_text(token_bytes(id));
}

std::optional<int64_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  auto lookup = [&](const std::string& s) -> std::optional<int64_t> {
    if (s.empty()) return std::nullopt;
    int id = p_->piece_id(s);
    if (id >= 0 && id < p_->n && p_->pieces[id] == s) return id;
    return std::nullopt;
  };
  auto as_piece = [](std::string_view bytes) {
    std::string s;
    for (char c : bytes) {
      if (c == ' ') s += "\xE2\x96\x81";
      else s += c;
    }
    return s;
  };
  if (auto id = lookup(std::string(token))) return id;  // the piece itself ("▁Paris", "<s>")
  if (auto id = lookup(as_piece(token))) return id;     // bytes (" Paris")
  std::string raw = undisplay_text(token);              // display form ("␣Paris", "⏎")
  if (auto id = lookup(as_piece(raw))) return id;
  if (raw.size() == 1) {  // a single byte: its <0xNN> piece
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
  size_t len = 0;
  char* s = p_->api->decode(p_->h, v.data(), v.size(), &len);
  std::string out(s, len);
  p_->api->release(s);
  return out;
}

}  // namespace vocablens
