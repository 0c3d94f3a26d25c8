// Positional structure: learned W_pos (gpt2-tiny) against brute force; sinusoidal and rotary encodings
// against their closed forms (the RoPE kernel against explicit rotation matrices); periodicity of the
// principal components on a synthetic helix.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "vocablens/error.hpp"
#include "vocablens/gguf.hpp"
#include "vocablens/model.hpp"
#include "vocablens/positions.hpp"

namespace {
const double kPi = std::acos(-1.0);
}

TEST_CASE("positions: sinusoidal table and its Toeplitz cosine kernel", "[positions]") {
  vocablens::init_runtime();
  const int64_t n = 200, d = 32;
  at::Tensor P = vocablens::sinusoidal_positions(n, d);
  REQUIRE(P.sizes() == at::IntArrayRef({n, d}));
  CHECK(P[5][2].item<float>() == Approx(std::sin(5 * std::pow(10000.0, -2.0 / d))).margin(1e-7));
  CHECK(P[5][3].item<float>() == Approx(std::cos(5 * std::pow(10000.0, -2.0 / d))).margin(1e-7));
  vocablens::PositionOptions o;
  auto r = vocablens::position_structure(P, "sinusoidal", o, 10000.0);
  CHECK(r.n_positions == n);
  double worst = 0;
  for (int64_t p = 0; p < n; ++p)
    for (int64_t q = 0; q < n; ++q) {
      double want = 0;
      for (int64_t i = 0; i < d / 2; ++i) want += std::cos(static_cast<double>(p - q) * std::pow(10000.0, -2.0 * i / d));
      want /= static_cast<double>(d / 2);
      worst = std::max(worst, std::abs(r.cosine[static_cast<size_t>(p * n + q)] - want));
    }
  CHECK(worst < 2e-6);
  CHECK(r.toeplitz_deviation < 2e-6);
  CHECK(r.cosine_by_offset[0] == Approx(1.0).margin(1e-6));
}

TEST_CASE("positions: rotary kernel equals tr(R_p^T R_q)/d_head of the explicit rotations", "[positions]") {
  vocablens::init_runtime();
  const int64_t n = 64, dh = 16;
  const double theta = 500.0;
  at::Tensor P = vocablens::rotary_position_features(n, dh, theta);
  auto r = vocablens::position_structure(P, "rotary", {}, theta);
  // Explicit rotation matrices, interleaved pairs (2i, 2i+1) — any pairing gives the same trace.
  auto R = [&](int64_t p) {
    at::Tensor m = at::zeros({dh, dh}, at::kDouble);
    for (int64_t i = 0; i < dh / 2; ++i) {
      double a = static_cast<double>(p) * std::pow(theta, -2.0 * i / dh);
      m[2 * i][2 * i] = std::cos(a);
      m[2 * i][2 * i + 1] = -std::sin(a);
      m[2 * i + 1][2 * i] = std::sin(a);
      m[2 * i + 1][2 * i + 1] = std::cos(a);
    }
    return m;
  };
  double worst = 0;
  for (int64_t p = 0; p < n; p += 3)
    for (int64_t q = 0; q < n; q += 5) {
      double want = at::trace(at::mm(R(p).t(), R(q))).item<double>() / dh;
      worst = std::max(worst, std::abs(r.cosine[static_cast<size_t>(p * n + q)] - want));
    }
  CHECK(worst < 2e-6);
  CHECK(r.toeplitz_deviation < 2e-6);
  // The rows are unit vectors; the spectrum has at most d_head values, all of the top ones positive.
  CHECK(r.spectrum.k == 16);
  CHECK(r.spectrum.norms.mean == Approx(1.0).margin(1e-6));
  CHECK_THROWS_AS(vocablens::rotary_position_features(4, 7), vocablens::UsageError);
}

TEST_CASE("positions: a synthetic helix is found (low frequencies, few components)", "[positions]") {
  vocablens::init_runtime();
  const int64_t n = 256, d = 24;
  at::manual_seed(1);
  at::Tensor Q = std::get<0>(at::linalg_qr(at::randn({d, d}, at::kDouble)));
  at::Tensor t = at::arange(n, at::kDouble) * (2 * kPi / n);
  // A helix in the first 3 coordinates: circle of radius 3 at frequency 1, a weaker frequency-3 wobble.
  at::Tensor H = at::zeros({n, d}, at::kDouble);
  H.select(1, 0).copy_(3 * at::cos(t));
  H.select(1, 1).copy_(3 * at::sin(t));
  H.select(1, 2).copy_(1 * at::cos(3 * t));
  H = at::mm(H + 0.01 * at::randn({n, d}, at::kDouble), Q.t()).to(at::kFloat);
  vocablens::PositionOptions o;
  o.components = 3;
  auto r = vocablens::position_structure(H, "learned", o);
  REQUIRE(r.components.size() == 3u);
  CHECK(r.components[0].dominant_frequency == 1);
  CHECK(r.components[1].dominant_frequency == 1);
  CHECK(r.components[2].dominant_frequency == 3);
  for (const auto& c : r.components) CHECK(c.power_fraction > 0.99);
  CHECK(r.components[0].variance_ratio + r.components[1].variance_ratio > 0.9);
  CHECK(r.spectrum.cumulative_explained_variance[2] > 0.999);
}

