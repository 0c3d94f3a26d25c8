// tests/robustness_test.cpp — resource bounds on untrusted input.
//
// Every hostile file here describes something huge in a few bytes: a safetensors header of 2^63 bytes, a
// billion-element tensor, JSON nested 10^5 deep, a merges.txt with a 1 GB line (a sparse file: it costs
// no disk). Each must be refused with a one-line FormatError naming the file, *before* any large
// allocation. To check the "before", each case runs in a forked child whose address space is limited
// (RLIMIT_AS, current size + 256 MB); under AddressSanitizer, where RLIMIT_AS cannot work (the shadow
// memory reserves terabytes), a malloc hook records the largest single allocation instead. The child's
// peak RSS growth is checked in both builds.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "torch_zip_writer.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/model.hpp"
#include "vocablens/model_config.hpp"
#include "vocablens/tensor_store.hpp"
#include "vocablens/tokenizer.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define VL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VL_ASAN 1
#endif
#endif
#ifdef VL_ASAN
// Declared here rather than through <sanitizer/allocator_interface.h>, which clang ships but GCC 12 does not
// (its libasan has the function all the same).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, size_t),
                                                         void (*free_hook)(const volatile void*));
#endif

namespace {

// ---------------------------------------------------------------------------------------------------
// Running a reader in a bounded child process.

constexpr uint64_t kHeadroomBytes = uint64_t{256} << 20;  // address space the child may add
constexpr long kMaxPeakGrowthKb = 128 * 1024;             // RSS the child may add
constexpr uint64_t kMaxSingleAllocation = uint64_t{64} << 20;

std::atomic<uint64_t> g_largest_alloc{0};
#ifdef VL_ASAN
extern "C" void vl_malloc_hook(const volatile void*, size_t size) {
  uint64_t cur = g_largest_alloc.load(std::memory_order_relaxed);
  while (size > cur && !g_largest_alloc.compare_exchange_weak(cur, size, std::memory_order_relaxed)) {}
}
extern "C" void vl_free_hook(const volatile void*) {}
#endif

// A field of /proc/self/status in kB ("VmRSS", "VmHWM", "VmSize"); -1 if absent.
long status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.compare(0, key.size(), key) == 0) return std::stol(line.substr(key.size()));
  return -1;
}

struct Outcome {
  enum Kind { kFormatError, kOtherError, kOtherException, kBadAlloc, kNoException, kCrashed } kind = kCrashed;
  std::string path, what;
  long peak_growth_kb = 0;
  uint64_t largest_alloc = 0;
  double seconds = 0;
  int status = 0;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  static const char* names[] = {"FormatError",    "other vocablens::Error", "other exception",
                                "std::bad_alloc", "no exception",           "crashed"};
  return os << names[o.kind] << " [" << o.what << "] path=" << o.path << " peak+" << o.peak_growth_kb << " kB, largest malloc "
            << o.largest_alloc << " B, " << o.seconds << " s, wait status " << o.status;
}

Outcome run_bounded(const std::function<void()>& fn) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
#ifdef VL_ASAN
    __sanitizer_install_malloc_and_free_hooks(vl_malloc_hook, vl_free_hook);
#else
    long vm_kb = status_kb("VmSize");
    if (vm_kb > 0) {
      struct rlimit rl {};
      rl.rlim_cur = rl.rlim_max = static_cast<rlim_t>(vm_kb) * 1024 + kHeadroomBytes;
      ::setrlimit(RLIMIT_AS, &rl);
    }
#endif
    const long rss0 = status_kb("VmRSS");
    int kind = Outcome::kNoException;
    std::string path, what;
    try {
      fn();
    } catch (const vocablens::FormatError& e) {
      kind = Outcome::kFormatError, path = e.path(), what = e.what();
    } catch (const vocablens::Error& e) { kind = Outcome::kOtherError, what = e.what(); } catch (const std::bad_alloc& e) {
      kind = Outcome::kBadAlloc, what = e.what();
    } catch (const std::exception& e) { kind = Outcome::kOtherException, what = e.what(); }
    const long growth = status_kb("VmHWM") - rss0;
    std::ostringstream msg;
    msg << kind << '\n' << growth << '\n' << g_largest_alloc.load() << '\n' << path << '\n' << what;
    const std::string s = msg.str();
    ssize_t ignored = ::write(fds[1], s.data(), s.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  Outcome o;
  ::waitpid(pid, &o.status, 0);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0 || got.empty()) return o;  // kCrashed
  std::istringstream in(got);
  int kind = 0;
  in >> kind >> o.peak_growth_kb >> o.largest_alloc;
  in.ignore(1);
  std::getline(in, o.path);
  std::getline(in, o.what, '\0');
  o.kind = static_cast<Outcome::Kind>(kind);
  return o;
}

