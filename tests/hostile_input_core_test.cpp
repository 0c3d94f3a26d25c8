// tests/hostile_input_core_test.cpp — hostile inputs to the newest readers and surfaces: each case is one input
// that crashed, hung, blew up or was silently misread, and must now be refused with one line naming the
// file or argument (exit 1 or 2, never a signal), or read correctly.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/report.hpp"
#include "vocablens/result_kinds.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

int run(const std::string& cmd, std::string& out) {
  int rc = vl_test::run_command(cmd, out);
  INFO(cmd << "\n-> rc " << rc << "\n" << out);
  return rc;
}

// The last non-empty line of a command's output (where the error line is).
std::string last_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  auto k = s.rfind('\n');
  return k == std::string::npos ? s : s.substr(k + 1);
}

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A SentencePiece BPE model of 320 pieces with byte fallback, trained by Debian's spm_train (the default
// nmt_nfkc normaliser, so it holds a precompiled_charsmap) on a small generated corpus.
std::string train_spm(const std::string& dir) {
  std::string corpus;
  std::mt19937 rng(1);
  const char* words[] = {"the",   "quick", "brown", "fox",   "jumps", "over",  "lazy", "dog",    "hello",
                         "world", "token", "model", "piece", "byte",  "small", "test", "corpus", "lens"};
  for (int line = 0; line < 300; ++line) {
    for (int w = 0; w < 12; ++w) corpus += std::string(w ? " " : "") + words[rng() % 18];
    corpus += "\n";
  }
  vl_test::write_file(dir + "/corpus.txt", corpus);
  std::string out;
  int rc = run("cd " + vl_test::shq(dir) +
                   " && spm_train --input=corpus.txt --model_prefix=spm --model_type=bpe --vocab_size=320"
                   " --byte_fallback=true --minloglevel=2",
               out);
  REQUIRE(rc == 0);  // Debian's `sentencepiece` package provides spm_train
  return dir + "/spm.model";
}

// A Python string literal of any bytes (hex, so no quoting rules apply).
std::string py_str(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) h += {hex[c >> 4], hex[c & 15]};
  return "bytes.fromhex('" + h + "').decode()";
}

// Rewrites the model's normalizer_spec.precompiled_charsmap with Python's protobuf bindings (an independent
// reader of the format): each edit is Python acting on a fresh bytearray `cm` of the model's charsmap, and
// writes its own output file. One interpreter for all the edits (a start of python3 with protobuf costs
// more than an edit).
void edit_charsmaps(const std::string& in, const std::vector<std::pair<std::string, std::string>>& edits) {
  std::string py =
      "import struct, sentencepiece.sentencepiece_model_pb2 as pb\n"
      "src = open('" +
      in +
      "', 'rb').read()\n"
      "def edit(out_path, body):\n"
      "    m = pb.ModelProto(); m.ParseFromString(src)\n"
      "    cm = bytearray(m.normalizer_spec.precompiled_charsmap)\n"
      "    assert len(cm) > 1000, len(cm)\n"
      "    env = {'struct': struct, 'cm': cm}\n"
      "    exec(body, env)\n"
      "    m.normalizer_spec.precompiled_charsmap = bytes(env['cm'])\n"
      "    open(out_path, 'wb').write(m.SerializeToString())\n";
  for (const auto& [out_path, body] : edits) py += "edit(" + py_str(out_path) + ", " + py_str(body) + ")\n";
  std::string script = edits.front().first + ".py", out;
  vl_test::write_file(script, py);
  REQUIRE(run("/usr/bin/python3 " + vl_test::shq(script), out) == 0);
}

void edit_charsmap(const std::string& in, const std::string& out_path, const std::string& edit) {
  edit_charsmaps(in, {{out_path, edit}});
}

std::vector<int64_t> parse_ids(const std::string& s) {
  std::vector<int64_t> v;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] >= '0' && s[i] <= '9') {
      size_t k = i;
      while (k < s.size() && s[k] >= '0' && s[k] <= '9') ++k;
      v.push_back(std::stoll(s.substr(i, k - i)));
      i = k;
    } else {
      ++i;
    }
  }
  return v;
}

}  // namespace

