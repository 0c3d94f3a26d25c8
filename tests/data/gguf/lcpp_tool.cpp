// Fixture generator helper (not part of the build): llama.cpp's own quantizer and forward, from the
// prebuilt libllama of @node-llama-cpp/linux-x64@3.22.1.
//   lcpp_tool quantize IN.gguf OUT.gguf FTYPE      (FTYPE: llama_ftype number, e.g. 7 = Q8_0, 15 = Q4_K_M)
//   lcpp_tool logits MODEL.gguf IDS.txt OUT.f32    (all positions, float32 [T, V]; F32 KV, no flash attn, 1 thread)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: see source\n");
    return 2;
  }
  const char* bins = getenv("LLAMA_BINS");
  ggml_backend_load_all_from_path(bins ? bins : ".");
  llama_backend_init();
  if (!strcmp(argv[1], "quantize")) {
    auto p = llama_model_quantize_default_params();
    p.ftype = static_cast<llama_ftype>(atoi(argv[4]));
    p.nthread = 1;
    return llama_model_quantize(argv[2], argv[3], &p) == 0 ? 0 : 1;
  }
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* m = llama_model_load_from_file(argv[2], mp);
  if (!m) {
    fprintf(stderr, "load failed\n");
    return 1;
  }
  std::vector<llama_token> ids;
  {
    std::ifstream f(argv[3]);
    int x;
    while (f >> x) ids.push_back(x);
  }
  auto cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)ids.size();
  cp.n_batch = cp.n_ctx;
  cp.n_ubatch = cp.n_ctx;
  cp.n_threads = 1;
  cp.n_threads_batch = 1;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* c = llama_init_from_model(m, cp);
  llama_batch b = llama_batch_init((int)ids.size(), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    b.token[i] = ids[i];
    b.pos[i] = (llama_pos)i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = (int)ids.size();
  if (llama_decode(c, b) != 0) {
    fprintf(stderr, "decode failed\n");
    return 1;
  }
  int V = llama_vocab_n_tokens(llama_model_get_vocab(m));
  FILE* o = fopen(argv[4], "wb");
  for (size_t i = 0; i < ids.size(); ++i) fwrite(llama_get_logits_ith(c, (int)i), sizeof(float), V, o);
  fclose(o);
  printf("T=%zu V=%d\n", ids.size(), V);
  return 0;
}
