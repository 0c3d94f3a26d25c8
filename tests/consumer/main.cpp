// The installed package in use: load a model, tokenize a prompt, run it, compare with a reference.
//   consumer MODEL_DIR REFERENCE_LOGITS.npy
// Prints the token ids, the greatest |logit - reference| and "consumer: OK" (exit 0) when it is <= 1e-4.
#include <vocablens/vocablens.hpp>  // the umbrella header: every public header compiles in a consumer

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer MODEL_DIR REFERENCE_LOGITS.npy\n");
    return 2;
  }
  try {
    vocablens::Model m = vocablens::load_model(argv[1]);
    auto tok = vocablens::load_tokenizer_for(argv[1]);
    std::vector<int64_t> ids = tok->encode("The Eiffel Tower is in the city of");
    std::printf("ids:");
    for (int64_t id : ids) std::printf(" %lld", static_cast<long long>(id));
    std::printf("\n");
    at::Tensor logits = m.forward(at::tensor(ids, at::kLong)).logits[0];  // [T, V]
    vocablens::NdArray ref = vocablens::read_npy(argv[2]);                // [T, V] float32
    at::Tensor r = at::from_blob(ref.bytes.data(), ref.shape, at::kFloat);
    double diff = (logits - r).abs().max().item<double>();
    std::printf("layers: %lld, max |logits - reference|: %.3g\n", static_cast<long long>(m.config().n_layers), diff);
    if (!(diff <= 1e-4)) return 1;
    std::printf("consumer: OK\n");
  } catch (const vocablens::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