// The reader must refuse `file` with a one-line FormatError naming it and containing `phrase`, quickly,
// without a large allocation.
void expect_refused(const std::string& file, const std::string& phrase, const std::function<void()>& fn) {
  Outcome o = run_bounded(fn);
  INFO(file << ": " << o);
  REQUIRE(o.kind == Outcome::kFormatError);
  CHECK(o.path == file);
  CHECK(o.what.rfind(file + ": ", 0) == 0);
  CHECK(o.what.find('\n') == std::string::npos);
  CHECK(o.what.find(phrase) != std::string::npos);
  CHECK(o.peak_growth_kb < kMaxPeakGrowthKb);
  CHECK(o.largest_alloc < kMaxSingleAllocation);
  CHECK(o.seconds < 30);
}

// ---------------------------------------------------------------------------------------------------
// Crafting files.

struct Scratch {
  std::string dir = vl_test::temp_dir("robust");
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string put(const std::string& name, const std::string& bytes) {
    std::string p = dir + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    vl_test::write_file(p, bytes);
    return p;
  }
  // `head` followed by zeros up to `size` bytes, as a sparse file (no disk blocks for the zeros).
  std::string sparse(const std::string& name, const std::string& head, uint64_t size) {
    std::string p = put(name, head);
    int fd = ::open(p.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
    ::close(fd);
    return p;
  }
};

using vl_test::Pickle;
using vl_test::put_le;

std::string safetensors(const std::string& header, const std::string& data = "") {
  std::string out;
  put_le(out, header.size(), 8);
  return out + header + data;
}

std::string nested(char open, char close, size_t depth, const std::string& inner = "0") {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += open == '{' ? "{\"a\":" : std::string(1, open);
  s += inner;
  s.append(depth, close);
  return s;
}

// A STORED zip (classic end record), as torch.save writes it.
std::string zip(const std::vector<std::pair<std::string, std::string>>& items) {
  vl_test::ZipWriter z;
  for (auto& [name, data] : items) z.add(name, data);
  return z.bytes();
}

std::string torch_file(const std::string& pickle) {
  return zip({{"archive/data.pkl", pickle}, {"archive/data/0", std::string(24, '\0')}, {"archive/version", "3\n"}});
}

std::string one_tensor(int64_t numel, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  Pickle p;
  p.op('}').op('(').str("w").tensor("0", numel, 0, sizes, strides).op('u');
  return torch_file(p.done());
}

// A tiny byte-level vocabulary: the 256 single-byte tokens in GPT-2's byte-to-unicode spelling.
std::string byte_vocab_json() {
  std::string out = "{";
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
    std::string u8;
    if (cp < 0x80) u8 += static_cast<char>(cp);
    else u8 += static_cast<char>(0xC0 | (cp >> 6)), u8 += static_cast<char>(0x80 | (cp & 0x3F));
    if (u8 == "\"" || u8 == "\\") u8 = "\\" + u8;
    out += (b ? "," : "") + std::string("\"") + u8 + "\":" + std::to_string(b);
  }
  return out + "}";
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

TEST_CASE("safetensors: a header length of 2^63 (or 2^64-1, or 100 MB + 1) is refused before reading", "[robustness]") {
  Scratch s;
  for (uint64_t claim : {uint64_t{1} << 63, ~uint64_t{0}, (uint64_t{100} << 20) + 1}) {
    std::string bytes;
    put_le(bytes, claim, 8);
    bytes += "{}";
    std::string f = s.put("h" + std::to_string(claim) + ".safetensors", bytes);
    expect_refused(f, "exceeds the 100 MB limit", [&] { vocablens::read_safetensors(f); });
  }
  // Under the limit but past the end of a small file.
  std::string bytes;
  put_le(bytes, uint64_t{99} << 20, 8);
  std::string f = s.put("short.safetensors", bytes + "{}");
  expect_refused(f, "runs past the end of the file", [&] { vocablens::read_safetensors(f); });
}

TEST_CASE("safetensors: a billion-element tensor is refused before any allocation", "[robustness]") {
  Scratch s;
  const std::string data(16, '\0');
  struct Case {
    const char* header;
    const char* phrase;
  } cases[] = {
      {R"({"w":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,4000000000]}})", "outside the data section"},
      {R"({"w":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,16]}})", "does not match shape"},
      {R"({"w":{"dtype":"F16","shape":[1000000000,1000000000],"data_offsets":[0,16]}})", "tensor 'w'"},
      {R"({"w":{"dtype":"BF16","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}})", "shape is too large"},
      {R"({"w":{"dtype":"F64","shape":[18446744073709551615],"data_offsets":[0,16]}})", "shape is too large"},
  };
  int i = 0;
  for (const auto& c : cases) {
    std::string f = s.put("big" + std::to_string(i++) + ".safetensors", safetensors(c.header, data));
    expect_refused(f, c.phrase, [&] { vocablens::read_safetensors(f); });
  }
}

