// FAISS baseline for the k-NN graph: IndexFlatIP (exact inner product, BLAS sgemm blocks + heaps) over
// the unit rows U.npy written by bench_geometry, k + 1 results per row with the row itself dropped.
// Built and run by bench/run_geometry_bench.sh (g++ directly; needs Debian's libfaiss-dev):
//
//   g++ -O3 -std=c++17 -fopenmp bench/faiss_knn.cpp -o faiss_knn -lfaiss -lblas -llapack
//   OMP_NUM_THREADS=2 ./faiss_knn DIR/U.npy 10 DIR/faiss_indices.npy
//
// Reads/writes .npy (float32 C-order in, int64 out) without other dependencies; prints JSON timings.
#include <faiss/IndexFlat.h>
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

std::vector<float> read_npy_f32(const std::string& path, int64_t& rows, int64_t& cols) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  char magic[8];
  f.read(magic, 8);
  if (std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error(path + ": not a .npy file");
  uint32_t hlen = 0;
  if (magic[6] == 1) {
    uint16_t h16;
    f.read(reinterpret_cast<char*>(&h16), 2);
    hlen = h16;
  } else {
    f.read(reinterpret_cast<char*>(&hlen), 4);
  }
  std::string header(hlen, '\0');
  f.read(header.data(), hlen);
  if (header.find("'<f4'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    throw std::runtime_error(path + ": expected a C-order <f4 array");
  auto lp = header.find('('), rp = header.find(')');
  std::string shape = header.substr(lp + 1, rp - lp - 1);
  if (std::sscanf(shape.c_str(), "%ld, %ld", &rows, &cols) != 2) throw std::runtime_error(path + ": expected 2-D");
  std::vector<float> data(static_cast<size_t>(rows * cols));
  f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
  if (!f) throw std::runtime_error(path + ": truncated");
  return data;
}

void write_npy_i64(const std::string& path, const std::vector<int64_t>& v, int64_t rows, int64_t cols) {
  std::ostringstream h;
  h << "{'descr': '<i8', 'fortran_order': False, 'shape': (" << rows << ", " << cols << "), }";
  std::string header = h.str();
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t hl = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&hl), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 8));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: faiss_knn U.npy K OUT_indices.npy\n");
    return 2;
  }
  int64_t n = 0, d = 0;
  std::vector<float> U = read_npy_f32(argv[1], n, d);
  const int64_t k = std::atoll(argv[2]);
  using Clock = std::chrono::steady_clock;
  auto cpu = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  auto t0 = Clock::now();
  double c0 = cpu();
  faiss::IndexFlatIP index(static_cast<faiss::Index::idx_t>(d));
  index.add(static_cast<faiss::Index::idx_t>(n), U.data());
  std::vector<float> D(static_cast<size_t>(n * (k + 1)));
  std::vector<faiss::Index::idx_t> I(static_cast<size_t>(n * (k + 1)));
  index.search(static_cast<faiss::Index::idx_t>(n), U.data(), static_cast<faiss::Index::idx_t>(k + 1), D.data(), I.data());
  double sec = std::chrono::duration<double>(Clock::now() - t0).count(), cpu_sec = cpu() - c0;
  // Drop the row itself (normally first; anywhere if ties put it elsewhere; else the last result).
  std::vector<int64_t> out(static_cast<size_t>(n * k));
  int64_t self_missing = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t w = 0;
    bool dropped = false;
    for (int64_t t = 0; t <= k && w < k; ++t) {
      int64_t j = I[static_cast<size_t>(i * (k + 1) + t)];
      if (!dropped && j == i) {
        dropped = true;
        continue;
      }
      out[static_cast<size_t>(i * k + w++)] = j;
    }
    if (!dropped) ++self_missing;
  }
  write_npy_i64(argv[3], out, n, k);
  std::printf(
      "{\"faiss_seconds\": %.3f, \"faiss_cpu_seconds\": %.3f, \"rows\": %ld, \"dim\": %ld, \"k\": %ld, \"omp_threads\": %d, "
      "\"self_not_in_top\": %ld}\n",
      sec, cpu_sec, n, d, k, omp_get_max_threads(), self_missing);
  return 0;
}
