// Benchmark: load a GPT-2-small-sized safetensors checkpoint (12 layers, d 768, V 50257; random weights
// written by this program) and report load time and resident memory before and after touching weights.
// Goal: load < 0.3 s and no copy of the weights — RSS grows only as pages are touched.
//   ninja -C build bench_load && ./build/bench_load [/tmp/vocablens-gpt2-small]
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include <ATen/Parallel.h>

#include "vocablens/model.hpp"

namespace {

long status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
  return -1;
}

void write_gpt2_small(const std::string& dir) {
  const int64_t L = 12, d = 768, V = 50257, n_ctx = 1024, m = 3072;
  std::filesystem::create_directories(dir);
  nlohmann::json cfg = {{"architectures", {"GPT2LMHeadModel"}},
                        {"model_type", "gpt2"},
                        {"n_layer", L},
                        {"n_embd", d},
                        {"n_head", 12},
                        {"n_positions", n_ctx},
                        {"vocab_size", V},
                        {"layer_norm_epsilon", 1e-5},
                        {"activation_function", "gelu_new"}};
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  std::vector<std::pair<std::string, std::vector<int64_t>>> t = {
      {"wte.weight", {V, d}}, {"wpe.weight", {n_ctx, d}}, {"ln_f.weight", {d}}, {"ln_f.bias", {d}}};
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "h." + std::to_string(i) + ".";
    for (auto& [n, s] : std::vector<std::pair<std::string, std::vector<int64_t>>>{{"ln_1.weight", {d}},
                                                                                  {"ln_1.bias", {d}},
                                                                                  {"attn.c_attn.weight", {d, 3 * d}},
                                                                                  {"attn.c_attn.bias", {3 * d}},
                                                                                  {"attn.c_proj.weight", {d, d}},
                                                                                  {"attn.c_proj.bias", {d}},
                                                                                  {"ln_2.weight", {d}},
                                                                                  {"ln_2.bias", {d}},
                                                                                  {"mlp.c_fc.weight", {d, m}},
                                                                                  {"mlp.c_fc.bias", {m}},
                                                                                  {"mlp.c_proj.weight", {m, d}},
                                                                                  {"mlp.c_proj.bias", {d}},
                                                                                  {"attn.bias", {1, 1, n_ctx, n_ctx}}})
      t.push_back({p + n, s});
  }
  nlohmann::json h = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t off = 0;
  for (auto& [n, s] : t) {
    uint64_t k = 4;
    for (auto x : s) k *= static_cast<uint64_t>(x);
    h[n] = {{"dtype", "F32"}, {"shape", s}, {"data_offsets", {off, off + k}}};
    off += k;
  }
  std::string hs = h.dump();
  while (hs.size() % 8) hs.push_back(' ');
  std::ofstream f(dir + "/model.safetensors", std::ios::binary);
  uint64_t hl = hs.size();
  f.write(reinterpret_cast<const char*>(&hl), 8);
  f.write(hs.data(), static_cast<std::streamsize>(hs.size()));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 0.02f);
  std::vector<float> buf(1 << 20);
  for (uint64_t left = off / 4; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
    for (size_t i = 0; i < n; ++i) buf[i] = nd(rng);
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n * 4));
    left -= n;
  }
}

}  // namespace

int main(int argc, char** argv) {
  vocablens::init_runtime();
  std::string dir = argc > 1 ? argv[1] : "/tmp/vocablens-gpt2-small";
  if (!std::filesystem::exists(dir + "/model.safetensors")) {
    fmt::print("writing random GPT-2-small checkpoint to {} ...\n", dir);
    write_gpt2_small(dir);
  }
  auto file_mb = std::filesystem::file_size(dir + "/model.safetensors") / 1e6;
  long rss0 = status_kb("VmRSS:");
  auto t0 = std::chrono::steady_clock::now();
  vocablens::Model m = vocablens::load_model(dir);
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  long rss1 = status_kb("VmRSS:");
  auto t1 = std::chrono::steady_clock::now();
  auto out = m.forward(at::arange(16, at::kLong));  // touches every layer's weights and W_U
  double fwd_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  long rss2 = status_kb("VmRSS:");
  fmt::print("checkpoint      {:.0f} MB, {} parameters\n", file_mb, m.parameter_count());
  fmt::print("load_model      {:.4f} s   (goal < 0.3 s)\n", load_s);
  fmt::print("RSS before load {:.1f} MB\n", rss0 / 1024.0);
  fmt::print("RSS after load  {:.1f} MB  (+{:.1f} MB: weights are mapped, not copied)\n", rss1 / 1024.0, (rss1 - rss0) / 1024.0);
  fmt::print("RSS after a 16-token forward {:.1f} MB (+{:.1f} MB as pages are touched), forward {:.3f} s\n", rss2 / 1024.0,
             (rss2 - rss1) / 1024.0, fwd_s);
  auto t2 = std::chrono::steady_clock::now();
  m.forward(at::arange(16, at::kLong));
  fmt::print("second forward  {:.3f} s (pages already resident; threads {})\n",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t2).count(), at::get_num_threads());
  fmt::print("peak RSS        {:.1f} MB\n", status_kb("VmHWM:") / 1024.0);
  return 0;
}
