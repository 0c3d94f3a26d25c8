// Safety through the CLI: generation at the context end equals run.c, resource guards refuse before
// allocating, hostile files (FIFO, /dev/zero) are refused at once, run directories are never mixed or
// silently replaced, typos get suggestions with exit 2, progress, table digits, error text.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/export.hpp"
#include "vocablens/npy.hpp"
#include "vocablens/tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

struct Run {
  int rc;
  std::string out;  // stdout + stderr
  double seconds;
};

Run cli(const std::string& args, const std::string& env = "", const std::string& err_file = "") {
  std::string c = vl_test::cli_path();
  REQUIRE_FALSE(c.empty());
  Run r;
  const auto t0 = std::chrono::steady_clock::now();
  // `timeout` turns a hang into a failure instead of a stuck test; with err_file, stderr goes there.
  const std::string cmd = env + " timeout 120 " + c + " " + args;
  r.rc = vl_test::run_command(err_file.empty() ? cmd : "{ " + cmd + " 2>'" + err_file + "'; }", r.out);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// stdout only, stderr discarded: for byte-exact comparisons.
std::string stdout_of(const std::string& args) {
  std::string dir = vl_test::temp_dir("so");
  Run r = cli(args, "", dir + "/err");
  INFO(args << "\n" << vl_test::read_file(dir + "/err"));
  REQUIRE(r.rc == 0);
  return r.out;
}

std::string src_data(const std::string& rel) { return std::string(VOCABLENS_SOURCE_DIR) + "/tests/data/" + rel; }

}  // namespace

TEST_CASE("generate at the context end equals run.c byte for byte (prompt of ~500 tokens, --steps 600; -n 500)") {
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  const std::string prompt = vl_test::read_file(src_data("generate_context_end/prompt.txt"));
  const std::string model =
      "'" + dir + "/stories260K.bin' --prompt \"$(cat '" + src_data("generate_context_end/prompt.txt") + "')\"";
  CHECK(stdout_of("generate " + model + " --steps 600") == vl_test::read_file(src_data("generate_context_end/runc_t0_n600.txt")));
  // run.c's -n counts positions including the prompt.
  CHECK(stdout_of("generate " + model + " -n 500") == vl_test::read_file(src_data("generate_context_end/runc_t0_n500.txt")));
  // The same through ids: BOS + 511 tokens fill the context; one more token is predicted at position 511.
  std::string ids = "1";
  for (int i = 0; i < 511; ++i) ids += ",403";
  std::string out = stdout_of("generate '" + dir + "/stories260K.bin' --prompt-ids " + ids + " --steps 5 --ids --stop-id -1");
  CHECK(std::count(out.begin(), out.end(), ' ') + 1 == 513);
  // A prompt longer than the context is refused (it was echoed with exit 0).
  Run r = cli("generate '" + dir + "/stories260K.bin' --prompt-ids " + ids + ",403 --steps 5");
  CHECK(r.rc == 2);
  CHECK(r.out.find("513 tokens, longer than the model's context of 512") != std::string::npos);
  r = cli("generate --help");
  CHECK(r.out.find("run.c's -n") != std::string::npos);
}

TEST_CASE("neighbours: 1e308*king + 1e308*queen equals king + queen (no overflow)") {
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  Run big = cli("neighbours '" + dir + "' \"1e308*king + 1e308*queen\" --format csv --k 5");
  Run small = cli("neighbours '" + dir + "' \"king + queen\" --format csv --k 5");
  INFO(big.out << "\n" << small.out);
  REQUIRE(big.rc == 0);
  REQUIRE(small.rc == 0);
  // Same neighbours, cosines equal to rounding (the big query is scored scaled by its largest entry).
  auto rows = [](const std::string& csv) {
    std::vector<std::pair<std::string, double>> v;
    std::istringstream in(csv);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto c = line.rfind(',');
      v.emplace_back(line.substr(0, c), std::stod(line.substr(c + 1)));
    }
    return v;
  };
  auto a = rows(big.out), b = rows(small.out);
  REQUIRE(a.size() == 5);
  REQUIRE(b.size() == 5);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].first == b[i].first);
    CHECK(std::abs(a[i].second - b[i].second) < 1e-12);
  }
  Run inf = cli("neighbours '" + dir + "' \"1e308*king + 1e308*king + 1e308*king\" --k 5");
  // Rows of gpt2-tiny are small, so this one still fits in double: equal to "king" up to scale.
  CHECK(inf.rc == 0);
}