TEST_CASE("SentencePiece: a corrupted precompiled_charsmap is refused before the normaliser reads it", "[hostile][spm]") {
  const std::string cli = vl_test::cli_path();
  REQUIRE(!cli.empty());
  const std::string dir = vl_test::temp_dir("spm-charsmap");
  const std::string good = train_spm(dir);

  // The healthy model loads and encodes exactly as spm_encode does (the charsmap check refuses nothing real).
  {
    auto tok = vocablens::load_tokenizer(good);
    std::string out;
    const std::string text = "hello world ＡＢＣ ﬁ ½ é";  // NFKC folds the full-width and compatibility forms
    vl_test::write_file(dir + "/text.txt", text + "\n");
    REQUIRE(run("spm_encode --model=" + vl_test::shq(good) + " --output_format=id < " + vl_test::shq(dir + "/text.txt"), out) ==
            0);
    vocablens::EncodeOptions o;
    o.add_bos = false;
    CHECK(tok->encode(text, o) == parse_ids(out));
  }

  // Bytes 4-8 (the trie's root unit) set to 0x7fffffff: spm_encode itself dies with SIGSEGV on it.
  const std::string mdir = dir + "/model";
  REQUIRE(::mkdir(mdir.c_str(), 0755) == 0);
  edit_charsmap(good, mdir + "/tokenizer.model", "cm[4:8] = struct.pack('<I', 0x7fffffff)");
  std::string out;
  int rc = run(vl_test::shq(cli) + " tokenize " + vl_test::shq(mdir) + " hello", out);
  CHECK(rc == 1);
  CHECK(has(last_line(out), mdir + "/tokenizer.model: normalizer_spec.precompiled_charsmap is corrupted"));
  CHECK_THROWS_AS(vocablens::load_tokenizer_for(mdir), vocablens::FormatError);

  // Other corruptions: a trie size past the blob, a leaf pointing past the replacement strings (found by
  // searching the trie for a leaf from Python), and 60 seeded random rewrites of trie units — each is
  // refused or, when accepted, encodes every byte value without leaving the blob (a crash fails the test).
  edit_charsmap(good, dir + "/size.model", "cm[0:4] = struct.pack('<I', len(cm))");
  CHECK_THROWS_AS(vocablens::load_tokenizer(dir + "/size.model"), vocablens::FormatError);
  edit_charsmap(good, dir + "/leaf.model",
                "n = struct.unpack('<I', cm[:4])[0] // 4\n"
                "u = lambda i: struct.unpack('<I', cm[4 + 4 * i: 8 + 4 * i])[0]\n"
                "off = lambda x: (x >> 10) << ((x & (1 << 9)) >> 6)\n"
                "base = 0 ^ off(u(0))\n"
                "hits = [base ^ c for c in range(256) if (u(base ^ c) & 0x800000FF) == c and (u(base ^ c) >> 8) & 1]\n"
                "assert hits\n"
                "leaf = hits[0] ^ off(u(hits[0]))\n"
                "cm[4 + 4 * leaf: 8 + 4 * leaf] = struct.pack('<I', 0x80000000 | 0x7ffffff0)");
  CHECK_THROWS_AS(vocablens::load_tokenizer(dir + "/leaf.model"), vocablens::FormatError);
  std::string all_bytes;
  for (int c = 1; c < 256; ++c) all_bytes += static_cast<char>(c);
  const std::string text = "hello ＡＢＣ ｶﾀｶﾅ ﬁ ① ½ \xE3\x80\x80x " + all_bytes;
  int refused = 0, accepted = 0;
  std::vector<std::pair<std::string, std::string>> mutations;
  for (int k = 0; k < 60; ++k)
    mutations.push_back(
        {dir + "/mut" + std::to_string(k) + ".model", "import random\nrandom.seed(" + std::to_string(k) +
                                                          ")\nn = struct.unpack('<I', cm[:4])[0]\n"
                                                          "for _ in range(random.choice([1, 2, 4])):\n"
                                                          "    pos = random.randrange(4, 4 + n)\n"
                                                          "    cm[pos:pos + 4] = struct.pack('<I', random.getrandbits(32))"});
  edit_charsmaps(good, mutations);
  for (const auto& [p, body] : mutations) {
    try {
      auto tok = vocablens::load_tokenizer(p);
      (void)tok->encode(text);
      ++accepted;
    } catch (const vocablens::FormatError& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      ++refused;
    }
  }
  INFO("refused " << refused << ", accepted " << accepted);
  CHECK(refused > 0);
  CHECK(refused + accepted == 60);
}

