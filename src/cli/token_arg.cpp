// Token and prompt flags of the intervention commands (see token_arg.hpp).
#include "cli/token_arg.hpp"

#include <cctype>

#include "vocablens/error.hpp"
#include "vocablens/token_id.hpp"

namespace vocablens::cli {

int64_t resolve_token(const Tokenizer& tok, const std::string& s, const std::string& flag) {
  if (s.empty()) throw UsageError(flag + " is empty: give one token, e.g. " + flag + " \" Paris\" (or #ID)");
  if (s.size() > 1 && s[0] == '#') {
    bool digits = s.size() < 12;
    for (size_t i = 1; i < s.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(s[i]));
    if (digits) return std::stoll(s.substr(1));
  }
  std::vector<int64_t> ids;
  if (auto id = single_token_id(tok, s, &ids)) return *id;  // the one text -> token rule (token_id.hpp)
  throw UsageError(flag + " '" + s + "' is " + std::to_string(ids.size()) + " tokens: " + display_ids(tok, ids) +
                   " (it must be a single token of " + tok.source() + "; #ID names one by id)");
}

std::string first_columns(const std::string& s, size_t width) {
  size_t n = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == width) break;
      ++n;
    }
  }
  return s.substr(0, i);
}

std::vector<int64_t> encode_prompt(const Tokenizer& tok, const std::string& text, const std::string& flag, int bos) {
  if (text.empty()) throw UsageError(flag + " is empty: it needs at least one character of text");
  EncodeOptions eo;
  if (bos == 0) eo.add_bos = false;
  if (bos == 1) eo.add_bos = true;
  auto ids = tok.encode(text, eo);
  if (ids.empty()) throw UsageError(flag + " encodes to no tokens");
  return ids;
}

}  // namespace vocablens::cli