TEST_CASE("resource guards: counts are checked before anything is allocated") {
  std::string s = vl_test::fixture("stories260K/stories260K.bin");
  std::string g = vl_test::fixture("gpt2-tiny");
  if (s.empty() || g.empty()) return;
  // A range is bounded before it is expanded (the declaration's bound), then read against the model's counts.
  Run r = cli("heads '" + s + "' --layer 0-99999999999 --kind ov --top-k 3");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("heads: --layer: index list '0-99999999999' has more than 16777216 entries"));
  CHECK(r.seconds < 20);
  r = cli("heads '" + s + "' --layer 0-9 --kind ov --top-k 3");
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("heads: --layer: layer 5 is out of range (0..4)"));
  r = cli("heads '" + s + "' --layer 0 --head 0 --kind ov --top-k 1000000000");  // the declaration's bound
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("heads: --top-k: must be <= 1000000 (got 1000000000)"));
  r = cli("heads '" + s + "' --layer 0 --head 0 --kind ov --top-k 300000");  // within it, the model's own
  CHECK(r.rc == 2);
  CHECK_THAT(r.out, Catch::Contains("larger than the number of (token, token) pairs (512^2 = 262144)"));
  r = cli("neurons '" + s + "' --layer 0 --top-k 1000000000");  // the declaration's bound, before the model loads
  CHECK(r.rc == 2);
  CHECK(r.out.find("neurons: --top-k: must be <= 1000000 (got 1000000000)") != std::string::npos);
  r = cli("neurons '" + s + "' --layer 0 --top-k 1000");  // within it, the model's own
  CHECK(r.rc == 2);
  CHECK(r.out.find("larger than the vocabulary (512 tokens)") != std::string::npos);
  r = cli("knn '" + g + "' --k 100000");
  CHECK(r.rc == 2);
  CHECK(r.out.find("larger than the number of other rows (50256)") != std::string::npos);
  r = cli("knn '" + g + "' --k 50000");
  CHECK(r.rc == 2);
  CHECK(r.out.find("GB of memory") != std::string::npos);
}

