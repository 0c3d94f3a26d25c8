// tests/gguf_reader_test.cpp — hostile GGUF files, each built here byte by byte so the test states exactly
// what is wrong: every one must fail with a one-line FormatError naming the file and the problem, with no
// crash and no allocation beyond the file's size; then a seeded mutation loop over a valid model file.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"

namespace {

struct W {
  std::string b;
  W& u32(uint32_t v) {
    b.append(reinterpret_cast<const char*>(&v), 4);
    return *this;
  }
  W& u64(uint64_t v) {
    b.append(reinterpret_cast<const char*>(&v), 8);
    return *this;
  }
  W& f32(float v) {
    b.append(reinterpret_cast<const char*>(&v), 4);
    return *this;
  }
  W& str(const std::string& s) {
    u64(s.size());
    b += s;
    return *this;
  }
  W& pad(size_t a) {
    while (b.size() % a) b += '\0';
    return *this;
  }
};

// Header + one string kv + one F32 tensor [4] with the given fields.
std::string file_with(uint32_t version, uint32_t n_dims, uint32_t type, uint64_t offset, uint64_t data_bytes = 16) {
  W w;
  w.b = "GGUF";
  w.u32(version).u64(1).u64(1);
  w.str("general.architecture").u32(8).str("llama");
  w.str("t").u32(n_dims);
  for (uint32_t i = 0; i < n_dims; ++i) w.u64(i == 0 ? 4 : 1);
  w.u32(type).u64(offset);
  w.pad(32);
  w.b += std::string(static_cast<size_t>(data_bytes), '\0');
  return w.b;
}

std::string gguf_read_error(const std::string& bytes, const std::string& tag) {
  const std::string path = vl_test::temp_dir("gguf-hostile") + "/" + tag + ".gguf";
  vl_test::write_file(path, bytes);
  try {
    (void)vocablens::read_gguf(path);
  } catch (const vocablens::FormatError& e) {
    std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);
    CHECK(m.rfind(path + ": ", 0) == 0);
    return m.substr(path.size() + 2);
  }
  return "<accepted>";
}

}  // namespace

TEST_CASE("a minimal valid file reads") { CHECK(gguf_read_error(file_with(3, 1, 0, 0), "ok") == "<accepted>"); }

TEST_CASE("hostile GGUF headers and tensor infos give one-line errors") {
  const std::string ok = file_with(3, 1, 0, 0);
  CHECK_THAT(gguf_read_error(ok.substr(0, 30), "truncated0"), Catch::Contains("metadata count 1 cannot fit"));
  CHECK_THAT(gguf_read_error(ok.substr(0, 70), "truncated"), Catch::Contains("truncated file"));
  CHECK_THAT(gguf_read_error("GGML" + ok.substr(4), "magic"), Catch::Contains("no 'GGUF' magic"));
  CHECK_THAT(gguf_read_error(file_with(1, 1, 0, 0), "v1"), Catch::Contains("version 1 is not supported"));
  CHECK_THAT(gguf_read_error(file_with(0x03000000, 1, 0, 0), "bigendian"), Catch::Contains("big-endian"));
  CHECK_THAT(gguf_read_error(file_with(3, 5, 0, 0), "ndims"), Catch::Contains("n_dims 5"));
  CHECK_THAT(gguf_read_error(file_with(3, 1, 99, 0), "type99"), Catch::Contains("unknown ggml tensor type 99"));
  CHECK_THAT(gguf_read_error(file_with(3, 1, 16, 0), "iq2"), Catch::Contains("IQ2_XXS (16) is not supported"));
  CHECK_THAT(gguf_read_error(file_with(3, 1, 0, 32), "offset"), Catch::Contains("runs past the end of the data section"));
  CHECK_THAT(gguf_read_error(file_with(3, 1, 0, 7), "align"), Catch::Contains("not a multiple of the alignment"));
  CHECK_THAT(gguf_read_error(file_with(3, 1, 0, 0, 8), "short"), Catch::Contains("runs past the end"));
  CHECK_THAT(gguf_read_error(file_with(3, 1, 8, 0), "q8"), Catch::Contains("not a multiple of Q8_0's block of 32"));
}

