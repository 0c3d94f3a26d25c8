// spm_shim — a C interface to Debian's libsentencepiece, built as its own shared library and loaded by
// sentencepiece_tokenizer.cpp with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) only when a SentencePiece model is used.
// Why: libsentencepiece.so.0 embeds protobuf-lite 3.14 and exports its symbols; LibTorch loads libprotobuf 3.21.
// Linked into one process normally, the two protobufs interpose each other and the program crashes at start-up
// (or protobuf aborts on the version check). Loaded late, locally and deep-bound, libsentencepiece keeps its own.
#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {

struct vl_spm {
  sentencepiece::SentencePieceProcessor sp;
};

/// Returns a handle, or nullptr with *err set to a malloc'd message.
vl_spm* vl_spm_load(const char* proto, size_t n, char** err) {
  auto* h = new vl_spm;
  auto st = h->sp.LoadFromSerializedProto(std::string(proto, n));
  if (!st.ok()) {
    *err = strdup(st.ToString().c_str());
    delete h;
    return nullptr;
  }
  return h;
}
void vl_spm_free(vl_spm* h) { delete h; }
int vl_spm_size(const vl_spm* h) { return h->sp.GetPieceSize(); }
int vl_spm_bos(const vl_spm* h) { return h->sp.bos_id(); }
int vl_spm_eos(const vl_spm* h) { return h->sp.eos_id(); }
const char* vl_spm_piece(const vl_spm* h, int id) { return h->sp.IdToPiece(id).c_str(); }
float vl_spm_score(const vl_spm* h, int id) { return h->sp.GetScore(id); }
/// bit 0 control, 1 unknown, 2 byte, 3 unused
int vl_spm_flags(const vl_spm* h, int id) {
  return (h->sp.IsControl(id) ? 1 : 0) | (h->sp.IsUnknown(id) ? 2 : 0) | (h->sp.IsByte(id) ? 4 : 0) |
         (h->sp.IsUnused(id) ? 8 : 0);
}
int vl_spm_piece_to_id(const vl_spm* h, const char* piece, size_t n) { return h->sp.PieceToId(std::string(piece, n)); }
/// Encodes; returns the number of ids (written to a malloc'd *ids), or -1 with *err set.
long vl_spm_encode(const vl_spm* h, const char* text, size_t n, int** ids, char** err) {
  std::vector<int> v;
  auto st = h->sp.Encode(std::string(text, n), &v);
  if (!st.ok()) {
    *err = strdup(st.ToString().c_str());
    return -1;
  }
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (v.size() + 1)));
  std::memcpy(*ids, v.data(), sizeof(int) * v.size());
  return static_cast<long>(v.size());
}
/// Decodes; returns a malloc'd string of *len bytes.
char* vl_spm_decode(const vl_spm* h, const int* ids, size_t n, size_t* len) {
  std::string s = h->sp.DecodeIds(std::vector<int>(ids, ids + n));
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(out, s.data(), s.size());
  *len = s.size();
  return out;
}
void vl_spm_release(void* p) { std::free(p); }

}  // extern "C"
