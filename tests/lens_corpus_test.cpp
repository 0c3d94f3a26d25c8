// The logit lens over a corpus file: windows overlap by one token, chunked tokenisation equals the whole
// text's, and every mean equals the same windows run through logit_lens one by one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "corpus_text.hpp"
#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/lens.hpp"
#include "vocablens/lens_corpus.hpp"
#include "vocablens/model.hpp"
#include "vocablens/tokenizer.hpp"

TEST_CASE("lens corpus: windows overlap by one token and the means equal per-window lenses", "[lens][corpus]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (dir.empty()) return;
  auto m = vocablens::load_model(dir);
  auto tok = vocablens::load_tokenizer_for(dir);
  std::string tmp = vl_test::temp_dir("lenscorpus");
  std::string path = tmp + "/corpus.txt";
  vl_test::write_file(path, vl_test::kShortCorpus);
  auto all = tok->encode(vl_test::kShortCorpus);
  REQUIRE(all.size() > 40);

  for (int64_t W : {int64_t{16}, int64_t{128}}) {
    INFO("window " << W);
    vocablens::CorpusLensOptions co;
    co.window = W;
    co.chunk_bytes = 64;  // many chunk boundaries: tokenisation must still equal the whole text's
    int calls = 0;
    co.progress = [&](uint64_t done, uint64_t total) {
      ++calls;
      CHECK(done <= total);
    };
    auto c = vocablens::logit_lens_corpus(m, *tok, path, co);
    CHECK(c.tokens == static_cast<int64_t>(all.size()));
    CHECK(c.predicted == static_cast<int64_t>(all.size()) - 1);
    CHECK(calls == c.windows);
    CHECK(c.corpus_bytes == std::string(vl_test::kShortCorpus).size());
    // The predicted tokens are every token but the first: their bytes are the text minus the first token.
    CHECK(c.bytes == std::string(vl_test::kShortCorpus).size() - tok->token_bytes(all[0]).size());
    // Reference: the same windows through logit_lens.
    const int64_t n = static_cast<int64_t>(c.layers.size());
    std::vector<double> ce(n, 0), kl(n, 0), ent(n, 0), acc(n, 0);
    int64_t windows = 0, cnt = 0;
    for (size_t s = 0; s + 1 < all.size(); s += static_cast<size_t>(W - 1)) {
      std::vector<int64_t> ids(all.begin() + s, all.begin() + std::min(all.size(), s + static_cast<size_t>(W)));
      auto L = vocablens::logit_lens(m, ids);
      ++windows;
      for (int64_t t = 0; t + 1 < L.n_positions(); ++t) {
        ++cnt;
        for (int64_t li = 0; li < n; ++li) {
          ce[li] += L.cross_entropy[L.at(li, t)];
          kl[li] += L.kl_final[L.at(li, t)];
          ent[li] += L.entropy[L.at(li, t)];
          acc[li] += L.top_id(li, t, 0) == ids[t + 1];
        }
      }
    }
    CHECK(c.windows == windows);
    REQUIRE(cnt == c.predicted);
    for (int64_t li = 0; li < n; ++li) {
      CHECK(std::abs(c.mean_cross_entropy[li] - ce[li] / cnt) <= 1e-5);
      CHECK(std::abs(c.mean_kl_final[li] - kl[li] / cnt) <= 1e-5);
      CHECK(std::abs(c.mean_entropy[li] - ent[li] / cnt) <= 1e-5);
      CHECK(std::abs(c.top1_accuracy[li] - acc[li] / cnt) <= 1e-12);
      CHECK(std::abs(c.bits_per_byte[li] - ce[li] / (std::log(2.0) * static_cast<double>(c.bytes))) <= 1e-5);
    }
  }
  // max_tokens stops early; an unreadable file is a clear error.
  vocablens::CorpusLensOptions co;
  co.window = 8;
  co.max_tokens = 10;
  auto c = vocablens::logit_lens_corpus(m, *tok, path, co);
  CHECK(c.predicted == 10);
  CHECK_THROWS_AS(vocablens::logit_lens_corpus(m, *tok, tmp + "/missing.txt"), vocablens::FormatError);
  auto r = c.to_result();
  CHECK(r.kind == "logit_lens_corpus");
  CHECK(r.arrays.at("bits_per_byte").shape == std::vector<int64_t>{4});
}
