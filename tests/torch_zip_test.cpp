// tests/torch_zip_test.cpp — read_torch_zip on the real fixtures, and on hostile files crafted here.
//
// The fixtures are checked bit for bit against independent sources (gpt2-tiny/model.safetensors parsed
// inline here, llama2xs/model.bin in llama2.c's layout). Hostile files are built with a tiny zip writer
// and pickle builder below, so each test states exactly which byte is wrong; a seeded mutation loop then
// checks that no corruption escapes as anything but a one-line FormatError naming the file.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "torch_zip_writer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/tensor_store.hpp"

namespace {

using vocablens::FormatError;
using vocablens::read_torch_zip;
using vocablens::TensorStore;

// ---------------------------------------------------------------------------------------------------
// Crafting helpers.

using vl_test::crc32;
using vl_test::Pickle;
using vl_test::put_le;
using vl_test::ZipWriter;

std::string floats(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

// A small but representative checkpoint: float32 tensors (one a strided view, one sharing a storage),
// an F16 storage, a nested config dict with a float, a string, a bool, None and a list, a 0-d tensor,
// an empty tensor.
std::string mini_pickle() {
  Pickle p;
  p.op('}').op('(');
  p.str("w").tensor("0", 6, 0, {2, 3}, {3, 1});
  p.str("wt").tensor("0", 6, 0, {3, 2}, {1, 3});  // transposed view of the same storage
  p.str("h").tensor("1", 3, 0, {3}, {1}, "HalfStorage");
  p.str("loss").tensor("2", 1, 0, {}, {});
  p.str("empty").tensor("0", 6, 6, {0, 5}, {5, 1});  // addresses nothing: offset == numel is fine
  p.str("cfg").op('}').op('(');
  p.str("lr").real(0.5).str("name").str("tiny").str("flag").op('\x88').str("none").op('N');
  p.str("ids").op(']').op('(').integer(1).integer(2).integer(300).op('e');
  p.op('u');
  p.op('u');
  return p.done();
}

std::string mini_archive(const std::string& pickle, uint16_t data_method = 0) {
  ZipWriter z;
  z.add("archive/data.pkl", pickle);
  z.add("archive/data/0", floats({1, 2, 3, 4, 5, 6}), data_method);
  // fp16 1.0, -2.0, 0.5
  z.add("archive/data/1", std::string("\x00\x3c\x00\xc0\x00\x38", 6));
  z.add("archive/data/2", floats({1.25f}));
  z.add("archive/version", "3\n");
  return z.bytes();
}

// A scratch directory, removed afterwards: the truncated/patched fixture copies add up to ~100 MB.
struct Tmp {
  std::string dir = vl_test::temp_dir("torchzip");
  int n = 0;
  ~Tmp() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string write(const std::string& bytes, const std::string& name = "") {
    std::string path = dir + "/" + (name.empty() ? "f" + std::to_string(n++) + ".bin" : name);
    // Unlink first: ext4 flushes a file truncated and rewritten in place on close (auto_da_alloc),
    // which made the mutation loop wait on the disk ~5 ms per file.
    std::error_code ec;
    std::filesystem::remove(path, ec);
    vl_test::write_file(path, bytes);
    return path;
  }
};

// Loading `path` must throw a one-line FormatError that names the file (and mentions `needle`).
void expect_format_error(const std::string& path, const std::string& needle = "") {
  try {
    read_torch_zip(path);
    FAIL("no error for " << path << " (expected: " << needle << ")");
  } catch (const FormatError& e) {
    std::string what = e.what();
    INFO(what);
    CHECK(what.rfind(path + ": ", 0) == 0);
    CHECK(what.find('\n') == std::string::npos);
    if (!needle.empty()) CHECK(what.find(needle) != std::string::npos);
  }
}

// Loading must either succeed or throw a one-line FormatError naming the file; nothing else.
void expect_clean_outcome(const std::string& path) {
  try {
    TensorStore s = read_torch_zip(path);
    for (auto& [k, t] : s.tensors) (void)t.sum().item<double>();  // touch every loaded element
  } catch (const FormatError& e) {
    std::string what = e.what();
    INFO(what);
    REQUIRE(what.rfind(path + ": ", 0) == 0);
    REQUIRE(what.find('\n') == std::string::npos);
  } catch (const std::exception& e) { FAIL("non-FormatError escaped for " << path << ": " << e.what()); }
}

size_t numel_of(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (auto s : shape) n *= static_cast<size_t>(s);
  return n;
}

bool same_bytes(const at::Tensor& t, const char* ref, size_t nbytes) {
  at::Tensor c = t.contiguous();
  return static_cast<size_t>(c.numel()) * c.element_size() == nbytes && std::memcmp(c.data_ptr(), ref, nbytes) == 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Real files.

TEST_CASE("gpt2-tiny-torchbin: 41 tensors, bit-identical to gpt2-tiny/model.safetensors, tied lm_head") {
  const std::string path = vl_test::fixture("gpt2-tiny-torchbin/pytorch_model.bin");
  const std::string ref_path = vl_test::fixture("gpt2-tiny/model.safetensors");
  if (path.empty() || ref_path.empty()) return;
  TensorStore s = read_torch_zip(path);
  CHECK(s.source == path);
  CHECK(s.format == "pytorch-zip");
  CHECK(s.stored_dtype == "F32");
  REQUIRE(s.tensors.size() == 41);
  CHECK(s.tensors.at("transformer.wte.weight").sizes() == at::IntArrayRef({50257, 64}));
  CHECK(s.tensors.at("transformer.h.0.attn.c_attn.weight").sizes() == at::IntArrayRef({64, 192}));
  CHECK(s.tensors.at("transformer.ln_f.bias").sizes() == at::IntArrayRef({64}));

  // Tied: the same storage, hence the same data pointer and values.
  const at::Tensor& wte = s.tensors.at("transformer.wte.weight");
  const at::Tensor& head = s.tensors.at("lm_head.weight");
  CHECK(head.data_ptr() == wte.data_ptr());
  CHECK(at::equal(head, wte));

  // Independent reference: parse the safetensors file here (8-byte length, JSON header, raw data).
  const std::string ref = vl_test::read_file(ref_path);
  uint64_t hlen = 0;
  std::memcpy(&hlen, ref.data(), 8);
  const auto header = nlohmann::json::parse(ref.substr(8, hlen));
  const char* data = ref.data() + 8 + hlen;
  size_t compared = 0;
  for (auto& [name, t] : s.tensors) {
    std::string ref_name = name == "lm_head.weight" ? "wte.weight" : name.substr(std::string("transformer.").size());
    INFO(name);
    REQUIRE(header.contains(ref_name));
    const auto& e = header[ref_name];
    CHECK(e["dtype"] == "F32");
    CHECK(t.scalar_type() == at::kFloat);
    CHECK(t.is_contiguous());
    CHECK(t.sizes().vec() == e["shape"].get<std::vector<int64_t>>());
    const uint64_t b = e["data_offsets"][0], en = e["data_offsets"][1];
    CHECK(same_bytes(t, data + b, en - b));
    ++compared;
  }
  CHECK(compared == 41);
}

TEST_CASE("llama2xs ckpt.pt: model state_dict, metadata, optimizer state, bit-identical to model.bin") {
  const std::string path = vl_test::fixture("llama2xs/ckpt.pt");
  const std::string bin_path = vl_test::fixture("llama2xs/model.bin");
  if (path.empty() || bin_path.empty()) return;
  TensorStore s = read_torch_zip(path);
  CHECK(s.stored_dtype == "F32");

  const int L = 5, D = 64, H = 192, KV = 32, V = 512;
  std::map<std::string, std::vector<int64_t>> want = {
      {"tok_embeddings.weight", {V, D}}, {"norm.weight", {D}}, {"output.weight", {V, D}}};
  for (int l = 0; l < L; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    want[p + "attention.wq.weight"] = {D, D};
    want[p + "attention.wk.weight"] = {KV, D};
    want[p + "attention.wv.weight"] = {KV, D};
    want[p + "attention.wo.weight"] = {D, D};
    want[p + "feed_forward.w1.weight"] = {H, D};
    want[p + "feed_forward.w2.weight"] = {D, H};
    want[p + "feed_forward.w3.weight"] = {H, D};
    want[p + "attention_norm.weight"] = {D};
    want[p + "ffn_norm.weight"] = {D};
  }
  size_t model_keys = 0;
  for (auto& [k, t] : s.tensors) {
    if (k.rfind("model.", 0) != 0) continue;
    ++model_keys;
    INFO(k);
    REQUIRE(want.count(k.substr(6)));
    CHECK(t.sizes().vec() == want[k.substr(6)]);
    CHECK(t.scalar_type() == at::kFloat);
  }
  CHECK(model_keys == 48);
  CHECK(s.tensors.at("model.output.weight").data_ptr() == s.tensors.at("model.tok_embeddings.weight").data_ptr());

  // Non-tensor leaves, flattened with '.'.
  CHECK(s.metadata.at("model_args.dim") == 64);
  CHECK(s.metadata.at("model_args.n_kv_heads") == 4);
  CHECK(s.metadata.at("model_args.dropout") == 0.0);
  CHECK(s.metadata.at("iter_num") == 500);
  CHECK(s.metadata.at("best_val_loss").get<double>() == Approx(1.928223).epsilon(1e-6));
  CHECK(s.tensors.at("best_val_loss").dim() == 0);
  CHECK(s.metadata.at("config.dtype") == "float16");
  CHECK(s.metadata.at("config.decay_lr") == true);
  CHECK(s.metadata.at("optimizer.param_groups.0.betas") == nlohmann::json::array({0.9, 0.95}));
  CHECK(s.metadata.at("optimizer.param_groups.0.foreach").is_null());
  CHECK(s.metadata.at("optimizer.param_groups.0.params").size() > 0);
  CHECK(s.tensors.at("optimizer.state.0.exp_avg").sizes() == at::IntArrayRef({V, D}));
  CHECK(s.tensors.at("optimizer.state.0.step").numel() == 1);  // a 1-element tensor here, not 0-d
  CHECK(s.tensors.at("optimizer.state.0.step").item<float>() > 0);

  // model.bin: 7 int32 header, then the weights in llama2.c order, as the README says bit-identical.
  const std::string bin = vl_test::read_file(bin_path);
  size_t off = 28;
  auto check_run = [&](const std::string& suffix, std::vector<int64_t> shape, bool per_layer) {
    const size_t bytes = numel_of(shape) * 4;
    for (int l = 0; l < (per_layer ? L : 1); ++l) {
      std::string key = "model." + (per_layer ? "layers." + std::to_string(l) + "." : std::string()) + suffix;
      INFO(key);
      REQUIRE(off + bytes <= bin.size());
      CHECK(same_bytes(s.tensors.at(key), bin.data() + off, bytes));
      off += bytes;
    }
  };
  check_run("tok_embeddings.weight", {V, D}, false);
  check_run("attention_norm.weight", {D}, true);
  check_run("attention.wq.weight", {D, D}, true);
  check_run("attention.wk.weight", {KV, D}, true);
  check_run("attention.wv.weight", {KV, D}, true);
  check_run("attention.wo.weight", {D, D}, true);
  check_run("ffn_norm.weight", {D}, true);
  check_run("feed_forward.w1.weight", {H, D}, true);
  check_run("feed_forward.w2.weight", {D, H}, true);
  check_run("feed_forward.w3.weight", {H, D}, true);
  check_run("norm.weight", {D}, false);
}

TEST_CASE("tensors outlive the store and stay valid; in-place writes do not crash") {
  const std::string path = vl_test::fixture("llama2xs/ckpt.pt");
  if (path.empty()) return;
  at::Tensor w;
  {
    TensorStore s = read_torch_zip(path);
    w = s.tensors.at("model.norm.weight");
  }
  const float before = w[0].item<float>();
  w.mul_(2);  // the mapping is copy-on-write: allowed, and never reaches the file
  CHECK(w[0].item<float>() == before * 2);
  CHECK(read_torch_zip(path).tensors.at("model.norm.weight")[0].item<float>() == before);
}

// ---------------------------------------------------------------------------------------------------
// Crafted files.

TEST_CASE("crafted checkpoint: strided views, shared storage, F16 conversion, nested metadata") {
  Tmp tmp;
  const std::string path = tmp.write(mini_archive(mini_pickle()));
  TensorStore s = read_torch_zip(path);
  REQUIRE(s.tensors.size() == 5);
  CHECK(s.tensors.at("empty").sizes() == at::IntArrayRef({0, 5}));
  CHECK(at::equal(s.tensors.at("w"), at::arange(1, 7, at::kFloat).reshape({2, 3})));
  CHECK(at::equal(s.tensors.at("wt"), s.tensors.at("w").t()));
  CHECK(s.tensors.at("wt").data_ptr() == s.tensors.at("w").data_ptr());
  CHECK(s.tensors.at("h").scalar_type() == at::kFloat);
  CHECK(at::equal(s.tensors.at("h"), at::tensor({1.0f, -2.0f, 0.5f})));
  CHECK(s.stored_dtype == "F16+F32");
  CHECK(s.metadata.at("loss") == 1.25);
  CHECK(s.metadata.at("cfg.lr") == 0.5);
  CHECK(s.metadata.at("cfg.name") == "tiny");
  CHECK(s.metadata.at("cfg.flag") == true);
  CHECK(s.metadata.at("cfg.none").is_null());
  CHECK(s.metadata.at("cfg.ids") == nlohmann::json::array({1, 2, 300}));
}

TEST_CASE("crafted checkpoint without upcast: F16 stays a float16 view of the file") {
  Tmp tmp;
  const std::string path = tmp.write(mini_archive(mini_pickle()));
  TensorStore s = read_torch_zip(path, false);
  const at::Tensor& h = s.tensors.at("h");
  CHECK(h.scalar_type() == at::kHalf);
  CHECK(at::equal(h.to(at::kFloat), at::tensor({1.0f, -2.0f, 0.5f})));
  CHECK(s.stored_dtype == "F16+F32");
  CHECK(at::equal(s.tensors.at("w"), at::arange(1, 7, at::kFloat).reshape({2, 3})));
  // The stored half bytes themselves, not a conversion.
  const std::string bytes = vl_test::read_file(path);
  const at::Tensor want = at::tensor({1.0f, -2.0f, 0.5f}).to(at::kHalf);
  const std::string halves(static_cast<const char*>(want.data_ptr()), 6);
  REQUIRE(bytes.find(halves) != std::string::npos);
  CHECK(std::memcmp(h.data_ptr(), halves.data(), 6) == 0);
}

TEST_CASE("misaligned storage data is copied, not viewed unaligned") {
  Tmp tmp;
  ZipWriter z;
  z.add("a/data.pkl", Pickle().op('}').str("w").tensor("0", 2, 0, {2}, {1}).op('s').done());
  z.add("a/data/0", floats({7, 8}));  // name lengths put this at an odd offset
  const std::string bytes = z.bytes();
  REQUIRE((bytes.find(floats({7, 8})) % 4) != 0);
  TensorStore s = read_torch_zip(tmp.write(bytes));
  CHECK(at::equal(s.tensors.at("w"), at::tensor({7.0f, 8.0f})));
}

TEST_CASE("hostile: truncated files and garbage") {
  const std::string src = vl_test::fixture("gpt2-tiny-torchbin/pytorch_model.bin");
  if (src.empty()) return;
  const std::string full = vl_test::read_file(src);
  Tmp tmp;
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{21}, size_t{100}, size_t{4096}, full.size() / 2, full.size() - 23, full.size() - 1})
    expect_format_error(tmp.write(full.substr(0, n)));
  std::mt19937 rng(7);
  std::string garbage(4096, '\0');
  for (auto& c : garbage) c = static_cast<char>(rng());
  expect_format_error(tmp.write(garbage), "not a PyTorch zip checkpoint");
  expect_format_error(tmp.write(std::string("PK\x03\x04", 4) + garbage), "zip");
  expect_format_error(tmp.write(std::string("\x80\x02\x8a\x0a", 4) + garbage), "legacy");
  expect_format_error(tmp.dir + "/does-not-exist.bin", "cannot open");
  expect_format_error(tmp.dir, "directory");
}

TEST_CASE("hostile: corrupted central directory") {
  const std::string src = vl_test::fixture("llama2xs/ckpt.pt");
  if (src.empty()) return;
  const std::string full = vl_test::read_file(src);
  // Locate the classic end record (torch adds zip64 records before it) and the directory it points to.
  const size_t eocd = full.size() - 22;
  REQUIRE(full.compare(eocd, 4, "PK\x05\x06") == 0);
  const size_t z64 = full.rfind(std::string("PK\x06\x06", 4));
  REQUIRE(z64 != std::string::npos);
  uint64_t cd = 0;
  std::memcpy(&cd, full.data() + z64 + 48, 8);
  REQUIRE(full.compare(cd, 4, "PK\x01\x02") == 0);
  Tmp tmp;
  auto patched = [&](size_t at, const std::string& bytes) {
    std::string f = full;
    f.replace(at, bytes.size(), bytes);
    return tmp.write(f);
  };
  expect_format_error(patched(cd, "XXXX"), "central directory signature");
  expect_format_error(patched(cd + 28, "\xff\xff"), "zip");                          // name length runs off
  expect_format_error(patched(cd + 42, "\xf0\xff\xff\x7f"), "zip");                  // local header offset absurd
  expect_format_error(patched(cd + 20, std::string("\x00\x00\x00\x7f", 4)), "zip");  // sizes disagree / overrun
  expect_format_error(patched(z64 + 48, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)), "central directory");
  expect_format_error(patched(z64 + 24, std::string("\xff\xff\xff\xff\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00", 16)),
                      "entries");
  expect_format_error(patched(eocd, "XXXX"), "end-of-central-directory");
  // The pickle's bytes no longer match the directory's CRC.
  expect_format_error(patched(100, "\xff"), "CRC");
}