// ---- run directories: every array's shape against the kind's declared shapes ----

namespace {
std::string stories() { return vl_test::fixture("stories260K/stories260K.bin"); }
}  // namespace

TEST_CASE("run directory: arrays that disagree in shape are refused by every reader, before any figure", "[hostile][rundir]") {
  // Every kind's own example satisfies its declared shapes (the declarations match what the slices write).
  for (const auto& r : vocablens::example_results()) {
    INFO(r.kind);
    CHECK_NOTHROW(vocablens::detail::check_result_shapes(r, r.kind + ".json"));
  }
  const std::string cli = vl_test::cli_path(), m = stories();
  REQUIRE(!cli.empty());
  REQUIRE(!m.empty());
  // A real lens run (it reads back as it was written), then one array rewritten with its manifest: main's
  // `report` said "out of memory" for entropy [L, T + 1], died of SIGSEGV for [L + 1, T] and drew [L, T - 1].
  const std::string src = vl_test::temp_dir("rundir-src");
  std::string out;
  REQUIRE(run(vl_test::shq(cli) + " lens " + vl_test::shq(m) + " --prompt 'Lily went to the park' --out " + vl_test::shq(src),
              out) == 0);
  auto rs = vocablens::read_run_directory(src);
  REQUIRE(rs.size() == 1);
  const vocablens::Result base = rs[0];
  REQUIRE(base.arrays.count("entropy"));
  const int64_t L = base.arrays.at("entropy").shape[0], T = base.arrays.at("entropy").shape[1];
  REQUIRE(base.arrays.at("tokens").shape == std::vector<int64_t>{T});
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{L, T + 1}, {L + 1, T}, {L, T - 1}}) {
    vocablens::Result r = base;
    std::vector<float> v(static_cast<size_t>(rows * cols), 0.5f);
    r.arrays["entropy"] = vocablens::NdArray::f32({rows, cols}, v.data());
    const std::string dir = vl_test::temp_dir("rundir-shape");
    vocablens::write_result(r, dir);
    INFO("entropy [" << rows << ", " << cols << "]");
    std::string msg;
    try {
      vocablens::read_run_directory(dir);
    } catch (const vocablens::FormatError& e) { msg = e.what(); }
    CHECK(has(msg,
              dir + "/logit_lens.json: array 'entropy' has shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "]"));
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(run(vl_test::shq(cli) + " report " + vl_test::shq(dir), out) == 1);
    CHECK(has(last_line(out), "array 'entropy' has shape"));
    // Several arrays changed at once: still refused, the first disagreement named.
    r.arrays["target_prob"] = r.arrays["entropy"];
    r.arrays["tokens"] = vocablens::NdArray::i64({cols + 2}, std::vector<int64_t>(static_cast<size_t>(cols + 2), 1).data());
    vocablens::write_result(r, dir);
    CHECK_THROWS_AS(vocablens::read_run_directory(dir), vocablens::FormatError);
  }
  // A wrong rank (entropy as [L * T]) too; arrays the kind does not declare keep any shape.
  vocablens::Result r = base;
  std::vector<float> flat(static_cast<size_t>(L * T), 0.5f);
  r.arrays["entropy"] = vocablens::NdArray::f32({L * T}, flat.data());
  std::string dir = vl_test::temp_dir("rundir-rank");
  vocablens::write_result(r, dir);
  CHECK_THROWS_AS(vocablens::read_run_directory(dir), vocablens::FormatError);
  r = base;
  r.arrays["my_extra"] = vocablens::NdArray::f32({3, 7}, std::vector<float>(21, 1.f).data());
  dir = vl_test::temp_dir("rundir-extra");
  vocablens::write_result(r, dir);
  CHECK(vocablens::read_run_directory(dir).size() == 1);
}

// ---- one rule for every file the program reads: a regular file of bounded size ----

