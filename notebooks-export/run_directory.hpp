// notebooks-export/run_directory.hpp — a run directory appears complete or is reported.
//
// Each file is written atomically (atomic_file.hpp); the directory as a whole is made trustworthy by
//  - a lock: write_result holds an exclusive flock on the directory while it writes, so two concurrent
//    writers to one --out cannot interleave their files (the second is refused with one line);
//  - manifest last, with checksums: <kind>.json is written after its side files and lists each one's size
//    and SHA-256 under "files"; readers verify them, so a side file from another run (an interrupted
//    overwrite, a concurrent writer) is reported as a mixed directory instead of being rendered;
//  - replacing a result removes its old <kind>.json first, then its side files: an interrupted overwrite
//    leaves side files without a manifest, which readers report as a partial directory.
#pragma once
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace vocablens::detail {

/// Exclusive, non-blocking flock on `dir` for the lifetime of the object; FormatError(dir, "another
/// vocablens process is writing here ...") when held elsewhere.
class RunDirLock {
 public:
  explicit RunDirLock(const std::string& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  int fd_ = -1;
};

/// Before `kind` is written into `dir`: when <kind>.json exists, FormatError unless `replace`; with replace,
/// removes <kind>.json, then <kind>.*.npy and <kind>.*.csv.
void prepare_result_slot(const std::string& dir, const std::string& kind, bool replace);

/// {"bytes": n, "sha256": "..."} for the bytes of a side file.
nlohmann::ordered_json file_record(std::string_view bytes);

/// Checks every entry of the result's "files" (absent in results written by older versions: nothing to
/// check) against the files in `dir`: present, regular, same size, same SHA-256. FormatError(path, ...)
/// naming the file otherwise ("mixed or partial run directory").
void verify_result_files(const nlohmann::json& j, const std::string& dir, const std::string& path);

/// Side files named "<kind>.<name>.npy|csv" whose <kind> has no result JSON in `dir` (`kinds`): the traces
/// of an interrupted or failed write. FormatError(dir, "partial run directory: ...") when there are any.
void check_no_orphans(const std::string& dir, const std::set<std::string>& kinds);

}  // namespace vocablens::detail
