// tests/fuzz/fuzz_common.hpp — shared bits of the libFuzzer harnesses.
//
// Parsers that read files get each input through a per-process file in /dev/shm (or $TMPDIR): the
// readers memory-map files, so this exercises exactly the code users run. Any vocablens::Error is the
// expected outcome for bad input; every other exception, a crash, a leak or a sanitizer report is a bug.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fuzz {

inline std::string scratch_path(const char* tag) {
  const char* dir = std::getenv("VOCABLENS_FUZZ_TMP");
  std::string base = dir ? dir : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  return base + "/vocablens-fuzz-" + tag + "-" + std::to_string(getpid());
}

inline void write_input(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

}  // namespace fuzz