TEST_CASE("torch zip: a billion-element tensor or storage is refused before any allocation", "[robustness]") {
  Scratch s;
  struct Case {
    int64_t numel;
    std::vector<int64_t> sizes, strides;
    const char* phrase;
  } cases[] = {
      {1000000000, {1000000000}, {1}, "claims 1000000000 x 4 bytes"},  // storage bigger than its entry
      {6, {1000000000}, {1}, "addresses element"},                     // tensor bigger than its storage
      {6, {1000000000}, {0}, "overlapping view"},                      // stride 0: a billion views of one float
      {6, {1000000, 1000000}, {0, 0}, "overlapping view"},
      {6, {int64_t{1} << 40, int64_t{1} << 40}, {0, 0}, "overflow"},
  };
  int i = 0;
  for (const auto& c : cases) {
    std::string f = s.put("big" + std::to_string(i++) + ".bin", one_tensor(c.numel, c.sizes, c.strides));
    expect_refused(f, c.phrase, [&] { vocablens::read_torch_zip(f); });
  }
}

TEST_CASE("torch zip: a pickle nested 10^5 deep is refused", "[robustness]") {
  Scratch s;
  // 10^5 EMPTY_LIST then 10^5 - 1 APPEND: a list inside a list ... 10^5 deep, as the top-level object.
  std::string pkl("\x80\x02", 2);
  pkl.append(100000, ']');
  pkl.append(99999, 'a');
  pkl += '.';
  std::string f = s.put("deep.bin", torch_file(pkl));
  expect_refused(f, "nested deeper than 64 levels", [&] { vocablens::read_torch_zip(f); });
}

TEST_CASE("llama2.c: a header implying a huge model in a small file is refused before mapping tensors", "[robustness]") {
  Scratch s;
  auto header = [](std::vector<int32_t> h) {
    std::string out;
    for (int32_t v : h) put_le(out, static_cast<uint32_t>(v), 4);
    return out + std::string(64, '\0');
  };
  // A billion-element embedding (vocab 2^20 x dim 1024) and the largest header the bounds allow (whose
  // size in bytes exceeds 2^64: it used to wrap around in the size check).
  std::string f1 = s.put("billion.bin", header({1024, 4096, 1, 16, 16, 1 << 20, 2048}));
  expect_refused(f1, "implies", [&] { vocablens::load_model(f1); });
  std::string f2 = s.put("max.bin", header({1 << 24, 1 << 24, 4096, 1 << 22, 1 << 22, 1 << 24, 1 << 24}));
  expect_refused(f2, "implies", [&] { vocablens::load_model(f2); });
}

TEST_CASE("config.json nested 10^5 deep is refused before parsing", "[robustness]") {
  Scratch s;
  for (char open : {'[', '{'}) {
    const std::string text = nested(open, open == '[' ? ']' : '}', 100000);
    std::string dir = s.dir + "/model" + open;
    std::string f = s.put(std::string("model") + open + "/config.json", text);
    expect_refused(f, "nested deeper than 256 levels", [&] { vocablens::read_hf_config(f); });
    // Through load_model too: the error names config.json, not the directory.
    expect_refused(f, "nested deeper than 256 levels", [&] { vocablens::load_model(dir); });
  }
}

TEST_CASE("safetensors header and index nested 10^5 deep are refused before parsing", "[robustness]") {
  Scratch s;
  std::string f = s.put("deep.safetensors", safetensors(nested('{', '}', 100000)));
  expect_refused(f, "nested deeper than 64 levels", [&] { vocablens::read_safetensors(f); });
  std::string idx = s.put("model.safetensors.index.json", "{\"weight_map\":" + nested('[', ']', 100000) + "}");
  expect_refused(idx, "nested deeper than 64 levels", [&] { vocablens::read_safetensors_index(idx); });
}

