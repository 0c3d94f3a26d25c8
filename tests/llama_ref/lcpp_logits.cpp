// llama.cpp as an independent reference: all-position logits (and each block's output residual) of a GGUF file.
//
//   lcpp_logits BINS_DIR MODEL.gguf IDS.txt OUT.f32 [LAYERS.f32 [ROUTER_PREFIX]]
//
// BINS_DIR: the prebuilt libraries of npm @node-llama-cpp/linux-x64 (its CPU backend is a dynamically loaded
// variant, so backends are loaded from there). IDS.txt: whitespace-separated token ids. OUT.f32: float32
// [T, V]. LAYERS.f32 (optional): float32 [n_layer, T, d_model], the tensors llama.cpp's graph names
// "l_out-<layer>" (the residual stream leaving each block), captured through the cb_eval callback.
// ROUTER_PREFIX (mixtures of experts): PREFIX.logits.f32 float32 [n_layer, T, n_expert], the router logits its
// graph names "ffn_moe_logits-<layer>", and PREFIX.order.i32 int32 [n_layer, T, n_expert], "ffn_moe_argsort-<layer>":
// every expert by descending probability, whose first n_expert_used are the experts llama.cpp runs. A biased router
// (blk.0.ffn_gate_inp.bias in the file: GPT-OSS) selects on its logits with the bias added, which its graph names
// "ffn_moe_logits_biased-<layer>", or, under softmax-weight gating (probs = logits, then named), "ffn_moe_probs-<layer>":
// those are written instead.
// Exact settings: F32 KV cache, flash attention off, one thread, one batch with every position's logits.
// Built by scripts/setup_llama_ref.sh against the headers of the same llama.cpp release (node-llama-cpp@3.22.1).
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "gguf.h"
#include "llama.h"

namespace {

struct Capture {
  int n_layer = 0, n_embd = 0, n_tokens = 0;
  bool router = false;
  bool biased_router = false;                 // the file's router has a bias (see the header)
  std::map<int, std::vector<float>> layers;   // layer -> [T, d]
  std::map<int, std::vector<float>> logits;   // layer -> [T, n_expert]
  std::map<int, std::vector<int32_t>> order;  // layer -> [T, n_expert]
  int n_expert = 0;
};

bool layer_of(const char* name, const char* prefix, int* layer) {
  const size_t n = std::strlen(prefix);
  return std::strncmp(name, prefix, n) == 0 && std::sscanf(name + n, "%d", layer) == 1;
}

template <class T>
bool take(struct ggml_tensor* t, int rows, std::vector<T>* out) {
  if (t->ne[1] != rows || !ggml_is_contiguous(t)) return false;
  out->resize(static_cast<size_t>(t->ne[0]) * rows);
  ggml_backend_tensor_get(t, out->data(), 0, out->size() * sizeof(T));
  return true;
}

bool on_eval(struct ggml_tensor* t, bool ask, void* user) {
  auto* cap = static_cast<Capture*>(user);
  int layer = -1;
  const bool l_out = layer_of(t->name, "l_out-", &layer);
  // the biased logits come later in the graph than the unbiased ones, so they overwrite them
  const bool logits = cap->router && (layer_of(t->name, "ffn_moe_logits-", &layer) ||
                                      (cap->biased_router && (layer_of(t->name, "ffn_moe_logits_biased-", &layer) ||
                                                              layer_of(t->name, "ffn_moe_probs-", &layer))));
  const bool order = cap->router && layer_of(t->name, "ffn_moe_argsort-", &layer);
  if (!l_out && !logits && !order) return !ask ? true : false;
  if (ask) return true;  // we want this tensor's data once computed
  if (logits && t->type == GGML_TYPE_F32 && take(t, cap->n_tokens, &cap->logits[layer]))
    cap->n_expert = static_cast<int>(t->ne[0]);
  if (order && t->type == GGML_TYPE_I32) take(t, cap->n_tokens, &cap->order[layer]);
  if (!l_out || t->type != GGML_TYPE_F32 || t->ne[0] != cap->n_embd || t->ne[1] != cap->n_tokens) return true;
  std::vector<float> v(static_cast<size_t>(cap->n_embd) * cap->n_tokens);
  ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
  cap->layers[layer] = std::move(v);
  return true;
}

// PREFIX.logits.f32 and PREFIX.order.i32, every layer's; false (with a message) when a layer exposed none.
bool write_router(const Capture& cap, const std::string& prefix) {
  FILE* lf = std::fopen((prefix + ".logits.f32").c_str(), "wb");
  FILE* of = std::fopen((prefix + ".order.i32").c_str(), "wb");
  if (!lf || !of) return false;
  for (int l = 0; l < cap.n_layer; ++l) {
    auto a = cap.logits.find(l);
    auto b = cap.order.find(l);
    if (a == cap.logits.end() || b == cap.order.end() || a->second.size() != b->second.size()) {
      std::fprintf(stderr, "llama.cpp exposed no ffn_moe_logits-%d / ffn_moe_argsort-%d of [T, n_expert]\n", l, l);
      return false;
    }
    std::fwrite(a->second.data(), sizeof(float), a->second.size(), lf);
    std::fwrite(b->second.data(), sizeof(int32_t), b->second.size(), of);
  }
  std::fclose(lf);
  std::fclose(of);
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
  // LCPP_NO_REPACK=1: no repacked weight buffers (llama.cpp's CPU backend otherwise interleaves Q4_0 / Q4_K / IQ4_NL
  // rows for its own GEMMs, which sum the same integer products in another float order).
  if (const char* e = std::getenv("LCPP_NO_REPACK")) mp.use_extra_bufts = std::string(e) != "1";
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
  cap.router = argc > 6;
  {
    gguf_init_params gp = {/*no_alloc=*/true, /*ctx=*/nullptr};
    if (gguf_context* g = gguf_init_from_file(argv[2], gp)) {
      cap.biased_router = gguf_find_tensor(g, "blk.0.ffn_gate_inp.bias") >= 0;
      gguf_free(g);
    }
  }
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
  if (argc > 6 && !write_router(cap, argv[6])) return 1;
  std::printf("T=%zu V=%d layers=%d d=%d experts=%d\n", ids.size(), V, cap.n_layer, cap.n_embd, cap.n_expert);
  llama_batch_free(b);
  llama_free(c);
  llama_model_free(m);
  return 0;
}