TEST_CASE("hostile files: a FIFO or a symlink to /dev/zero is refused at once, naming it") {
  std::string g = vl_test::fixture("gpt2-tiny");
  if (g.empty()) return;
  std::string d = vl_test::temp_dir("fifo");
  fs::copy_file(g + "/model.safetensors", d + "/model.safetensors");
  REQUIRE(::mkfifo((d + "/config.json").c_str(), 0644) == 0);
  Run r = cli("inspect '" + d + "'");
  INFO(r.out);
  CHECK(r.rc == 1);
  CHECK(r.out.find("config.json: is a FIFO (named pipe), not a regular file") != std::string::npos);
  CHECK(r.seconds < 20);
  std::string z = vl_test::temp_dir("zero");
  fs::copy_file(g + "/model.safetensors", z + "/model.safetensors");
  fs::create_symlink("/dev/zero", z + "/config.json");
  r = cli("inspect '" + z + "'");
  CHECK(r.rc == 1);
  CHECK(r.out.find("is a character device (like /dev/zero), not a regular file") != std::string::npos);
  // A model path that is a FIFO.
  REQUIRE(::mkfifo((z + "/m.bin").c_str(), 0644) == 0);
  r = cli("inspect '" + z + "/m.bin'");
  CHECK(r.rc == 1);
  CHECK(r.out.find("is a FIFO (named pipe), not a model file") != std::string::npos);
  // -z /dev/zero
  std::string s = vl_test::fixture("stories260K/stories260K.bin");
  r = cli("generate '" + s + "' -z /dev/zero --steps 3");
  CHECK(r.rc == 1);
  CHECK(r.out.find("/dev/zero: is a character device") != std::string::npos);
  CHECK(r.out.find("No such file") == std::string::npos);
  // A result directory whose X.npy is a FIFO, or a symlink to /dev/zero: report refuses, does not hang.
  std::string run = vl_test::temp_dir("npyfifo") + "/run";
  r = cli("spectrum '" + g + "' --out '" + run + "'");
  REQUIRE(r.rc == 0);
  std::string npy;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().extension() == ".npy") npy = e.path().string();
  REQUIRE_FALSE(npy.empty());
  fs::remove(npy);
  REQUIRE(::mkfifo(npy.c_str(), 0644) == 0);
  r = cli("report '" + run + "'");
  CHECK(r.rc == 1);
  CHECK(r.out.find("FIFO") != std::string::npos);
  CHECK(r.seconds < 20);
  fs::remove(npy);
  fs::create_symlink("/dev/zero", npy);
  r = cli("report '" + run + "'");
  CHECK(r.rc == 1);
  CHECK(r.out.find("character device") != std::string::npos);
}

TEST_CASE("run directories: never silently replaced, mixed or partial ones are reported") {
  // stories260K (512 tokens): what is checked is the run directory, not the model; knn over gpt2-tiny's 50257
  // tokens cost 5 s of CPU per run here, for nothing.
  std::string g = vl_test::fixture("stories260K/stories260K.bin");
  if (g.empty()) return;
  std::string run = vl_test::temp_dir("rundir") + "/run";
  Run r = cli("knn '" + g + "' --k 3 --out '" + run + "'");
  REQUIRE(r.rc == 0);
  const std::string first = vl_test::read_file(run + "/knn.json");
  // A second run to the same --out is refused; nothing changes.
  r = cli("knn '" + g + "' --k 5 --out '" + run + "'");
  INFO(r.out);
  CHECK(r.rc == 1);
  CHECK(r.out.find("--force") != std::string::npos);
  CHECK(vl_test::read_file(run + "/knn.json") == first);
  // Another kind in the same directory is fine.
  CHECK(cli("spectrum '" + g + "' --out '" + run + "'").rc == 0);
  CHECK(cli("report '" + run + "'").rc == 0);
  // A side file from another run (what an interrupted overwrite or a concurrent writer left) is reported.
  std::string other = vl_test::temp_dir("rundir2") + "/run";
  REQUIRE(cli("knn '" + g + "' --k 5 --out '" + other + "'").rc == 0);
  fs::copy_file(other + "/knn.in_degree.npy", run + "/knn.in_degree.npy", fs::copy_options::overwrite_existing);
  r = cli("report '" + run + "'");
  CHECK(r.rc == 1);
  CHECK(r.out.find("mixed run directory: 'knn.in_degree.npy'") != std::string::npos);
  // --force replaces the whole result.
  r = cli("knn '" + g + "' --k 5 --out '" + run + "' --force");
  CHECK(r.rc == 0);
  CHECK(cli("report '" + run + "'").rc == 0);
  CHECK(nlohmann::json::parse(vl_test::read_file(run + "/knn.json"))["settings"]["k"] == 5);
  // Side files without their manifest (an interrupted first write): partial.
  fs::remove(run + "/knn.json");
  r = cli("report '" + run + "'");
  CHECK(r.rc == 1);
  CHECK(r.out.find("partial run directory") != std::string::npos);
  CHECK(r.out.find("knn.json") != std::string::npos);
}

