// Text -> one token id (see include/vocablens/token_id.hpp).
#include "vocablens/token_id.hpp"

#include "vocablens/tokenizer.hpp"

namespace vocablens {

std::optional<int64_t> single_token_id(const Tokenizer& tok, std::string_view text, std::vector<int64_t>* pieces) {
  if (pieces) pieces->clear();
  if (auto id = tok.token_to_id(text)) return id;
  EncodeOptions plain;
  plain.add_bos = false;
  std::vector<int64_t> ids = tok.encode(text, plain);
  std::optional<int64_t> one;
  if (ids.size() == 1) one = ids[0];
  if (pieces) *pieces = std::move(ids);
  return one;
}

std::string display_ids(const Tokenizer& tok, const std::vector<int64_t>& ids, size_t max, bool ellipsis) {
  std::string how;
  for (size_t i = 0; i < ids.size() && i < max; ++i) how += (i ? " " : "") + tok.display(ids[i]);
  if (ellipsis && ids.size() > max) how += " ...";
  return how;
}

}  // namespace vocablens
