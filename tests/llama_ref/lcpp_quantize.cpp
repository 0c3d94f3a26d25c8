// llama.cpp's own quantizer (llama_model_quantize of the prebuilt libllama) on a GGUF file, for quantized fixtures.
//
//   lcpp_quantize BINS_DIR IN.gguf OUT.gguf FTYPE      # FTYPE: llama_ftype's number (7 = Q8_0, 15 = Q4_K_M)
//
// Built like lcpp_logits.cpp (scripts/setup_llama_ref.sh's command, this file in place of that one).
#include <cstdio>
#include <cstdlib>

#include "ggml-backend.h"
#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: lcpp_quantize BINS_DIR IN.gguf OUT.gguf FTYPE\n");
    return 2;
  }
  ggml_backend_load_all_from_path(argv[1]);
  llama_backend_init();
  llama_model_quantize_params p = llama_model_quantize_default_params();
  p.ftype = static_cast<llama_ftype>(std::atoi(argv[4]));
  p.nthread = 1;
  return static_cast<int>(llama_model_quantize(argv[2], argv[3], &p));
}