TEST_CASE("positions: gpt2-tiny W_pos and stories260K rotary from the model", "[positions][fixtures]") {
  vocablens::init_runtime();
  std::string dir = vl_test::fixture("gpt2-tiny");
  if (!dir.empty()) {
    auto m = vocablens::load_model(dir);
    auto r = vocablens::position_structure(m, {});
    CHECK(r.source == "learned");
    CHECK(r.n_positions == 128);
    CHECK(r.dim == 64);
    at::Tensor U = m.W_pos().to(at::kDouble);
    U = U / U.norm(2, 1, true);
    at::Tensor C = at::mm(U, U.t());
    at::Tensor got = at::from_blob(r.cosine.data(), {128, 128}, at::TensorOptions().dtype(at::kFloat)).to(at::kDouble);
    CHECK((got - C).abs().max().item<double>() < 1e-6);
    at::Tensor sv = at::linalg_svdvals(m.W_pos().to(at::kDouble));
    for (int64_t j = 0; j < r.spectrum.k; ++j)
      CHECK(r.spectrum.singular_values[static_cast<size_t>(j)] == Approx(sv[j].item<double>()).epsilon(1e-9));
    CHECK(r.toeplitz_deviation > 0.1);  // random weights: no translation structure
    auto res = r.to_result();
    CHECK(res.kind == "positions");
    CHECK(res.arrays.at("cosine").shape == std::vector<int64_t>{128, 128});
    vocablens::PositionOptions o;
    o.source = vocablens::PositionSource::Sinusoidal;
    o.max_positions = 100;
    auto s = vocablens::position_structure(m, o);
    CHECK(s.source == "sinusoidal");
    CHECK(s.n_positions == 100);
    CHECK(s.dim == 64);
  }
  std::string sdir = vl_test::fixture("stories260K");
  if (!sdir.empty()) {
    auto m = vocablens::load_model(sdir + "/stories260K.bin");
    auto r = vocablens::position_structure(m, {});
    CHECK(r.source == "rotary");
    CHECK(r.dim == 8);
    CHECK(r.n_positions == 512);
    CHECK(r.base == 10000.0);
    vocablens::PositionOptions o;
    o.source = vocablens::PositionSource::Learned;
    CHECK_THROWS_AS(vocablens::position_structure(m, o), vocablens::UsageError);
  }
}

// ---- the four geometry commands end to end (vocablens spectrum / neighbours / knn / positions) ----

#include <nlohmann/json.hpp>

#include "vocablens/npy.hpp"

namespace {
std::string sq(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') o += "'\\''";
    else o.push_back(c);
  }
  return o + "'";
}
}  // namespace

TEST_CASE("geometry CLI: spectrum, neighbours, knn and positions on stories260K", "[positions][cli]") {
  std::string dir = vl_test::fixture("stories260K");
  if (dir.empty()) return;
  std::string cli = vl_test::cli_path();
  REQUIRE(!cli.empty());
  const std::string model = sq(dir + "/stories260K.bin");
  const std::string out = vl_test::temp_dir("geometry-cli");
  std::string text;

  REQUIRE(vl_test::run_command(sq(cli) + " spectrum " + model + " --k 8 --out " + sq(out) + " --no-color", text) == 0);
  CHECK(text.find("effective rank") != std::string::npos);
  CHECK(text.find("anisotropy") != std::string::npos);
  auto spec = nlohmann::json::parse(vl_test::read_file(out + "/spectrum.json"));
  CHECK(spec["summary"]["singular_values"].size() == 8u);
  CHECK(vocablens::read_npy(out + "/spectrum.right_vectors.npy").shape == std::vector<int64_t>{8, 64});

  REQUIRE(vl_test::run_command(
              sq(cli) + " neighbours " + model + " " + sq("#300 - #301 + 0.5*#302") + " --k 5 --format json 2>/dev/null", text) ==
          0);
  auto nb = nlohmann::json::parse(text);
  CHECK(nb["kind"] == "neighbours");
  CHECK(nb["summary"]["neighbours"].size() == 5u);
  CHECK(nb["summary"]["terms"].size() == 3u);

  REQUIRE(vl_test::run_command(sq(cli) + " knn " + model + " --k 5 --out " + sq(out) + " --no-color", text) == 0);
  CHECK(text.find("k-NN graph") != std::string::npos);
  CHECK(vocablens::read_npy(out + "/knn.indices.npy").shape == std::vector<int64_t>{512, 5});
  CHECK(vocablens::read_npy(out + "/knn.scores.npy").shape == std::vector<int64_t>{512, 5});

  REQUIRE(vl_test::run_command(sq(cli) + " positions " + model + " --max-positions 64 --out " + sq(out) + " --no-color", text) ==
          0);
  CHECK(text.find("rotary") != std::string::npos);
  CHECK(vocablens::read_npy(out + "/positions.cosine.npy").shape == std::vector<int64_t>{64, 64});

  // Usage errors exit with 2 and one line.
  CHECK(vl_test::run_command(sq(cli) + " neighbours " + model + " " + sq("#3 -"), text) == 2);
  CHECK(text.find("ends with an operator") != std::string::npos);
  CHECK(vl_test::run_command(sq(cli) + " positions " + model + " --kind learned", text) == 2);
  CHECK(vl_test::run_command(sq(cli) + " spectrum " + model + " --matrix W_pos", text) == 2);
}

