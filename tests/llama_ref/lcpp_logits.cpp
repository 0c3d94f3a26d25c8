// llama.cpp as an independent reference: all-position logits (and each block's output residual) of a GGUF file.
//
//   lcpp_logits BINS_DIR MODEL.gguf IDS.txt OUT.f32 [LAYERS.f32]
//
// BINS_DIR: the prebuilt libraries of npm @node-llama-cpp/linux-x64 (its CPU backend is a dynamically loaded
// variant, so backends are loaded from there). IDS.txt: whitespace-separated token ids. OUT.f32: float32
// [T, V]. LAYERS.f32 (optional): float32 [n_layer, T, d_model], the tensors llama.cpp's graph names
// "l_out-<layer>" (the residual stream leaving each block), captured through the cb_eval callback.
// Exact settings: F32 KV cache, flash attention off, one thread, one batch with every position's logits.
// Built by scripts/setup_llama_ref.sh against the headers of the same llama.cpp release (node-llama-cpp@3.22.1).
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

struct Capture {
  int n_layer = 0, n_embd = 0, n_tokens = 0;
  std::map<int, std::vector<float>> layers;  // layer -> [T, d]
};

bool layer_of(const char* name, int* layer) {
  return std::strncmp(name, "l_out-", 6) == 0 && std::sscanf(name + 6, "%d", layer) == 1;
}

bool on_eval(struct ggml_tensor* t, bool ask, void* user) {
  auto* cap = static_cast<Capture*>(user);
  int layer = -1;
  if (!layer_of(t->name, &layer)) return !ask ? true : false;
  if (ask) return true;  // we want this tensor's data once computed
  if (t->type != GGML_TYPE_F32 || t->ne[0] != cap->n_embd || t->ne[1] != cap->n_tokens) return true;
  std::vector<float> v(static_cast<size_t>(cap->n_embd) * cap->n_tokens);
  ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
  cap->layers[layer] = std::move(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: lcpp_logits BINS_DIR MODEL.gguf IDS.txt OUT.f32 [LAYERS.f32]\n");
    return 2;
  }
  ggml_backend_load_all_from_path(argv[1]);
  llama_backend_init();
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* m = llama_model_load_from_file(argv[2], mp);
  if (!m) {
    std::fprintf(stderr, "%s: llama.cpp could not load the model\n", argv[2]);
    return 1;
  }
  std::vector<llama_token> ids;
  {
    std::ifstream f(argv[3]);
    int x;
    while (f >> x) ids.push_back(x);
  }
  if (ids.empty()) {
    std::fprintf(stderr, "%s: no token ids\n", argv[3]);
    return 1;
  }
  Capture cap;
  cap.n_layer = llama_model_n_layer(m);
  cap.n_embd = llama_model_n_embd(m);
  cap.n_tokens = static_cast<int>(ids.size());
  auto cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(ids.size());
  cp.n_batch = cp.n_ubatch = cp.n_ctx;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  if (argc > 5) {
    cp.cb_eval = on_eval;
    cp.cb_eval_user_data = &cap;
  }
  llama_context* c = llama_init_from_model(m, cp);
  if (!c) {
    std::fprintf(stderr, "llama.cpp could not create a context\n");
    return 1;
  }
  llama_batch b = llama_batch_init(static_cast<int>(ids.size()), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    b.token[i] = ids[i];
    b.pos[i] = static_cast<llama_pos>(i);
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = static_cast<int>(ids.size());
  if (llama_decode(c, b) != 0) {
    std::fprintf(stderr, "llama_decode failed\n");
    return 1;
  }
  const int V = llama_vocab_n_tokens(llama_model_get_vocab(m));
  FILE* o = std::fopen(argv[4], "wb");
  if (!o) return 1;
  for (size_t i = 0; i < ids.size(); ++i) std::fwrite(llama_get_logits_ith(c, static_cast<int>(i)), sizeof(float), V, o);
  std::fclose(o);
  if (argc > 5) {
    FILE* lf = std::fopen(argv[5], "wb");
    if (!lf) return 1;
    for (int l = 0; l < cap.n_layer; ++l) {
      auto it = cap.layers.find(l);
      if (it == cap.layers.end()) {
        std::fprintf(stderr, "llama.cpp exposed no l_out-%d\n", l);
        return 1;
      }
      std::fwrite(it->second.data(), sizeof(float), it->second.size(), lf);
    }
    std::fclose(lf);
  }
  std::printf("T=%zu V=%d layers=%d d=%d\n", ids.size(), V, cap.n_layer, cap.n_embd);
  llama_batch_free(b);
  llama_free(c);
  llama_model_free(m);
  return 0;
}