namespace {
std::string make_fifo(const std::string& dir, const std::string& name) {
  std::string p = dir + "/" + name;
  REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
  return p;
}

// Runs a command under `timeout 60` and checks that it ended by itself, quickly, with `rc` and a last line
// naming `path` and containing `needle`.
void refused(const std::string& cmd, int rc, const std::string& path, const std::string& needle) {
  std::string out;
  auto t0 = std::chrono::steady_clock::now();
  int got = run("timeout 60 " + cmd, out);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(cmd << "\n-> " << got << " after " << s << " s\n" << out);
  CHECK(got == rc);
  CHECK(s < 30);
  CHECK(has(last_line(out), path));
  CHECK(has(last_line(out), needle));
}
}  // namespace

TEST_CASE("prompts, corpora and tuned-lens configs that are /dev/zero or a FIFO are refused at once", "[hostile][files]") {
  const std::string cli = vl_test::cli_path(), m = stories();
  REQUIRE(!cli.empty());
  REQUIRE(!m.empty());
  const std::string dir = vl_test::temp_dir("hostile-files");
  const std::string fifo = make_fifo(dir, "pipe.txt");
  const std::string C = vl_test::shq(cli) + " ", M = " " + vl_test::shq(m) + " ";
  for (const std::string& bad : {std::string("/dev/zero"), fifo}) {
    const std::string what = bad == fifo ? "is a FIFO (named pipe), not a regular file" : "is a character device";
    refused(C + "lens" + M + "--prompts " + vl_test::shq(bad), 1, bad, what);
    refused(C + "lens" + M + "--corpus " + vl_test::shq(bad), 1, bad, what);
  }
  // A tuned lens to evaluate, then its config.json replaced by /dev/zero and by a FIFO.
  std::string corpus;
  for (int i = 0; i < 60; ++i) corpus += "Once upon a time there was a little girl named Lily. She liked to play in the park.\n";
  vl_test::write_file(dir + "/corpus.txt", corpus);
  std::string out;
  REQUIRE(run(C + "tuned-lens train" + M + "--corpus " + vl_test::shq(dir + "/corpus.txt") + " --out " +
                  vl_test::shq(dir + "/t") + " --window 64 --tokens-per-step 512 --steps 2 --quiet",
              out) == 0);
  for (const std::string& bad : {std::string("/dev/zero"), fifo}) {
    const std::string what = bad == fifo ? "FIFO" : "character device";
    refused(C + "tuned-lens eval" + M + "--tuned " + vl_test::shq(dir + "/t") + " --corpus " + vl_test::shq(bad), 1, bad, what);
    const std::string t2 = dir + "/t2";
    std::string o2;
    REQUIRE(run("rm -rf " + vl_test::shq(t2) + " && cp -r " + vl_test::shq(dir + "/t") + " " + vl_test::shq(t2) + " && rm " +
                    vl_test::shq(t2 + "/config.json") + " && ln -s " + vl_test::shq(bad) + " " +
                    vl_test::shq(t2 + "/config.json"),
                o2) == 0);
    refused(C + "lens" + M + "--tuned " + vl_test::shq(t2) + " --prompt Lily", 1, t2 + "/config.json", what);
  }
}

TEST_CASE("counts on the command line: -n -5, --window -5, --max-tokens 0 are usage errors", "[hostile][cli]") {
  const std::string cli = vl_test::cli_path(), m = stories();
  REQUIRE(!cli.empty());
  REQUIRE(!m.empty());
  const std::string dir = vl_test::temp_dir("hostile-counts");
  vl_test::write_file(dir + "/c.txt", "Lily went to the park. She saw a dog.\n");
  const std::string C = vl_test::shq(cli) + " ", M = " " + vl_test::shq(m) + " ",
                    corpus = " --corpus " + vl_test::shq(dir + "/c.txt");
  for (const std::string& args :
       {"generate" + M + "-n -5", "lens" + M + corpus + " --window -5", "lens" + M + corpus + " --window 1",
        "lens" + M + corpus + " --max-tokens 0", "lens" + M + corpus + " --max-tokens -3",
        "tuned-lens eval" + M + "--tuned x" + corpus + " --window -5",
        "tuned-lens eval" + M + "--tuned x" + corpus + " --max-tokens 0"}) {
    std::string out;
    CHECK(run(C + args, out) == 2);
    CHECK(out.find("--") != std::string::npos);
  }
}

// ---- MPI: one failing rank ends the whole job ----