TEST_CASE("a failed train leaves no skeleton directory") {
  std::string base = vl_test::temp_dir("trainfail");
  Run r = cli("train --model gpt --synthetic --rope-theta 0 --positions rope --steps 5 --out '" + base + "/a'");
  INFO(r.out);
  CHECK(r.rc == 2);
  CHECK_FALSE(fs::exists(base + "/a"));
  r = cli("train --model gpt --synthetic --lr 1e30 --steps 30 --out '" + base + "/b'");
  INFO(r.out);
  CHECK(r.rc == 1);  // "training diverged at step N"
  CHECK_FALSE(fs::exists(base + "/b"));
}

TEST_CASE("every command that reads a prompt takes --prompt-ids (lens, project, attribute, features)") {
  std::string s = vl_test::fixture("stories260K/stories260K.bin");
  REQUIRE(!s.empty());
  const std::string by_text = stdout_of("lens '" + s + "' --prompt \"Once upon a time\" --format csv");
  // The same ids as the text encodes to (BOS included by the llama2.c tokenizer).
  auto tok = vocablens::load_tokenizer_for(s, "");
  auto ids = tok->encode("Once upon a time");
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  CHECK(stdout_of("lens '" + s + "' --prompt-ids " + list + " --format csv") == by_text);
  CHECK(stdout_of("project '" + s + "' --prompt-ids " + list + " --hook resid_post.2 --format csv") ==
        stdout_of("project '" + s + "' --prompt \"Once upon a time\" --hook resid_post.2 --format csv"));
  CHECK(stdout_of("attribute '" + s + "' --prompt-ids " + list + " --target '#403' --format csv") ==
        stdout_of("attribute '" + s + "' --prompt \"Once upon a time\" --target '#403' --format csv"));
  // The feature lens of a generated SAE (on gpt2-tiny, the generator's model): the same features fire for the
  // ids as for the text.
  const std::string g = vl_test::fixture("gpt2-tiny"), dir = vl_test::temp_dir("prompt-ids-features");
  REQUIRE(!g.empty());
  std::string gen_out;
  REQUIRE(vl_test::run_command("/usr/bin/python3 " +
                                   vl_test::shq(std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/sae/make_saes.py") +
                                   " --standard-only " + vl_test::shq(dir + "/saes") + " 2>&1",
                               gen_out) == 0);
  auto gtok = vocablens::load_tokenizer_for(g, "");
  std::string glist;
  for (auto id : gtok->encode("The Eiffel Tower is in")) glist += (glist.empty() ? "" : ",") + std::to_string(id);
  const std::string sae = " --sae " + vl_test::shq(dir + "/saes/saelens_standard");
  CHECK(stdout_of("features '" + g + "'" + sae + " --prompt-ids " + glist + " --format csv") ==
        stdout_of("features '" + g + "'" + sae + " --prompt \"The Eiffel Tower is in\" --no-bos --format csv"));
  Run r = cli("lens '" + s + "' --prompt-ids 1,999");
  CHECK(r.rc == 2);
  CHECK(r.out.find("outside the vocabulary") != std::string::npos);
  r = cli("attribute '" + s + "' --prompt-ids 1,403 --prompt \"Once\" --target '#403'");
  CHECK(r.rc == 2);
  CHECK(r.out.find("give --prompt or --prompt-ids, not both") != std::string::npos);
  r = cli("features '" + s + "' --sae x --prompt-ids 1,403 --bos");
  CHECK(r.rc == 2);
  CHECK(r.out.find("--prompt-ids are used exactly as given") != std::string::npos);
  r = cli("attribute '" + s + "' --target '#403'");
  CHECK(r.rc == 2);
  CHECK(r.out.find("--prompt: is required (text, or token ids as --prompt-ids)") != std::string::npos);
}

TEST_CASE("typos: nearest command and option, exit 2") {
  Run r = cli("lense x");
  CHECK(r.rc == 2);
  CHECK(r.out.find("unknown command 'lense'; did you mean 'lens'?") != std::string::npos);
  std::string s = vl_test::fixture("stories260K/stories260K.bin");
  if (s.empty()) return;
  r = cli("heads '" + s + "' --topk 5");
  CHECK(r.rc == 2);
  CHECK(r.out.find("unknown option '--topk'; did you mean '--top-k'?") != std::string::npos);
  r = cli("heads '" + s + "' --layer");  // a missing value: still a usage error
  CHECK(r.rc == 2);
  CHECK(cli("--help").rc == 0);
}

TEST_CASE("progress on heads over all heads, knn and neurons (VOCABLENS_PROGRESS=1)") {
  std::string s = vl_test::fixture("stories260K/stories260K.bin");
  if (s.empty()) return;
  Run r = cli("heads '" + s + "' --top-k 3 --no-spectra --format json", "VOCABLENS_PROGRESS=1");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(r.out.find("100.0%  80/80 circuits") != std::string::npos);
  r = cli("neurons '" + s + "' --layer 1 --top-k 3 --format json", "VOCABLENS_PROGRESS=1");
  CHECK(r.out.find("100.0%  516/516 vectors") != std::string::npos);
  r = cli("knn '" + s + "' --k 3 --format json", "VOCABLENS_PROGRESS=1");  // (over gpt2-tiny: 5 s of CPU)
  CHECK(r.out.find("100.0%  512/512 rows") != std::string::npos);
  // Without a terminal and without the variable: no bar.
  r = cli("heads '" + s + "' --layer 0 --head 0 --top-k 3 --format json", "VOCABLENS_PROGRESS=0");
  CHECK(r.out.find("% ") == std::string::npos);
}

TEST_CASE("off a terminal, a corpus pass prints a progress line per interval with tokens per second and the ETA") {
  std::string m = vl_test::fixture("gpt2-tiny");
  REQUIRE(!m.empty());
  const std::string corpus = std::string(vl_test::source_dir_path()) + "/docs/examples/heldout.txt";
  // Interval 0: a line after every window but the last (stderr here is a pipe, not a terminal).
  Run r = cli("lens '" + m + "' --corpus '" + corpus + "' --format json", "VOCABLENS_PROGRESS_INTERVAL=0");
  INFO(r.out);
  CHECK(r.rc == 0);
  size_t lines = 0, rated = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("lens --corpus: ", 0) != 0) continue;
    ++lines;
    CHECK(line.find('\r') == std::string::npos);            // lines, not a redrawn bar
    CHECK(line.find("/2215 tokens") != std::string::npos);  // predicted tokens of the file (2216 tokens, heldout.txt)
    if (line.find(" tokens/s · ETA ") != std::string::npos) ++rated;
  }
  CHECK(lines == 17);  // 18 windows of 128
  CHECK(rated >= 1);   // once half a second has passed (the pass takes more than a second of CPU)
  // The default interval (30 s) prints nothing for this short pass.
  r = cli("lens '" + m + "' --corpus '" + corpus + "' --format json");
  CHECK(r.out.find("lens --corpus:") == std::string::npos);
}

