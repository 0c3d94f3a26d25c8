// `vocablens _write-test --bytes N --out FILE`: a hidden debugging command that writes N bytes to FILE
// slowly, through the streaming atomic writer (vocablens::AtomicWriter), so that tests can interrupt a
// write at a known moment (tests/interrupt_test.cpp). Not listed in --help.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cli/command.hpp"
#include "vocablens/atomic_file.hpp"
#include "vocablens/error.hpp"

namespace {

struct WriteTestOptions {
  std::string out;
  int64_t bytes = 0;
  int64_t chunk = 65536;
  int64_t delay_ms = 10;
};

int run_write_test(const WriteTestOptions& o) {
  if (o.bytes < 0 || o.chunk <= 0 || o.delay_ms < 0) throw vocablens::UsageError("--bytes, --chunk and --delay-ms must be >= 0");
  vocablens::AtomicWriter w(o.out);
  // The test waits for this line before sending its signal: from here on a write is in flight.
  std::fprintf(stderr, "writing %s\n", w.temp_path().c_str());
  std::fflush(stderr);
  std::string block(static_cast<size_t>(o.chunk), '\0');
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>('a' + i % 26);
  for (int64_t done = 0; done < o.bytes;) {
    const int64_t n = std::min(o.chunk, o.bytes - done);
    w.write(std::string_view(block.data(), static_cast<size_t>(n)));
    done += n;
    if (o.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.delay_ms));
  }
  w.commit();
  fmt::print("wrote {} bytes to {}\n", o.bytes, o.out);
  return 0;
}

vocablens::cli::Register reg{"_write-test", "(debugging) write --bytes N to --out FILE slowly and atomically",
                             [](CLI::App& sub) {
                               sub.group("");  // hidden from --help
                               auto o = std::make_shared<WriteTestOptions>();
                               sub.add_option("--out", o->out, "Target file")->required();
                               sub.add_option("--bytes", o->bytes, "Bytes to write")->required();
                               sub.add_option("--chunk", o->chunk, "Bytes per write (default 65536)");
                               sub.add_option("--delay-ms", o->delay_ms, "Pause after each chunk (default 10)");
                               return [o]() -> int { return run_write_test(*o); };
                             }};

}  // namespace