TEST_CASE("mpirun -np 2: a rank that fails ends every rank in seconds with a non-zero exit", "[hostile][mpi]") {
  const std::string cli = vl_test::cli_path(), m = stories();
  REQUIRE(!cli.empty());
  REQUIRE(!m.empty());
  std::string out;
  REQUIRE(run("command -v mpirun", out) == 0);  // Debian's openmpi-bin (scripts/setup.sh installs it)
  const std::string dir = vl_test::temp_dir("hostile-mpi");
  std::string corpus;
  for (int i = 0; i < 200; ++i) corpus += "Once upon a time there was a little girl named Lily. She liked to play in the park.\n";
  vl_test::write_file(dir + "/c.txt", corpus);
  // Rank 1 cannot open its corpus; rank 0 reads a good one and reaches the reduction of the statistics,
  // where it would wait for rank 1 forever.
  const std::string script = dir + "/rank.sh";
  vl_test::write_file(script, "#!/bin/sh\nif [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then c=" + vl_test::shq(dir + "/missing.txt") +
                                  "; else c=" + vl_test::shq(dir + "/c.txt") + "; fi\nexec " + vl_test::shq(cli) + " lens " +
                                  vl_test::shq(m) + " --corpus \"$c\" --window 64\n");
  auto t0 = std::chrono::steady_clock::now();
  int rc = run("timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root sh " + vl_test::shq(script), out);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("rc " << rc << " after " << s << " s\n" << out);
  CHECK(rc != 0);
  CHECK(rc != 124);  // timeout's exit: the job hung
  CHECK(s < 60);
  CHECK(has(out, "missing.txt: no such file"));
}

// ---- tokenizer.json: a normaliser chain that grows the text without end ----

TEST_CASE("tokenizer.json: 24 Replace \"a\" -> \"aa\" steps are refused instead of building 2^24 bytes per \"a\"",
          "[hostile][tokenizer]") {
  const std::string dir = vl_test::temp_dir("norm-chain");
  auto make = [&](int steps) {
    std::string seq;
    for (int i = 0; i < steps; ++i)
      seq += std::string(i ? "," : "") + R"({"type": "Replace", "pattern": {"String": "a"}, "content": "aa"})";
    std::string p = dir + "/chain" + std::to_string(steps) + ".json";
    vl_test::write_file(p, R"({"normalizer": {"type": "Sequence", "normalizers": [)" + seq +
                               R"(]}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
    return vocablens::load_tokenizer(p);
  };
  // A few doublings are an ordinary (if odd) normaliser: 8 steps turn "a" into 256 "a" tokens.
  CHECK(make(8)->encode("a").size() == 256);
  for (int steps : {20, 24}) {
    auto tok = make(steps);
    auto t0 = std::chrono::steady_clock::now();
    std::string msg;
    try {
      tok->encode("aaaaaaaa");
    } catch (const vocablens::FormatError& e) { msg = e.what(); }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(steps << " steps: " << msg << " after " << s << " s");
    CHECK(has(msg, "chain" + std::to_string(steps) + ".json: the normalizer turns 8 bytes of text into more than"));
    CHECK(s < 5);
  }
}

TEST_CASE("tokenizer.json: a post-processor special token id outside the vocabulary is refused, not emitted or wrapped",
          "[hostile][tokenizer]") {
  const std::string dir = vl_test::temp_dir("special-ids");
  auto with_bos_id = [&](const std::string& id) {
    const std::string p = dir + "/tok" + id + ".json";
    vl_test::write_file(p, R"({"model": {"type": "BPE", "vocab": {"<s>": 0, "a": 1, "b": 2}, "merges": []},
      "added_tokens": [{"id": 0, "content": "<s>", "special": true}],
      "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [)" +
                               id + R"(], "tokens": ["<s>"]}}}})");
    return p;
  };
  auto ok = vocablens::load_tokenizer(with_bos_id("0"));
  CHECK(ok->encode("ab") == std::vector<int64_t>{0, 1, 2});
  for (const std::string id : {"3", "99999", "4294967296"}) {  // 2^32 wrapped to 0 (the BOS itself) before
    INFO("id " << id);
    std::string msg;
    try {
      auto t = vocablens::load_tokenizer(with_bos_id(id));
      msg = "accepted; encodes \"ab\" as " + std::to_string(t->encode("ab")[0]) + " ...";
    } catch (const vocablens::FormatError& e) { msg = e.what(); }
    INFO(msg);
    CHECK(has(msg, "post_processor: the special token before $A has id " + id + ", which is not a token of the vocabulary"));
  }
}

// ---- compare: what it reads from two runs is checked ----

TEST_CASE("compare: log_probs that are not log-probabilities, and a 10 MB layer label, are refused", "[hostile][compare]") {
  const std::string cli = vl_test::cli_path(), m = stories();
  REQUIRE(!cli.empty());
  REQUIRE(!m.empty());
  const std::string dir = vl_test::temp_dir("hostile-compare");
  std::string out;
  for (const char* r : {"a", "b"})
    REQUIRE(run(vl_test::shq(cli) + " lens " + vl_test::shq(m) + " --prompt 'Lily went to the park' --save-probs --out " +
                    vl_test::shq(dir + "/" + r),
                out) == 0);
  REQUIRE(run(vl_test::shq(cli) + " compare " + vl_test::shq(dir + "/a") + " " + vl_test::shq(dir + "/b"), out) == 0);
  auto edited = [&](const std::string& name, const std::function<void(vocablens::Result&)>& edit) {
    auto rs = vocablens::read_run_directory(dir + "/b");
    REQUIRE(rs.size() == 1);
    edit(rs[0]);
    vocablens::write_result(rs[0], dir + "/" + name);
    return dir + "/" + name;
  };
  // Logits saved where log-probabilities belong: every entry + 3 (each row's probabilities sum to e^3).
  const std::string shifted = edited("shifted", [](vocablens::Result& r) {
    auto& a = r.arrays.at("log_probs");
    auto* p = reinterpret_cast<float*>(a.bytes.data());
    for (int64_t i = 0; i < a.numel(); ++i) p[i] += 3.0f;
  });
  CHECK(run(vl_test::shq(cli) + " compare " + vl_test::shq(dir + "/a") + " " + vl_test::shq(shifted), out) == 2);
  CHECK(has(last_line(out), "log_probs at layer 0, position 0 are not log-probabilities"));
  // A 10 MB label of layer 0 (it was copied into every cell: 1.1 GB).
  const std::string big = edited("biglabel", [](vocablens::Result& r) {
    REQUIRE(r.summary["layers"].is_array());
    r.summary["layers"][0]["label"] = std::string(10 << 20, 'x');
  });
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run(vl_test::shq(cli) + " compare " + vl_test::shq(dir + "/a") + " " + vl_test::shq(big), out) == 2);
  CHECK(has(last_line(out), "the label of layer 0 is 10485760 bytes long"));
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 30);
}