TEST_CASE("tables print 4 significant digits and invisible tokens visibly") {
  CHECK(vocablens::display_text("a\xE2\x80\x8A"
                                "b") == "a<U+200A>b");
  CHECK(vocablens::display_text("\xC2\xA0") == "<U+00A0>");
  CHECK(vocablens::display_text("\xEF\xBB\xBF") == "<U+FEFF>");
  CHECK(vocablens::undisplay_text("a<U+200A>b") ==
        "a\xE2\x80\x8A"
        "b");
  CHECK(vocablens::display_text("caf\xC3\xA9") == "caf\xC3\xA9");
  std::string s = vl_test::fixture("stories260K/stories260K.bin");
  if (s.empty()) return;
  const std::string table = stdout_of("heads '" + s + "' --layer 0 --head 0 --kind ov --top-k 5 --no-spectra --no-color");
  auto j =
      nlohmann::json::parse(stdout_of("heads '" + s + "' --layer 0 --head 0 --kind ov --top-k 5 --no-spectra --format json"));
  INFO(table);
  // Every score of the JSON appears in the table with 4 significant digits.
  std::string rows;
  for (const auto& row : j["tables"][0]["rows"]) rows += row.dump() + "\n";
  INFO(rows);
  int found = 0;
  for (const auto& row : j["tables"][0]["rows"])
    for (const auto& v : row)
      if (v.is_number_float()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
        if (table.find(buf) != std::string::npos) ++found;
      }
  CHECK(found >= 5);
}

