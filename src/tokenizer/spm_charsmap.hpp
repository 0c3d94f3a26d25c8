// src/tokenizer/spm_charsmap.hpp — checks a SentencePiece model's precompiled_charsmap before
// libsentencepiece's normaliser walks it.
//
// The charsmap is <u32 trie size><Darts double-array trie><NUL-terminated replacement strings>. The
// normaliser follows the trie with no bounds checks (each step reads unit[base ^ byte]; a leaf's value is
// an offset into the strings, read up to a NUL), so a corrupted unit makes `tokenize` read far outside the
// blob (SIGSEGV). check_spm_model walks every node the normaliser (and the decoder's denormaliser) can reach
// from the root, for every byte value, and refuses the model unless each read stays inside the blob.
//
//   detail::check_spm_model(proto_bytes, "tokenizer.model");   // FormatError(source, ...) or nothing
//
// Cost: 256 steps per reachable node (the nmt_nfkc charsmap: ~60 k units, a few ms).
#pragma once
#include <string>
#include <string_view>

namespace vocablens::detail {

/// The precompiled_charsmap of normalizer_spec (ModelProto field 3) and denormalizer_spec (field 5),
/// field 2 of each, as protobuf merges repeated messages (the last value wins); empty when absent.
struct SpmCharsmaps {
  std::string_view normalizer, denormalizer;
};

/// Reads the two charsmaps from a serialized ModelProto. Throws FormatError(source, ...) on wire data it
/// cannot walk (truncated lengths, groups, bad wire types): libsentencepiece would refuse those or they
/// could hide a charsmap from this check.
SpmCharsmaps spm_charsmaps(std::string_view proto, const std::string& source);

/// Throws FormatError(source, "<which>: precompiled_charsmap ...") unless every lookup the normaliser can
/// make in `blob` stays inside it. An empty blob (no charsmap) is fine.
void check_spm_charsmap(std::string_view blob, const std::string& source, const std::string& which);

/// spm_charsmaps + check_spm_charsmap on both.
void check_spm_model(std::string_view proto, const std::string& source);

}  // namespace vocablens::detail