TEST_CASE("tokenizer files nested 10^5 deep are refused with a FormatError", "[robustness]") {
  Scratch s;
  std::string tj = s.put("deep/tokenizer.json", nested('{', '}', 100000));
  expect_refused(tj, "", [&] { vocablens::load_tokenizer(tj); });
  std::string vj = s.put("deep2/vocab.json", nested('[', ']', 100000));
  s.put("deep2/merges.txt", "#version: 0.2\n");
  expect_refused(vj, "", [&] { vocablens::load_tokenizer(vj); });
}

// nlohmann parses and destroys iteratively, but copying a value and dump() recurse per level: a subtree
// nested 10^5 deep where a reader copies (tokenizer.json's pre_tokenizer) or the report prints (a
// result's summary) overflowed the stack — `vocablens report` on such a directory died with SIGSEGV.
TEST_CASE("JSON subtrees nested 10^5 deep in tokenizer.json and result files are refused", "[robustness]") {
  Scratch s;
  std::string tj = s.put("deep3/tokenizer.json",
                         "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                         "\"pre_tokenizer\": " +
                             nested('[', ']', 100000) + "}");
  expect_refused(tj, "JSON nested deeper than 256 levels", [&] { vocablens::load_tokenizer(tj); });
  std::string rj = s.put("run/r.json",
                         "{\"format\": \"vocablens.result\", \"format_version\": 1, \"kind\": \"k\", "
                         "\"settings\": {}, \"provenance\": {}, \"arrays\": {}, \"tables\": [], \"summary\": {\"x\": " +
                             nested('[', ']', 100000) + "}}");
  expect_refused(rj, "JSON nested deeper than 256 levels", [&] { vocablens::read_run_directory(s.dir + "/run"); });
}

TEST_CASE("a merges.txt with a 1 GB line is refused quickly, without reading it", "[robustness]") {
  Scratch s;
  s.put("tok/vocab.json", byte_vocab_json());
  // "#version" then one 1 GB line (zeros): a sparse file, no disk used.
  std::string merges = s.sparse("tok/merges.txt", "#version: 0.2\n\xc4\xa0 t", uint64_t{1} << 30);
  expect_refused(merges, "tokenizer files larger than 256 MB are refused", [&] { vocablens::load_tokenizer(merges); });
  expect_refused(merges, "tokenizer files larger than 256 MB are refused", [&] { vocablens::load_tokenizer(s.dir + "/tok"); });
}

TEST_CASE("1 GB vocab.json, tokenizer.json, llama2.c tokenizer and config.json are refused without reading", "[robustness]") {
  Scratch s;
  const uint64_t gb = uint64_t{1} << 30;
  std::string vj = s.sparse("a/vocab.json", "{\"a\": 0, ", gb);
  s.put("a/merges.txt", "#version: 0.2\n");
  expect_refused(vj, "larger than 256 MB", [&] { vocablens::load_tokenizer(vj); });
  std::string tj = s.sparse("b/tokenizer.json", "{\"model\": ", gb);
  expect_refused(tj, "larger than 256 MB", [&] { vocablens::load_tokenizer(tj); });
  std::string tb = s.sparse("c/tok512.bin", std::string("\x40\0\0\0", 4), gb);
  expect_refused(tb, "larger than 256 MB", [&] { vocablens::load_tokenizer(tb); });
  std::string cfg = s.sparse("d/config.json", "{\"architectures\": [\"GPT2LMHeadModel\"], \"x\": \"", gb);
  expect_refused(cfg, "larger than 64 MB", [&] { vocablens::read_hf_config(cfg); });
}

TEST_CASE("the bounded runner itself notices a large allocation", "[robustness]") {
  // Guards the guard: a reader that allocated 1 GB would be caught (bad_alloc under RLIMIT_AS, or the
  // malloc hook under ASan), so the checks above are not vacuous.
  Outcome o = run_bounded([] {
    std::vector<char> big(size_t{1} << 30);
    big[12345] = 1;
    if (big[12345] != 1) throw std::runtime_error("unreachable");
  });
  INFO(o);
#ifdef VL_ASAN
  CHECK(o.largest_alloc >= (uint64_t{1} << 30));
#else
  CHECK(o.kind == Outcome::kBadAlloc);
#endif
}