TEST_CASE("error text: llama2.c folders, non-UTF-8 bytes, NaN never becomes 0") {
  std::string s = vl_test::fixture("stories260K");
  if (s.empty()) return;
  Run r = cli("inspect '" + s + "'");
  CHECK(r.rc == 1);
  CHECK(r.out.find("stories260K.bin") != std::string::npos);
  CHECK(r.out.find("pass the file itself") != std::string::npos);
  std::string d = vl_test::temp_dir("utf8");
  vl_test::write_file(d + "/config.json", "{\"architectures\": [\"Bad\xff\xfeName\"]}");
  r = cli("inspect '" + d + "'");
  INFO(r.out);
  CHECK(r.rc == 1);
  CHECK(r.out.find("\\xff") != std::string::npos);
  CHECK(r.out.find("\xff") == std::string::npos);
  // A NaN in the final norm, continued on purpose: KL and entropy are null, never 0.
  std::string bytes = vl_test::read_file(s + "/stories260K.bin");
  const float nan = std::nanf("");
  const size_t rms_final = 28 + 4 * (512 * 64 + 5 * 64 + 2 * 5 * 64 * 64 + 2 * 5 * 32 * 64 + 5 * 64 + 3 * 5 * 172 * 64);
  std::memcpy(&bytes[rms_final], &nan, 4);
  std::string m = vl_test::temp_dir("nanlens");
  vl_test::write_file(m + "/m.bin", bytes);
  fs::copy_file(s + "/tok512.bin", m + "/tok512.bin");
  r = cli("lens '" + m + "/m.bin' --prompt-ids 1,403,407 --format json");
  CHECK(r.rc == 1);
  CHECK(r.out.find("rms_final") != std::string::npos);
  std::string json = stdout_of("lens '" + m + "/m.bin' --prompt-ids 1,403,407 --format json --allow-nonfinite");
  auto j = nlohmann::json::parse(json);
  for (const auto& L : j["summary"]["per_layer"]) {
    INFO(L.dump());
    CHECK(L["mean_kl_final"].is_null());
  }
}

TEST_CASE("run directories: a concurrent writer is refused while another holds the directory") {
  std::string dir = vl_test::temp_dir("lock") + "/run";
  vocablens::Result r;
  r.kind = "sample";
  const float v[3] = {1, 2, 3};
  r.arrays["x"] = vocablens::NdArray::f32({3}, v);
  vocablens::write_result(r, dir);
  // Another writer (here: a second open file description in this process) holds the directory's lock.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  try {
    vocablens::write_result(r, dir);
    FAIL("a second writer was let in");
  } catch (const vocablens::FormatError& e) {
    CHECK(std::string(e.what()).find("another vocablens process is writing") != std::string::npos);
  }
  ::close(fd);
  CHECK_NOTHROW(vocablens::write_result(r, dir));
  // The library default replaces (the CLI passes replace = --force); replace = false refuses.
  vocablens::ExportFormats keep;
  keep.replace = false;
  CHECK_THROWS_AS(vocablens::write_result(r, dir, keep), vocablens::FormatError);
  // What was written lists its side file with size and SHA-256, and reads back.
  auto j = nlohmann::json::parse(vl_test::read_file(dir + "/sample.json"));
  CHECK(j["files"]["sample.x.npy"]["bytes"].get<int64_t>() == static_cast<int64_t>(fs::file_size(dir + "/sample.x.npy")));
  CHECK(vocablens::read_run_directory(dir).size() == 1);
}

