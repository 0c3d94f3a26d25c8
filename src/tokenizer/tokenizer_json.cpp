// Hugging Face tokenizer.json (model "BPE") -> BpeModel: byte-level (GPT-2, Llama-3, Qwen2, GPT-NeoX) and
// character-level SentencePiece-style BPE (Llama-2, Mistral, Gemma: "▁", byte fallback), with the file's
// normalizer, pre-tokenizer, added tokens and post-processor, plus tokenizer_config.json beside it (BOS/EOS).
//
// What is read (anything else is a one-line FormatError naming the file and the feature):
//   normalizer:    null | NFC | NFD | NFKC | NFKD | Lowercase | Prepend | Replace (String pattern) | Sequence
//   pre_tokenizer: null | ByteLevel (add_prefix_space, use_regex) | Split (Regex/String, Isolated) |
//                  Digits (individual_digits) | Metaspace (replacement, prepend_scheme, split; first in a
//                  Sequence) | Sequence of these
//   model:         BPE (vocab, merges "a b" or ["a","b"], byte_fallback, fuse_unk, unk_token, ignore_merges)
//   post_processor TemplateProcessing (also inside Sequence): a special token before $A = BOS, after = EOS
#include <algorithm>

#include "tokenizer/bpe_builder.hpp"
#include "vocablens/bpe_tokenizer.hpp"
#include "vocablens/error.hpp"