TEST_CASE("hostile: forbidden globals are refused, never run") {
  Tmp tmp;
  auto with = [&](const std::string& pickle) { return tmp.write(mini_archive(pickle)); };
  expect_format_error(with(Pickle().global("os", "system").op('(').str("touch /tmp/pwned").op('t').op('R').done()),
                      "forbidden global 'os.system'");
  expect_format_error(with(Pickle().global("builtins", "eval").op('(').str("1").op('t').op('R').done()),
                      "forbidden global 'builtins.eval'");
  expect_format_error(with(Pickle().global("subprocess", "Popen").done()), "forbidden global");
  expect_format_error(with(Pickle().str("posix").str("system").op('\x93').done()), "forbidden global 'posix.system'");
  expect_format_error(with(Pickle().global("torch._utils", "_rebuild_qtensor").done()), "unsupported tensor kind");
  // An unknown but harmless class is inert: it becomes an opaque metadata value.
  TensorStore s =
      read_torch_zip(with(Pickle().op('}').str("args").global("argparse", "Namespace").op(')').op('R').op('s').done()));
  CHECK(s.metadata.at("args") == "<object argparse.Namespace>");
}

TEST_CASE("hostile: storages and tensors that do not fit") {
  Tmp tmp;
  auto with = [&](Pickle p) { return tmp.write(mini_archive(p.op('s').done())); };
  auto dict = [] { return Pickle().op('}').str("t"); };
  expect_format_error(with(dict().tensor("7", 6, 0, {6}, {1})), "storage '7' has no entry 'archive/data/7'");
  expect_format_error(with(dict().tensor("0", 7, 0, {6}, {1})), "claims 7 x 4 bytes");
  expect_format_error(with(dict().tensor("0", 6, 0, {3, 3}, {3, 1})), "addresses element 8");
  expect_format_error(with(dict().tensor("0", 6, 1, {6}, {1})), "addresses element 6");
  expect_format_error(with(dict().tensor("0", 6, 0, {int64_t{1} << 40, int64_t{1} << 40}, {0, 0})), "overflow");
  expect_format_error(with(dict().tensor("0", 6, 0, {int64_t{1} << 30, int64_t{1} << 30}, {0, 0})), "overlapping view");
  expect_format_error(with(dict().tensor("0", 6, 0, {2, 3}, {3})), "2 sizes but 1 strides");
  expect_format_error(with(dict().tensor("0", 6, 0, {-1}, {1})), "negative");
  expect_format_error(with(dict().tensor("0", 6, 0, {2}, {1}, "ComplexFloatStorage")), "unsupported storage type");
  expect_format_error(with(dict().tensor(std::string(300, '0'), 6, 0, {2}, {1})), "storage key");
  expect_format_error(with(dict().tensor("0", 1, 0, {1}, {1}, "DoubleStorage").op('s').str("u").tensor("0", 1, 0, {1}, {1})),
                      "two different types");
  // The storage entry is deflate-compressed.
  expect_format_error(tmp.write(mini_archive(mini_pickle(), 8)), "compressed");
}