TEST_CASE("values that meant something else: refused, warned about or read as on the other surfaces") {
  std::string g = vl_test::fixture("gpt2-tiny");
  std::string s = vl_test::fixture("stories260K/stories260K.bin");
  REQUIRE(!g.empty());
  REQUIRE(!s.empty());
  const std::string d = vl_test::temp_dir("leftovers");
  // generate --steer-layer -1 is the last block, as the `steer` analysis reads it over HTTP and in Python
  // (it used to steer the default block, n_layers / 2); one past the end from either side is refused.
  const std::string gen = "generate '" + s + "' --prompt 'Once upon a time' --steps 12 --steer '#300-#301' --steer-scale 8";
  const std::string last = stdout_of(gen + " --steer-layer -1");
  CHECK(last == stdout_of(gen + " --steer-layer 4"));  // stories260K: 5 blocks
  CHECK(last.find(", layer 4):") != std::string::npos);
  CHECK(stdout_of(gen).find(", layer 2):") != std::string::npos);  // the default, n_layers / 2
  Run r = cli(gen + " --steer-layer -6");
  CHECK(r.rc != 0);
  CHECK(r.out.find("--steer-layer -6 is out of range") != std::string::npos);
  // demo --steps 0 / -5 used to train the default 1 000 steps.
  for (const char* bad : {"0", "-5"}) {
    r = cli(std::string("demo --out '") + d + "/demo' --steps " + bad);
    INFO(r.out);
    CHECK(r.rc != 0);
    CHECK(r.out.find("--steps") != std::string::npos);
    CHECK(r.seconds < 20);
    CHECK_FALSE(fs::exists(d + "/demo"));
  }
  // lens --out "" exited 0 having written nothing.
  r = cli("lens '" + g + "' --prompt 'The cat' --out ''");
  CHECK(r.rc != 0);
  CHECK(r.out.find("--out") != std::string::npos);
  CHECK(r.out.find("is empty") != std::string::npos);
  // VOCABLENS_THREADS that is not a positive whole number: said on stderr (it used to be ignored silently).
  for (const char* bad : {"-4", "four", "2x"}) {
    r = cli("tokenize '" + g + "' 'Hello'", std::string("VOCABLENS_THREADS=") + bad);
    CHECK(r.rc == 0);
    CHECK(r.out.find(std::string("VOCABLENS_THREADS='") + bad + "' is not a whole number") != std::string::npos);
  }
  r = cli("tokenize '" + g + "' 'Hello'", "VOCABLENS_THREADS=2");
  CHECK(r.out.find("VOCABLENS_THREADS") == std::string::npos);
  // tokenize - reads standard input with a bound (it read /dev/zero until memory ran out).
  r = cli("tokenize '" + g + "' - < /dev/zero");
  CHECK(r.rc != 0);
  CHECK(r.out.find("more than 64 MB") != std::string::npos);
  CHECK(r.seconds < 30);
  // spectrum --matrix of a matrix whose rows are all alike: ratios null and a warning, not 0.0 and 8 of 8.
  std::vector<float> same(100 * 8, 0.37f);
  vocablens::write_npy(d + "/const.npy", vocablens::NdArray::f32({100, 8}, same.data()));
  r = cli("spectrum '" + g + "' --matrix '" + d + "/const.npy' --format json", "", d + "/spectrum.err");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["summary"]["components_for_variance"]["90%"].is_null());
  CHECK(j["summary"]["cumulative_explained_variance"]["1"].is_null());
  CHECK(vl_test::read_file(d + "/spectrum.err").find("warning: spectrum: the total variance is") != std::string::npos);
}
