// lens --prompts: the prompts file reader (plain lines, JSON Lines, errors naming the line), and the batch's
// arrays and tidy table against single-prompt lens runs read cell by cell (padding, readout positions).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens_batch.hpp"
#include "vocablens/model.hpp"
#include "vocablens/token_id.hpp"
#include "vocablens/tokenizer.hpp"

namespace {

std::string prompts_file(const std::string& name, const std::string& text) {
  std::string p = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/vl_lens_batch_" + name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::string prompts_error(const std::string& path) {
  try {
    vocablens::read_lens_prompts(path);
  } catch (const vocablens::FormatError& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("lens --prompts: the prompts file", "[lens_batch]") {
  auto plain = vocablens::read_lens_prompts(prompts_file("plain.txt", "Once upon a time\r\n\n  \nThe cat {sat}\n"));
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].prompt == "Once upon a time");
  CHECK(plain[0].line == 1);
  CHECK(plain[1].prompt == "The cat {sat}");
  CHECK(plain[1].line == 4);
  CHECK(plain[1].target.empty());
  auto jl = vocablens::read_lens_prompts(
      prompts_file("p.jsonl", "{\"prompt\": \"a\\nb\", \"target\": \" x\"}\n\n{\"prompt\": \"c\"}\n"));
  REQUIRE(jl.size() == 2);
  CHECK(jl[0].prompt == "a\nb");
  CHECK(jl[0].target == " x");
  CHECK(jl[1].line == 3);
  // A UTF-8 byte order mark is the file's encoding, not text: the JSON Lines file is still JSON Lines, and a
  // plain file's first prompt does not start with U+FEFF.
  auto bom = vocablens::read_lens_prompts(prompts_file("bom.jsonl", "\xEF\xBB\xBF{\"prompt\": \"a\", \"target\": \" x\"}\n"));
  REQUIRE(bom.size() == 1);
  CHECK(bom[0].prompt == "a");
  CHECK(bom[0].target == " x");
  auto bom_plain = vocablens::read_lens_prompts(prompts_file("bom.txt", "\xEF\xBB\xBFOnce upon a time\n"));
  REQUIRE(bom_plain.size() == 1);
  CHECK(bom_plain[0].prompt == "Once upon a time");
  CHECK(prompts_error(prompts_file("bad.jsonl", "{\"prompt\": \"a\"}\nplain\n")).find("line 2: not a JSON object") !=
        std::string::npos);
  CHECK(prompts_error(prompts_file("bad2.jsonl", "{\"text\": \"a\"}\n")).find("line 1: expected") != std::string::npos);
  CHECK(prompts_error(prompts_file("bad3.jsonl", "{\"prompt\": \"a\", \"target\": 3}\n"))
            .find("line 1: \"target\" must be a string") != std::string::npos);
  CHECK(prompts_error(prompts_file("empty.txt", "\n \n")).find("no prompts") != std::string::npos);
  CHECK(prompts_error("/nonexistent/prompts.txt").find("no such file") != std::string::npos);
}

TEST_CASE("lens --prompts: arrays and table equal single-prompt lens runs", "[lens_batch][fixtures]") {
  vocablens::init_runtime();
  auto dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  vocablens::Model m = vocablens::load_model(dir + "/stories260K.bin");
  auto tok = vocablens::load_tokenizer_for(dir + "/stories260K.bin");
  std::vector<vocablens::LensPrompt> ps = {{"Once upon a time, there was a", "", 1}, {"Lily went", "the", 2}, {"Tom", "", 3}};
  vocablens::LensOptions lo;
  lo.top_k = 3;
  auto b = vocablens::logit_lens_batch(m, *tok, ps, lo);
  REQUIRE(b.runs.size() == 3);
  vocablens::Result r = b.to_result(tok.get());
  const auto& tp = r.arrays.at("target_prob");
  REQUIRE(tp.shape.size() == 3);
  const int64_t P = tp.shape[0], n = tp.shape[1], T = tp.shape[2];
  CHECK(P == 3);
  const float* tpv = reinterpret_cast<const float*>(tp.bytes.data());
  const int64_t* rkv = reinterpret_cast<const int64_t*>(r.arrays.at("target_rank").bytes.data());
  const auto& tab = r.tables.at(0);
  size_t row = 0;
  for (int64_t p = 0; p < P; ++p) {
    auto ids = tok->encode(ps[static_cast<size_t>(p)].prompt);
    vocablens::LensOptions one = lo;
    if (!ps[static_cast<size_t>(p)].target.empty())
      one.target = *vocablens::single_token_id(*tok, ps[static_cast<size_t>(p)].target);
    one.save_log_probs = true;  // to tell a float32 near-tie from a wrong rank
    auto L = vocablens::logit_lens(m, ids, one);
    const int64_t V = L.vocab_size;
    const int64_t Tp = static_cast<int64_t>(ids.size());
    CHECK(L.n_layers() == n);
    for (int64_t l = 0; l < n; ++l)
      for (int64_t j = 0; j < T; ++j) {
        const float got = tpv[(p * n + l) * T + j];
        const int64_t rk = rkv[(p * n + l) * T + j];
        if (j < Tp) {
          // The batched forward sums in another order: equal to float32 rounding, ranks equal up to the tokens
          // whose log-probability is within 1e-5 of the target's in the single-prompt run.
          const float want = L.target_prob[L.at(l, j)];
          CHECK(((std::isnan(got) && std::isnan(want)) || std::fabs(got - want) <= 1e-5f * std::max(1.0f, want)));
          const int64_t want_rk = L.target_rank[L.at(l, j)];
          if (rk != want_rk) {
            REQUIRE(want_rk > 0);
            const float* lp = L.log_probs.data() + L.at(l, j) * static_cast<size_t>(V);
            const float lt = std::log(want);
            int64_t near = 0;
            for (int64_t v = 0; v < V; ++v) near += std::fabs(lp[v] - lt) <= 1e-5f;
            CHECK(std::llabs(rk - want_rk) < near);
          }
        } else {
          CHECK(std::isnan(got));  // padding
          CHECK(rk == -1);
        }
      }
    // Readout: last position with an explicit target, else T-2; a one-token prompt without target has none.
    const int64_t ro = one.target ? Tp - 1 : Tp - 2;
    if (ro < 0) continue;
    for (int64_t l = 0; l < n; ++l, ++row) {
      REQUIRE(row < tab.rows.size());
      CHECK(tab.rows[row][0] == p);
      CHECK(tab.rows[row][3] == ro);
      CHECK(tab.rows[row][6] == rkv[(p * n + l) * T + ro]);  // the table holds the arrays' cells
      CHECK(tab.rows[row][7].get<double>() == static_cast<double>(tpv[(p * n + l) * T + ro]));
    }
  }
  CHECK(row == tab.rows.size());
  // Bad target and too-long prompts name the line.
  std::vector<vocablens::LensPrompt> bad = {{"x", " elephant", 7}};
  try {
    vocablens::logit_lens_batch(m, *tok, bad, lo);
    FAIL("no error");
  } catch (const vocablens::UsageError& e) {
    CHECK(std::string(e.what()).find("line 7: target ' elephant' is") != std::string::npos);
  }
}