TEST_CASE("hostile: malformed pickles") {
  Tmp tmp;
  auto with = [&](const std::string& pickle) { return tmp.write(mini_archive(pickle)); };
  std::string no_stop = Pickle().op('}').b;
  expect_format_error(with(no_stop), "without STOP");
  expect_format_error(with(Pickle().op('}').op('\xff').done()), "unsupported pickle opcode 0xff");
  expect_format_error(with(Pickle().op('}').op('h').op('\x05').done()), "memo key 5");
  expect_format_error(with(Pickle().op('a').done()), "stack underflow");
  expect_format_error(with(Pickle().op('}').op('(').op('X').b + std::string("\xff\xff\xff\x7f", 4)), "truncated");
  expect_format_error(with(Pickle().op('}').str("k").str("\xc3\x28").op('s').done()), "UTF-8");
  expect_format_error(with(Pickle().op('}').op('(').str("odd").op('u').done()), "odd number");
  expect_format_error(with(Pickle().integer(3).done()), "top-level object is a int");
  expect_format_error(with(Pickle().op('}').op(')').op('R').done()), "not callable");
  // Deep nesting: 100000 lists each inside the next.
  Pickle deep;
  deep.op('}').str("x");
  for (int i = 0; i < 100000; ++i) deep.op(']');
  for (int i = 0; i < 99999; ++i) deep.op('a');
  expect_format_error(with(deep.op('s').done()), "nested deeper");
  // A list containing itself.
  expect_format_error(with(Pickle().op('}').str("x").op(']').op('q').op('\x00').op('h').op('\x00').op('a').op('s').done()),
                      "nested deeper");
  // A DAG whose tree expansion is 2^40 nodes: refused by the walk budget, not explored.
  Pickle dag;
  dag.op('}').str("x").op(']').integer(1).op('a');
  for (int i = 0; i < 40; ++i) dag.op('q').op('\x00').op('h').op('\x00').op('\x86');
  expect_format_error(with(dag.op('s').done()), "too large");
}

