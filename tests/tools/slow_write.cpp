// vl_slow_write --bytes N --out FILE [--chunk C] [--delay-ms D]: writes N bytes to FILE slowly, through the
// streaming atomic writer (vocablens::AtomicWriter), with the CLI's own SIGINT/SIGTERM handler installed
// (src/cli/signals.cpp), so that tests/interrupt_test.cpp can interrupt a write at a known moment. A test
// program, not part of the `vocablens` binary.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "cli/signals.hpp"
#include "vocablens/detail/atomic_file.hpp"

namespace {

int usage() {
  std::fprintf(stderr, "usage: vl_slow_write --bytes N --out FILE [--chunk C] [--delay-ms D]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  vocablens::cli::install_signal_handlers();
  std::string out;
  long long bytes = -1, chunk = 65536, delay_ms = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    char* end = nullptr;
    const long long v = std::strtoll(argv[i + 1], &end, 10);
    if (flag == "--out") out = argv[i + 1];
    else if (*end != '\0') return usage();
    else if (flag == "--bytes") bytes = v;
    else if (flag == "--chunk") chunk = v;
    else if (flag == "--delay-ms") delay_ms = v;
    else return usage();
  }
  if (argc % 2 == 0 || out.empty() || bytes < 0 || chunk <= 0 || delay_ms < 0) return usage();
  try {
    vocablens::AtomicWriter w(out);
    // The test waits for this line before sending its signal: from here on a write is in flight.
    std::fprintf(stderr, "writing %s\n", w.temp_path().c_str());
    std::fflush(stderr);
    std::string block(static_cast<size_t>(chunk), '\0');
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>('a' + i % 26);
    for (long long done = 0; done < bytes;) {
      const long long n = std::min(chunk, bytes - done);
      w.write(std::string_view(block.data(), static_cast<size_t>(n)));
      done += n;
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    w.commit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vl_slow_write: %s\n", e.what());
    return 1;
  }
  fmt::print("wrote {} bytes to {}\n", bytes, out);
  return 0;
}
