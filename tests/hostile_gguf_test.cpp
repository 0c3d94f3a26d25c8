// tests/hostile_gguf_test.cpp — hostile inputs that need the model runtime: GGUF files edited in place (a NaN
// block scale, counts that overflow or that no tensor backs) must be refused with one line, as their
// safetensors twins are; rank-deficient matrices must get their true spectrum (numpy's SVD as reference).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"
#include "vocablens/nonfinite.hpp"
#include "vocablens/spectrum.hpp"
#include "npy_tensor.hpp"

namespace {

const std::string kDir = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/";

std::string copy_of(const std::string& name) {
  std::string bytes = vl_test::read_file(kDir + name);
  REQUIRE(bytes.size() > 1000);
  return bytes;
}

// Sets the u32 value of metadata `key` (its bytes: u64 length, the key, u32 type 4 = UINT32, the value).
void set_u32(std::string& file, const std::string& key, uint32_t value) {
  std::string pat(8, '\0');
  const uint64_t n = key.size();
  std::memcpy(&pat[0], &n, 8);
  pat += key;
  const size_t at = file.find(pat);
  REQUIRE(at != std::string::npos);
  uint32_t type;
  std::memcpy(&type, file.data() + at + pat.size(), 4);
  REQUIRE(type == 4);
  std::memcpy(&file[at + pat.size() + 4], &value, 4);
}

std::string write_gguf(const std::string& bytes, const std::string& name) {
  std::string p = vl_test::temp_dir("gguf-hostile") + "/" + name;
  vl_test::write_file(p, bytes);
  return p;
}

std::string model_load_error(const std::string& path) {
  try {
    vocablens::load_model(path);
  } catch (const vocablens::Error& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("GGUF: a NaN in a Q4_0 block scale, or in an F32 embedding, is refused at load like safetensors", "[hostile][gguf]") {
  // Q4_0 blocks are 18 bytes: an f16 scale d, then 16 bytes of 4-bit quants (ggml-common.h's block_q4_0).
  std::string bytes = copy_of("llamak-q4_0.gguf");
  {
    vocablens::GgufFile g = vocablens::read_gguf(kDir + "llamak-q4_0.gguf");
    const vocablens::GgufTensorInfo* t = nullptr;
    for (const auto& ti : g.tensors)
      if (ti.type == vocablens::GgmlType::Q4_0 && ti.name.find("ffn_down") != std::string::npos) t = &ti;
    REQUIRE(t != nullptr);
    const size_t block = 5;  // block 5 of the first row: values 160 .. 191
    const uint16_t nan_f16 = 0x7E00;
    std::memcpy(&bytes[t->offset + block * 18], &nan_f16, 2);
    const std::string p = write_gguf(bytes, "nan-scale.gguf");
    const std::string msg = model_load_error(p);
    INFO(msg);
    CHECK(msg.find(p + ": weight '" + t->name) == 0);
    CHECK(msg.find("non-finite") != std::string::npos);
    CHECK(msg.find("at [0, 160]") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
  // The F32 stories260K twin: one NaN in token_embd row 7.
  bytes = copy_of("stories260K-f32.gguf");
  {
    vocablens::GgufFile g = vocablens::read_gguf(kDir + "stories260K-f32.gguf");
    const vocablens::GgufTensorInfo* t = g.find("token_embd.weight");
    REQUIRE(t != nullptr);
    REQUIRE(t->type == vocablens::GgmlType::F32);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(&bytes[t->offset + (7 * t->ne[0] + 3) * 4], &nan, 4);
    const std::string p = write_gguf(bytes, "nan-embd.gguf");
    const std::string msg = model_load_error(p);
    INFO(msg);
    CHECK(msg.find(p + ": weight 'token_embd.weight' holds 1 non-finite value") == 0);
    CHECK(msg.find("at [7, 3]") != std::string::npos);
  }
  // The untouched files still load.
  CHECK_NOTHROW(vocablens::load_model(kDir + "llamak-q4_0.gguf"));
}

TEST_CASE("GGUF: an MXFP4 expert block with the NaN scale byte 0xFF is refused at load in one line", "[hostile][gguf]") {
  // MXFP4 blocks are 17 bytes: an E8M0 scale byte, then 16 bytes of 4-bit E2M1 codes (ggml-common.h's block_mxfp4).
  // E8M0 0xFF is NaN: libggml's row validation refuses it, and so does vocablens, naming the tensor and the value.
  const std::string src = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/gpt_oss/gpt_oss-mxfp4.gguf";
  std::string bytes = vl_test::read_file(src);
  vocablens::GgufFile g = vocablens::read_gguf(src);
  const vocablens::GgufTensorInfo* t = g.find("blk.1.ffn_down_exps.weight");
  REQUIRE(t != nullptr);
  REQUIRE(t->type == vocablens::GgmlType::MXFP4);
  REQUIRE(t->ne == std::vector<int64_t>({32, 64, 4}));  // rows of 32 values: one block per row
  const size_t row = 64 * 2 + 5;                        // expert 2, row 5
  bytes[t->offset + row * 17] = static_cast<char>(0xFF);
  const std::string p = write_gguf(bytes, "mxfp4-nan-scale.gguf");
  const std::string msg = model_load_error(p);
  INFO(msg);
  CHECK(msg.find(p + ": weight 'blk.1.ffn_down_exps.weight' holds 32 non-finite values") == 0);
  CHECK(msg.find("at [5, 0]") != std::string::npos);  // expert 2's own [64, 32] matrix
  CHECK(msg.find('\n') == std::string::npos);
  CHECK_NOTHROW(vocablens::load_model(src));
}

TEST_CASE("GGUF: head count x head size that overflows, and a context of 2^30, are bounded", "[hostile][gguf]") {
  // head_count 2^31 with key_length 64: 2^37 query rows, past what any tensor of the file could hold.
  std::string bytes = copy_of("llamak-q4_0.gguf");
  set_u32(bytes, "llama.attention.head_count", 0x80000000u);
  set_u32(bytes, "llama.attention.head_count_kv", 0x80000000u);
  std::string p = write_gguf(bytes, "heads.gguf");
  std::string msg = model_load_error(p);
  INFO(msg);
  CHECK(msg.find(p + ": ") == 0);
  CHECK(msg.find("head_count 2147483648 x head size") != std::string::npos);
  std::string out;
  const std::string cli = vl_test::cli_path();
  REQUIRE(!cli.empty());
  CHECK(vl_test::run_command("'" + cli + "' inspect '" + p + "'", out) == 1);
  INFO(out);
  CHECK(out.find("head_count 2147483648 x head size") != std::string::npos);

  // context_length 2^30: `positions --max-positions 0` (all) must not build a 2^30 x 2^30 matrix.
  bytes = copy_of("llamak-q4_0.gguf");
  set_u32(bytes, "llama.context_length", 1u << 30);
  p = write_gguf(bytes, "ctx.gguf");
  CHECK(vl_test::run_command("timeout 60 '" + cli + "' positions '" + p + "' --max-positions 0", out) == 2);
  INFO(out);
  CHECK(out.find("1073741824 positions would need") != std::string::npos);
}

TEST_CASE("spectrum: rank-deficient, constant, rank-1 and zero matrices get numpy's singular values", "[hostile][spectrum]") {
  // The matrices and their singular values (float64 SVD) from numpy, written as .npy files.
  const std::string dir = vl_test::temp_dir("spectrum-rankdef");
  const std::string py = dir + "/make.py";
  vl_test::write_file(py, R"PY(import numpy as np, sys
d = sys.argv[1]
rng = np.random.default_rng(0)
mats = {
    "ones": np.ones((200, 16)),
    "constant_pos": np.tile(rng.standard_normal(64), (512, 1)),          # a constant W_pos: every row equal
    "rank1": np.outer(rng.standard_normal(300), rng.standard_normal(48)),
    "rank3": rng.standard_normal((400, 3)) @ rng.standard_normal((3, 40)),
    "zero": np.zeros((100, 24)),
    "full": rng.standard_normal((500, 32)),
}
for name, m in mats.items():
    m = m.astype(np.float32)
    np.save(f"{d}/{name}.npy", m)
    np.save(f"{d}/{name}.sv.npy", np.linalg.svd(m.astype(np.float64), compute_uv=False))
)PY");
  std::string out;
  REQUIRE(vl_test::run_command("/usr/bin/python3 '" + py + "' '" + dir + "'", out) == 0);
  for (const char* name : {"ones", "constant_pos", "rank1", "rank3", "zero", "full"}) {
    at::Tensor M = vl_test::load_npy_tensor(dir + "/" + name + ".npy");
    at::Tensor ref = vl_test::load_npy_tensor(dir + "/" + name + ".sv.npy");
    for (auto method : {vocablens::SpectrumMethod::Auto, vocablens::SpectrumMethod::Lanczos}) {
      vocablens::SpectrumOptions o;
      o.k = 10;
      o.method = method;
      vocablens::SpectrumResult r = vocablens::matrix_spectrum(M, o, name);
      INFO(name << " solver " << r.solver);
      REQUIRE(static_cast<int64_t>(r.singular_values.size()) == 10);
      const double s1 = ref[0].item<double>();
      for (int64_t j = 0; j < 10; ++j) {
        const double want = ref[j].item<double>(), got = r.singular_values[static_cast<size_t>(j)];
        INFO("sigma_" << j + 1 << " = " << got << ", numpy " << want);
        // sigma^2 comes from eigenvalues of MᵀM: a zero singular value is known to sqrt(eps) * sigma_1.
        const double tol = 1e-6 * s1 + (want < 1e-3 * s1 ? 1e-5 * s1 : 0.0) + 1e-9;
        CHECK(std::abs(got - want) <= tol);
      }
    }
  }
}

TEST_CASE("GGUF: linear rope scaling beside a Llama-3.1 rope_freqs tensor is refused, not half applied", "[hostile][gguf]") {
  // llama3.gguf (llama.cpp's converter: rope_freqs holds the Llama-3.1 divisors) with two keys added by a
  // small GGUF rewriter: rope.scaling.type "linear", rope.scaling.factor 2 (main loaded it and dropped them).
  const std::string dir = vl_test::temp_dir("gguf-rope");
  vl_test::write_file(dir + "/addkv.py", R"PY(import struct, sys
src, dst = sys.argv[1], sys.argv[2]
b = open(src, 'rb').read()
assert b[:4] == b'GGUF'
ver, = struct.unpack_from('<I', b, 4)
nt, nkv = struct.unpack_from('<QQ', b, 8)
pos = 24
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip_val(t, pos):
    if t in SIZES: return pos + SIZES[t]
    if t == 8:
        n, = struct.unpack_from('<Q', b, pos); return pos + 8 + n
    if t == 9:
        et, n = struct.unpack_from('<IQ', b, pos); pos += 12
        for _ in range(n): pos = skip_val(et, pos)
        return pos
    raise ValueError(t)
align = 32
for _ in range(nkv):
    kl, = struct.unpack_from('<Q', b, pos); key = b[pos + 8:pos + 8 + kl].decode(); pos += 8 + kl
    t, = struct.unpack_from('<I', b, pos); pos += 4
    if key == 'general.alignment': align, = struct.unpack_from('<I', b, pos)
    pos = skip_val(t, pos)
kv_end = pos
for _ in range(nt):
    nl, = struct.unpack_from('<Q', b, pos); pos += 8 + nl
    nd, = struct.unpack_from('<I', b, pos); pos += 4 + 8 * nd + 4 + 8
ti_end = pos
data_start = (ti_end + align - 1) // align * align
def s(x): x = x.encode(); return struct.pack('<Q', len(x)) + x
new = s('llama.rope.scaling.type') + struct.pack('<I', 8) + s('linear') + s('llama.rope.scaling.factor') + struct.pack('<If', 6, 2.0)
head = b[:8] + struct.pack('<QQ', nt, nkv + 2) + b[24:kv_end] + new + b[kv_end:ti_end]
head += b'\0' * ((-len(head)) % align)
open(dst, 'wb').write(head + b[data_start:])
)PY");
  const std::string src = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/llama3/llama3.gguf";
  std::string out;
  REQUIRE(vl_test::run_command("/usr/bin/python3 '" + dir + "/addkv.py' '" + src + "' '" + dir + "/lin.gguf'", out) == 0);
  CHECK_NOTHROW(vocablens::load_model(src));
  const std::string msg = model_load_error(dir + "/lin.gguf");
  INFO(msg);
  CHECK(msg.find(dir + "/lin.gguf: linear rope scaling (llama.rope.scaling.factor 2") == 0);
  CHECK(msg.find("together with a rope_freqs tensor") != std::string::npos);
}