TEST_CASE("generate --steer prints the unsteered continuation above the steered one", "[hostile][cli]") {
  const std::string cli = vl_test::cli_path(), m = vl_test::fixture("gpt2-tiny");
  REQUIRE(!cli.empty());
  REQUIRE(!m.empty());
  std::string plain, steered;
  const std::string base =
      vl_test::shq(cli) + " generate " + vl_test::shq(m) + " --prompt 'I think that' --steps 8 --ids";  // ids: one line each
  REQUIRE(vl_test::run_command(base + " 2>/dev/null", plain) == 0);
  REQUIRE(vl_test::run_command(base + " --steer love-hate --steer-layer 1 --steer-scale 6 2>/dev/null", steered) == 0);
  INFO("plain:\n" << plain << "steered:\n" << steered);
  // (run_command adds 2>&1 after the command, so the "steering: ..." note on stderr is in the output too.)
  const auto k = steered.find("\nunsteered: ");
  REQUIRE(k != std::string::npos);
  const auto nl = steered.find('\n', k + 1);
  REQUIRE(nl != std::string::npos);
  CHECK(steered.substr(k + 1, nl - k) == "unsteered: " + plain);  // the same ids `generate` prints without --steer
  CHECK(steered.compare(nl + 1, 9, "steered (") == 0);
}