TEST_CASE("huge counts and lengths are refused before any allocation") {
  W w;
  w.b = "GGUF";
  w.u32(3).u64(0).u64(1).str("a").u32(9).u32(10).u64(uint64_t(1) << 60);  // array of 2^60 u64
  CHECK_THAT(gguf_read_error(w.b, "arr60"), Catch::Contains("array of 1152921504606846976 u64 elements cannot fit"));
  W s;
  s.b = "GGUF";
  s.u32(3).u64(0).u64(1).u64(uint64_t(1) << 62);  // key length 2^62
  s.b += std::string(16, 'x');
  CHECK_THAT(gguf_read_error(s.b, "strlen"), Catch::Contains("runs past the end of the file"));
  W c;
  c.b = "GGUF";
  c.u32(3).u64(uint64_t(1) << 61).u64(0);
  CHECK_THAT(gguf_read_error(c.b, "tcount"), Catch::Contains("tensor count"));
  W n;  // arrays of arrays nested 5 deep
  n.b = "GGUF";
  n.u32(3).u64(0).u64(1).str("n").u32(9);
  for (int i = 0; i < 5; ++i) n.u32(9).u64(1);
  n.u32(4).u64(1).u32(7);
  CHECK_THAT(gguf_read_error(n.b, "nest"), Catch::Contains("nested more than 4 deep"));
  W a;  // general.alignment 3
  a.b = "GGUF";
  a.u32(3).u64(0).u64(1).str("general.alignment").u32(4).u32(3);
  CHECK_THAT(gguf_read_error(a.b, "al3"), Catch::Contains("not a power of two"));
  W dims;  // dims whose product overflows
  dims.b = "GGUF";
  dims.u32(3).u64(1).u64(0).str("t").u32(4).u64(uint64_t(1) << 31).u64(uint64_t(1) << 31).u64(4).u64(1).u32(0).u64(0);
  CHECK_THAT(gguf_read_error(dims.b, "dims"), Catch::Contains("dimensions are too large"));
}

TEST_CASE("GGUF model files whose tensors disagree with the metadata are refused by load_model") {
  const std::string src = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/stories260K-f32.gguf";
  std::string bytes = vl_test::read_file(src);
  // block_count 5 -> 4: tensors blk.4.* lie beyond it.
  const std::string key = "llama.block_count";
  size_t at = bytes.find(key);
  REQUIRE(at != std::string::npos);
  uint32_t four = 4;
  std::memcpy(&bytes[at + key.size() + 4], &four, 4);
  const std::string path = vl_test::temp_dir("gguf-model") + "/bc.gguf";
  vl_test::write_file(path, bytes);
  try {
    (void)vocablens::load_model(path);
    FAIL("accepted");
  } catch (const vocablens::FormatError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("blk.4.") && Catch::Contains("beyond llama.block_count = 4"));
  }
}

TEST_CASE("mutated GGUF models fail only with FormatError / UsageError") {
  const std::string src = std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/gguf/stories260K-f32.gguf";
  const std::string orig = vl_test::read_file(src);
  const std::string path = vl_test::temp_dir("gguf-mut") + "/m.gguf";
  std::mt19937 rng(7);
  const auto g = vocablens::read_gguf(src);
  const size_t header = static_cast<size_t>(g.data_offset);
  int refused = 0;
  for (int it = 0; it < 300; ++it) {
    std::string b = orig;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % header] = static_cast<char>(rng());
    if (it % 10 == 0) b.resize(rng() % b.size());
    vl_test::write_file(path, b);
    try {
      auto m = vocablens::load_model(path);
      (void)m.forward(at::tensor(std::vector<int64_t>{1, 2, 3}, at::kLong));
    } catch (const vocablens::Error& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      ++refused;
    }
  }
  CHECK(refused > 0);
}