namespace vocablens {
namespace {

using detail::bad;
using nlohmann::json;

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : std::string();
}

std::string json_dir_of(const std::string& p) {
  auto k = p.find_last_of('/');
  return k == std::string::npos ? std::string(".") : p.substr(0, k);
}

/// Reads a normalizer into steps (appended in order).
void read_normalizer(const std::string& path, const json& n, std::vector<detail::NormStep>& out) {
  using K = detail::NormStep;
  if (n.is_null()) return;
  const std::string t = type_of(n);
  auto unsupported = [&](const std::string& what) {
    bad(path, "normalizer \"" + what +
                  "\" is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Prepend, "
                  "Replace with a String pattern, Sequence)");
  };
  if (t == "Sequence") {
    if (!n.contains("normalizers") || !n["normalizers"].is_array()) bad(path, "normalizer Sequence without \"normalizers\"");
    for (const auto& x : n["normalizers"]) read_normalizer(path, x, out);
  } else if (t == "NFC") {
    out.push_back({K::kNfc, "", ""});
  } else if (t == "NFD") {
    out.push_back({K::kNfd, "", ""});
  } else if (t == "NFKC") {
    out.push_back({K::kNfkc, "", ""});
  } else if (t == "NFKD") {
    out.push_back({K::kNfkd, "", ""});
  } else if (t == "Lowercase") {
    out.push_back({K::kLowercase, "", ""});
  } else if (t == "Prepend") {
    out.push_back({K::kPrepend, n.value("prepend", std::string()), ""});
  } else if (t == "Replace") {
    const json& p = n.contains("pattern") ? n["pattern"] : json();
    if (!p.is_object() || !p.contains("String") || !p["String"].is_string()) unsupported("Replace with a Regex pattern");
    std::string from = p["String"].get<std::string>();
    if (from.empty()) bad(path, "normalizer Replace with an empty pattern");
    out.push_back({K::kReplace, from, n.value("content", std::string())});
  } else {
    unsupported(t.empty() ? "?" : t);
  }
}

struct PreTok {
  std::vector<std::string> patterns;  // split steps in order
  bool byte_level = false;
  bool add_prefix_space = false;
  bool metaspace = false;
  std::string replacement;  // Metaspace
};

void read_pre_tokenizer(const std::string& path, const json& pt, PreTok& out, bool first) {
  const std::string t = type_of(pt);
  auto unsupported = [&](const std::string& what) {
    bad(path, "unsupported pre_tokenizer (" + what +
                  "); supported: ByteLevel, Split (Regex or String, Isolated), "
                  "Digits, Metaspace, Sequence of these");
  };
  if (pt.is_null()) return;
  if (t == "Sequence") {
    if (!pt.contains("pretokenizers") || !pt["pretokenizers"].is_array()) unsupported("Sequence without pretokenizers");
    bool f = first;
    for (const auto& x : pt["pretokenizers"]) {
      read_pre_tokenizer(path, x, out, f);
      f = false;
    }
  } else if (t == "ByteLevel") {
    out.byte_level = true;
    out.add_prefix_space = pt.value("add_prefix_space", false);
    if (pt.value("use_regex", true)) out.patterns.push_back(detail::kGpt2Pattern);
  } else if (t == "Split") {
    if (pt.value("behavior", std::string()) != "Isolated" || pt.value("invert", false))
      unsupported("Split with behavior \"" + pt.value("behavior", std::string("?")) + "\"" +
                  (pt.value("invert", false) ? " inverted" : "") + "; only Isolated");
    const json& p = pt.contains("pattern") ? pt["pattern"] : json();
    if (p.contains("Regex") && p["Regex"].is_string()) out.patterns.push_back(p["Regex"].get<std::string>());
    else if (p.contains("String") && p["String"].is_string())
      out.patterns.push_back(detail::escape_literal(p["String"].get<std::string>()));
    else unsupported("Split without a pattern");
  } else if (t == "Digits") {
    out.patterns.push_back(pt.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
  } else if (t == "Metaspace") {
    if (!first) unsupported("Metaspace after another pre-tokenizer");
    out.metaspace = true;
    out.replacement = pt.value("replacement", std::string("\xE2\x96\x81"));
    if (out.replacement.empty()) bad(path, "Metaspace with an empty replacement");
    // split=true: every "▁" starts a new piece (HF: MergedWithNext)
    if (pt.value("split", true)) {
      std::string r = detail::escape_literal(out.replacement);
      out.patterns.push_back("(?s)" + r + "(?:(?!" + r + ").)*|(?:(?!" + r + ").)+");
    }
  } else {
    unsupported(pt.is_null() ? "none" : t.empty() ? "?" : t);
  }
}

/// The special-token ids of a TemplateProcessing "single" template before / after $A.
void read_template(const json& pp, int64_t& bos, int64_t& eos, bool& found) {
  const std::string t = type_of(pp);
  if (t == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
    for (const auto& x : pp["processors"]) read_template(x, bos, eos, found);
    return;
  }
  if (t != "TemplateProcessing" || !pp.contains("single") || !pp["single"].is_array()) return;
  found = true;
  bool seen_a = false;
  for (const auto& piece : pp["single"]) {
    if (piece.contains("Sequence")) {
      seen_a = true;
    } else if (piece.contains("SpecialToken") && piece["SpecialToken"].is_object()) {
      std::string name = piece["SpecialToken"].value("id", std::string());
      int64_t id = -1;
      if (pp.contains("special_tokens") && pp["special_tokens"].is_object() && pp["special_tokens"].contains(name)) {
        const json& st = pp["special_tokens"][name];
        if (st.contains("ids") && st["ids"].is_array() && st["ids"].size() == 1 && st["ids"][0].is_number_integer())
          id = st["ids"][0].get<int64_t>();
      }
      if (id < 0) continue;
      (seen_a ? eos : bos) = id;
    }
  }
}

/// A token name of tokenizer_config.json: "<s>" or {"content": "<s>", ...}; "" when absent or null.
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return {};
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

std::unique_ptr<BpeTokenizer> read_tokenizer_json(const std::string& path) {
  json j = detail::parse_json(path);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    bad(path, "not a Hugging Face tokenizer.json (no \"model\" object)");
  const auto& model = j["model"];
  std::string type = model.contains("type") ? model.value("type", std::string()) : std::string("BPE");
  if (type != "BPE")
    bad(path, "model type \"" + type +
                  "\" is not supported by the BPE reader (supported: BPE, byte-level or "
                  "SentencePiece-style)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      bad(path, std::string("model.") + key + " is not supported by the BPE reader");
  if (!model.contains("vocab") || !model["vocab"].is_object() || model["vocab"].empty())
    bad(path, "model.vocab is missing or not an object");
  if (!model.contains("merges") || !model["merges"].is_array()) bad(path, "model.merges is missing or not a list");

  detail::Builder b;
  b.max_id = static_cast<int64_t>(model["vocab"].size()) + detail::Builder::kIdSlack +
             (j.contains("added_tokens") && j["added_tokens"].is_array() ? static_cast<int64_t>(j["added_tokens"].size()) : 0);
  auto& m = *b.m;
  PreTok pre;
  read_pre_tokenizer(path, j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(), pre, true);
  read_normalizer(path, j.contains("normalizer") ? j["normalizer"] : json(), m.norm);
  // Byte level when the pre-tokenizer (or, without one, the decoder) is ByteLevel.
  m.byte_level = pre.byte_level || (type_of(j.value("decoder", json())) == "ByteLevel" && !pre.metaspace);
  m.add_prefix_space = pre.add_prefix_space;
  std::string space = "\xE2\x96\x81";  // "▁": what the vocabulary writes for a space (character level)
  for (const auto& s : m.norm)
    if (s.kind == detail::NormStep::kReplace && s.a == " ") space = s.b;
  if (pre.metaspace) {
    space = pre.replacement;
    const json& ms = j["pre_tokenizer"].contains("pretokenizers") ? j["pre_tokenizer"]["pretokenizers"][0] : j["pre_tokenizer"];
    std::string scheme = ms.value("prepend_scheme", std::string(ms.value("add_prefix_space", true) ? "always" : "never"));
    if (scheme != "always" && scheme != "first" && scheme != "never")
      bad(path, "Metaspace prepend_scheme \"" + scheme + "\" is unknown");
    m.norm.push_back({detail::NormStep::kReplace, " ", pre.replacement});
    if (scheme != "never") m.norm.push_back({detail::NormStep::kMetaPrepend, pre.replacement, "", scheme == "first"});
  }
  for (const auto& s : m.norm)
    if ((s.kind == detail::NormStep::kPrepend || s.kind == detail::NormStep::kMetaPrepend) && s.a == space)
      m.strip_decoded_space = true;
  if (m.byte_level && pre.metaspace) bad(path, "ByteLevel and Metaspace together are not supported");

  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) bad(path, "the id of token " + detail::printable(it.key()) + " is not an integer");
    if (m.byte_level) b.add_token(path, it.key(), it.value().get<int64_t>());
    else b.add_piece(path, it.key(), it.value().get<int64_t>(), space);
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        bad(path, "an entry of added_tokens lacks \"id\" or \"content\"");
      b.add_added(path, a["content"].get<std::string>(), a["id"].get<int64_t>(), a.value("special", true),
                  a.value("lstrip", false), a.value("rstrip", false));
    }
  }
  b.check_vocabulary(path);
  size_t n = 0;
  for (const auto& mg : model["merges"]) {
    ++n;
    std::string where = "merge " + std::to_string(n);
    if (mg.is_string()) {  // "left right" (tokenizers < 0.20)
      const std::string& s = mg.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
        bad(path, where + ": expected \"left right\", got \"" + detail::printable(s) + "\"");
      b.add_merge(path, n, std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1));
    } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {  // ["left", "right"]
      b.add_merge(path, n, mg[0].get<std::string>(), mg[1].get<std::string>());
    } else {
      bad(path, where + " is neither \"left right\" nor [\"left\", \"right\"]");
    }
  }
  if (b.merges.empty() && m.byte_level) bad(path, "model.merges is empty");
  m.ignore_merges = model.value("ignore_merges", false);
  if (!m.byte_level) {
    m.byte_fallback = model.value("byte_fallback", false);
    m.fuse_unk = model.value("fuse_unk", false);
    const json& u = model.contains("unk_token") ? model["unk_token"] : json();
    if (u.is_string()) {
      auto it = b.spelled_id.find(u.get<std::string>());
      if (it == b.spelled_id.end()) {
        auto it2 = m.id_of.find(u.get<std::string>());
        if (it2 == m.id_of.end())
          bad(path, "model.unk_token \"" + detail::printable(u.get<std::string>()) + "\" is not in the vocabulary");
        m.unk = it2->second;
      } else {
        m.unk = it->second;
      }
    }
  }
  auto result = b.finish(path, path, pre.patterns);

  // BOS / EOS: tokenizer_config.json beside the file (what transformers uses) wins over the post-processor.
  int64_t bos = -1, eos = -1;
  bool templ = false;
  if (j.contains("post_processor")) read_template(j["post_processor"], bos, eos, templ);
  if (templ) {
    // The template's ids index the vocabulary: one outside it would be emitted as is (or, past 2^31, wrapped
    // to another token by the int32 below).
    for (auto [id, where] : {std::pair<int64_t, const char*>{bos, "before"}, {eos, "after"}})
      if (id >= 0 && (id >= static_cast<int64_t>(result->present.size()) || !result->present[static_cast<size_t>(id)]))
        bad(path, std::string("post_processor: the special token ") + where + " $A has id " + std::to_string(id) +
                      ", which is not a token of the vocabulary (" + std::to_string(result->present.size()) + " ids)");
    result->add_bos_default = bos >= 0;
    result->add_eos_default = eos >= 0;
    if (bos >= 0) result->bos = static_cast<int32_t>(bos);
    if (eos >= 0) result->eos = static_cast<int32_t>(eos);
  }
  std::string cfg_path = json_dir_of(path) + "/tokenizer_config.json";
  if (detail::is_regular_file(cfg_path)) {
    json cfg = detail::parse_json(cfg_path);
    if (cfg.is_object()) {
      auto id_of = [&](const char* key) -> int64_t {
        std::string name = config_token(cfg, key);
        if (name.empty()) return -1;
        auto it = result->id_of.find(name);
        if (it == result->id_of.end())
          bad(cfg_path, std::string(key) + " \"" + detail::printable(name) + "\" is not a token of " + path);
        return it->second;
      };
      int64_t cb = id_of("bos_token"), ce = id_of("eos_token");
      if (cb >= 0) result->bos = static_cast<int32_t>(cb);
      if (ce >= 0) result->eos = static_cast<int32_t>(ce);
      if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
        result->add_bos_default = cfg["add_bos_token"].get<bool>();
      if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
        result->add_eos_default = cfg["add_eos_token"].get<bool>();
      if (result->add_bos_default && result->bos < 0) bad(cfg_path, "add_bos_token is true but there is no bos_token");
      if (result->add_eos_default && result->eos < 0) bad(cfg_path, "add_eos_token is true but there is no eos_token");
    }
  }
  return std::make_unique<BpeTokenizer>(result);
}

}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_tokenizer_json(const std::string& path) {
  // The reader checks the types it depends on; a value of an unexpected JSON type anywhere else (found by
  // fuzz_bpe_files: "model": {"type": 7}) makes nlohmann throw type_error — still the file's fault, so it
  // becomes the same one-line FormatError as every other defect of the file.
  try {
    return read_tokenizer_json(path);
  } catch (const nlohmann::json::exception& e) {
    std::string msg = e.what();
    auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw FormatError(path, "unexpected JSON structure: " + msg);
  }
}

}  // namespace vocablens