TEST_CASE("an output path that is a FIFO, a device or a directory is not replaced", "[hostile][files]") {
  const std::string cli = vl_test::cli_path(), m = stories();
  REQUIRE(!cli.empty());
  REQUIRE(!m.empty());
  const std::string dir = vl_test::temp_dir("hostile-out");
  const std::string fifo = make_fifo(dir, "out.txt");
  const std::string dev = dir + "/null.txt";
  REQUIRE(::symlink("/dev/null", dev.c_str()) == 0);
  const std::string sub = dir + "/sub.txt";
  REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
  for (const std::string& out : {fifo, dev, sub}) {
    refused(vl_test::shq(cli) + " tuned-lens sample " + vl_test::shq(m) + " --tokens 64 --seed 1 --out " + vl_test::shq(out), 1,
            out, "not a regular file: not replaced");
  }
  struct stat st {};
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  REQUIRE(::lstat(dev.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  REQUIRE(::stat(sub.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
}

TEST_CASE("patch warns when the clean and corrupt runs barely differ in the metric; its token row is not cut", "[hostile][cli]") {
  const std::string cli = vl_test::cli_path(), m = vl_test::fixture("gpt2-tiny");
  REQUIRE(!cli.empty());
  REQUIRE(!m.empty());
  // README's IOI example on the tiny model: clean 0.8275, corrupt 0.9324 (a difference of -0.105).
  std::string out;
  REQUIRE(run(vl_test::shq(cli) + " patch " + vl_test::shq(m) +
                  " --clean 'When John and Mary went to the store, Mary gave a drink to'"
                  " --corrupt 'When John and Mary went to the store, John gave a drink to' --target ' John' --wrong ' Mary'"
                  " --over heads",
              out) == 0);
  CHECK(has(out, "clean 0.8275 · corrupt 0.9324"));
  CHECK(has(out, "warning: the clean and corrupt runs differ by only -0.10"));
  // A corruption that moves the answer by more than a quarter logit gets no warning.
  REQUIRE(run(vl_test::shq(cli) + " patch " + vl_test::shq(m) +
                  " --clean 'The Eiffel Tower is in the city of' --corrupt 'The Colosseum is in the city of' --target ' Paris'",
              out) == 0);
  INFO(out);
  CHECK(has(out, "\xE2\x90\xA3Tower"));  // the token row shows whole tokens ("␣Tower", not "␣Towe")
  const auto k = out.find("\nclean ");   // the table's line "clean X · corrupt Y; cells: ..." (the warning may come first)
  REQUIRE(k != std::string::npos);
  const double c = std::stod(out.substr(k + 7)), d = std::stod(out.substr(out.find("corrupt ", k) + 8));
  CHECK(has(out, "warning: the clean and corrupt runs differ") == (std::abs(c - d) < 0.25));
}

TEST_CASE("finite but huge weights: an embedding row of +-3e38 is refused like non-finite input, not NaN rows and exit 0",
          "[hostile][overflow]") {
  const std::string cli = vl_test::cli_path(), hf = vl_test::fixture("stories260K-hf");
  REQUIRE(!cli.empty());
  REQUIRE(!hf.empty());
  const std::string dir = vl_test::temp_dir("huge-weights") + "/m";
  std::string out;
  REQUIRE(run("cp -r " + vl_test::shq(hf) + " " + vl_test::shq(dir), out) == 0);
  // Row 317 (" Lily" in the prompt below) set to +-3e38, alternating: finite, so the load-time scan passes.
  const std::string py = dir + "/edit.py";
  vl_test::write_file(py,
                      "import json, struct, sys\np = sys.argv[1]\nb = bytearray(open(p, 'rb').read())\n"
                      "n = struct.unpack('<Q', b[:8])[0]\nh = json.loads(b[8:8 + n])\n"
                      "t = h['model.embed_tokens.weight']\nd = t['shape'][1]\noff = 8 + n + t['data_offsets'][0]\n"
                      "for j in range(d): struct.pack_into('<f', b, off + (317 * d + j) * 4, 3e38 if j % 2 == 0 else -3e38)\n"
                      "open(p, 'wb').write(b)\n");
  REQUIRE(run("/usr/bin/python3 " + vl_test::shq(py) + " " + vl_test::shq(dir + "/model.safetensors"), out) == 0);
  const int rc = run(vl_test::shq(cli) + " lens " + vl_test::shq(dir) + " --prompt-ids 1,317,263,377", out);
  CHECK(rc == 1);  // main: a table of NaN rows, exit 0
  CHECK((has(last_line(out), "overflow float32") || has(last_line(out), "non-finite")));
}
