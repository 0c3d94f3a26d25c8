// tests/support/sae_fixtures.hpp — the SAE fixtures of tests/fixtures/sae/make_saes.py, made once per build
// directory and shared by the tests that read them.
//
// make_saes.py writes every SAE / transcoder layout vocablens reads with float64 references of each (3-4 s of
// Python and torch); five test files read the same deterministic output (a fixed seed). The first test to ask
// makes it in <build>/sae-fixtures under a lock (tests run in parallel), with a stamp of what it was made from
// (the script's bytes, the gpt2-tiny fixture's path and weights' size and time); later tests and later test
// runs reuse it while the stamp matches, and make it anew when the script or the fixture changed. The tests only
// read it (a test that mutates a file works on a copy).
//
//   const std::string& dir = vl_test::sae_fixtures_dir();   // dir/<case>/..., dir/ref, dir/cases.json
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "fixtures.hpp"

namespace vl_test {

inline const std::string& sae_fixtures_dir() {
  static const std::string dir = [] {
    const std::string gpt2 = fixture("gpt2-tiny");
    REQUIRE(!gpt2.empty());
    const std::string script = std::string(VOCABLENS_SOURCE_DIR) + "/tests/fixtures/sae/make_saes.py";
    const std::string out = std::string(VOCABLENS_BINARY_DIR) + "/sae-fixtures";
    struct stat st {};
    REQUIRE(::stat((gpt2 + "/model.safetensors").c_str(), &st) == 0);
    const std::string stamp = std::to_string(std::hash<std::string>{}(read_file(script))) + " " + gpt2 + " " +
                              std::to_string(st.st_size) + " " + std::to_string(st.st_mtime) + "\n";
    struct Lock {  // released when the scope ends, also when a REQUIRE below throws
      int fd;
      ~Lock() {
        if (fd >= 0) ::close(fd);
      }
    } lock{::open((out + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)};
    REQUIRE(lock.fd >= 0);
    REQUIRE(::flock(lock.fd, LOCK_EX) == 0);
    const std::string stamp_file = out + "/stamp";
    if (::access(stamp_file.c_str(), R_OK) == 0 && read_file(stamp_file) == stamp) return out;
    std::string log;
    run_command("rm -rf '" + out + "'", log);
    const int rc = run_command("/usr/bin/python3 '" + script + "' '" + out + "' '" + gpt2 + "'", log);
    INFO(log);
    REQUIRE(rc == 0);               // python3 with numpy + torch is required: a missing reference fails the test
    write_file(stamp_file, stamp);  // last: an interrupted make leaves no stamp, and is made anew
    return out;
  }();
  return dir;
}

}  // namespace vl_test