// A model's rotary positions use the frequencies its forward rotates by. Llama-3.1 rope scaling: the expected
// θ_i come from llama.cpp's own converter (convert_hf_to_gguf.py wrote rope_freqs.weight, the per-frequency
// divisors, into the fixture's GGUF twin), not from our formula. GPT-NeoX's partial rotary: the rotated width
// is rotary_pct × head_dim as config.json states it.
TEST_CASE("positions: rotary from the model follows rope_scaling (llama.cpp's rope_freqs) and partial rotary",
          "[positions][fixtures]") {
  vocablens::init_runtime();
  const std::string fam = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/families/";
  // mean_i cos(Δ θ_i) for Δ = 0..n-1: the kernel of the rotary rows (positions.hpp).
  auto kernel_error = [](const vocablens::PositionResult& r, const std::vector<double>& theta) {
    double worst = 0;
    for (int64_t d = 0; d < r.n_positions; ++d) {
      double want = 0;
      for (double t : theta) want += std::cos(static_cast<double>(d) * t);
      want /= static_cast<double>(theta.size());
      worst = std::max(worst, std::abs(r.cosine_by_offset[static_cast<size_t>(d)] - want));
    }
    return worst;
  };
  {
    auto m = vocablens::load_model(fam + "llama3");
    auto r = vocablens::position_structure(m, {});
    auto g = vocablens::read_gguf(fam + "llama3/llama3.gguf");
    const auto* rf = g.find("rope_freqs.weight");
    REQUIRE(rf != nullptr);
    REQUIRE(rf->type == vocablens::GgmlType::F32);
    const int64_t h = rf->numel();
    const double base = g.get_float("llama.rope.freq_base", 10000.0);
    const int64_t rd = g.get_int("llama.rope.dimension_count", 0);
    REQUIRE(rd == 2 * h);
    const float* div = reinterpret_cast<const float*>(g.tensor_data(*rf));
    std::vector<double> scaled, plain;
    bool bites = false;
    for (int64_t i = 0; i < h; ++i) {
      plain.push_back(std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rd)));
      scaled.push_back(plain.back() / static_cast<double>(div[i]));
      bites = bites || div[i] != 1.0f;
    }
    REQUIRE(bites);  // the fixture's scaling changes some frequencies
    CHECK(r.dim == rd);
    CHECK(r.scaling == "llama3 x8");
    CHECK(kernel_error(r, scaled) < 1e-5);  // llama.cpp stores the divisors as float32
    CHECK(kernel_error(r, plain) > 1e-2);   // and ignoring them would show
  }
  {
    auto cfg = nlohmann::json::parse(vl_test::read_file(fam + "gpt_neox/config.json"));
    const int64_t d_head = cfg["hidden_size"].get<int64_t>() / cfg["num_attention_heads"].get<int64_t>();
    const auto rd = static_cast<int64_t>(cfg["rotary_pct"].get<double>() * static_cast<double>(d_head));
    const double base = cfg["rotary_emb_base"].get<double>();
    auto r = vocablens::position_structure(vocablens::load_model(fam + "gpt_neox"), {});
    CHECK(r.dim == rd);
    CHECK(r.scaling.empty());
    std::vector<double> theta;
    for (int64_t i = 0; i < rd / 2; ++i) theta.push_back(std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rd)));
    CHECK(kernel_error(r, theta) < 1e-6);
  }
}
