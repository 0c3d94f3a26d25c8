// llama.cpp's prompt forward time on a GGUF (prebuilt libllama of @node-llama-cpp/linux-x64@3.22.1), for
// bench/run_gguf_bench.sh:  lcpp_bench MODEL.gguf N_TOKENS THREADS REPEAT
// N random ids (seeded), all in one batch, logits of the last position only; F32 KV cache, no flash attention.
// Prints one line per repeat: seconds and tokens/s.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ggml-backend.h"
#include "llama.h"

static double cpu_s() {  // CPU seconds of the process, all threads (llama.cpp's workers spin while waiting)
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: lcpp_bench MODEL.gguf N THREADS REPEAT\n");
    return 2;
  }
  const char* bins = getenv("LLAMA_BINS");
  ggml_backend_load_all_from_path(bins ? bins : ".");
  llama_backend_init();
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* m = llama_model_load_from_file(argv[1], mp);
  if (!m) {
    fprintf(stderr, "load failed\n");
    return 1;
  }
  const int n = atoi(argv[2]), th = atoi(argv[3]), rep = atoi(argv[4]);
  auto cp = llama_context_default_params();
  cp.n_ctx = n;
  cp.n_batch = n;
  cp.n_ubatch = n;
  cp.n_threads = th;
  cp.n_threads_batch = th;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* c = llama_init_from_model(m, cp);
  const int V = llama_vocab_n_tokens(llama_model_get_vocab(m));
  for (int r = 0; r < rep; ++r) {
    llama_memory_clear(llama_get_memory(c), true);
    llama_batch b = llama_batch_init(n, 0, 1);
    srand(1);
    for (int i = 0; i < n; ++i) {
      b.token[i] = 3 + rand() % (V - 3);
      b.pos[i] = i;
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = i == n - 1;
    }
    b.n_tokens = n;
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_s();
    if (llama_decode(c, b) != 0) {
      fprintf(stderr, "decode failed\n");
      return 1;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("llama.cpp %d tokens %d threads: %.3f s %.2f tok/s cpu %.3f s\n", n, th, s, n / s, cpu_s() - c0);
    llama_batch_free(b);
  }
  return 0;
}