TEST_CASE("hostile: seeded mutations only ever produce FormatError") {
  Tmp tmp;
  std::mt19937 rng(20240526);
  const std::string pickle = mini_pickle();
  const std::string archive = mini_archive(pickle);
  for (int iter = 0; iter < 1500; ++iter) {
    std::string p = pickle;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) p[rng() % p.size()] = static_cast<char>(rng());
    if (rng() % 8 == 0) p.resize(rng() % p.size());
    expect_clean_outcome(tmp.write(mini_archive(p), "pickle.bin"));
  }
  for (int iter = 0; iter < 1500; ++iter) {
    std::string a = archive;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) a[rng() % a.size()] = static_cast<char>(rng());
    expect_clean_outcome(tmp.write(a, "zip.bin"));
  }
  // The real optimizer-laden pickle, mutated with the directory's CRC fixed up so the pickle is parsed.
  const std::string src = vl_test::fixture("llama2xs/ckpt.pt");
  if (src.empty()) return;
  const std::string full = vl_test::read_file(src);
  const size_t z64 = full.rfind(std::string("PK\x06\x06", 4));
  uint64_t cd = 0;
  std::memcpy(&cd, full.data() + z64 + 48, 8);
  uint32_t pkl_size = 0;
  std::memcpy(&pkl_size, full.data() + cd + 24, 4);
  uint16_t name_len = 0, extra_len = 0;
  std::memcpy(&name_len, full.data() + 26, 2);
  std::memcpy(&extra_len, full.data() + 28, 2);
  const size_t pkl_at = 30 + name_len + extra_len;
  REQUIRE(static_cast<unsigned char>(full[pkl_at]) == 0x80);
  for (int iter = 0; iter < 100; ++iter) {
    std::string f = full;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) f[pkl_at + rng() % pkl_size] = static_cast<char>(rng());
    std::string crc;
    put_le(crc, crc32(f.substr(pkl_at, pkl_size)), 4);
    f.replace(cd + 16, 4, crc);
    expect_clean_outcome(tmp.write(f, "ckpt.pt"));
  }
}
