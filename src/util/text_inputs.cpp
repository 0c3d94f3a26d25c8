// The prompts file and the corpus chunks (see vocablens/text_inputs.hpp).
#include "vocablens/text_inputs.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vocablens/error.hpp"
#include "util/regular_file.hpp"

namespace vocablens {

std::vector<LensPrompt> read_lens_prompts(const std::string& path) {
  // A regular file of bounded size: /dev/zero or a FIFO would be read forever or block (regular_file.hpp).
  std::string text = detail::read_regular_file(path, detail::kMaxTextListBytes, "prompts files");
  // A UTF-8 byte order mark (editors on Windows write one) marks the encoding; it is not part of the first
  // prompt, and left in place it hid a JSON Lines file's first '{' (the file was read as plain text).
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  std::istringstream in(text);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  bool jsonl = false;
  for (const auto& l : lines) {
    size_t p = l.find_first_not_of(" \t");
    if (p != std::string::npos) {
      jsonl = l[p] == '{';
      break;
    }
  }
  std::vector<LensPrompt> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.find_first_not_of(" \t") == std::string::npos) continue;
    LensPrompt p;
    p.line = static_cast<int64_t>(i + 1);
    if (!jsonl) {
      p.prompt = l;
    } else {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(l);
      } catch (const std::exception& e) {
        throw FormatError(path, fmt::format("line {}: not a JSON object ({})", i + 1, e.what()));
      }
      if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
        throw FormatError(
            path, fmt::format("line {}: expected {{\"prompt\": \"...\", \"target\": \"...\"}} with a string prompt", i + 1));
      p.prompt = j["prompt"].get<std::string>();
      if (j.contains("target")) {
        if (!j["target"].is_string()) throw FormatError(path, fmt::format("line {}: \"target\" must be a string", i + 1));
        p.target = j["target"].get<std::string>();
        if (p.target.empty()) throw FormatError(path, fmt::format("line {}: \"target\" is empty", i + 1));
      }
    }
    if (p.prompt.empty()) throw FormatError(path, fmt::format("line {}: empty prompt", i + 1));
    out.push_back(std::move(p));
  }
  if (out.empty()) throw FormatError(path, "no prompts (the file is empty or blank)");
  return out;
}

namespace {

bool is_space(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

size_t corpus_split_point(const std::string& text) {
  const size_t n = text.size();
  if (n < 2) return n;
  const size_t lo = n / 2;
  for (size_t i = n - 2; i > lo; --i)
    if (text[i] == ' ' && !is_space(static_cast<unsigned char>(text[i - 1])) &&
        !is_space(static_cast<unsigned char>(text[i + 1])))
      return i;
  for (size_t i = n - 2; i > lo; --i)
    if (text[i] == '\n' && !is_space(static_cast<unsigned char>(text[i + 1]))) return i + 1;
  size_t i = n - 1;
  while (i > lo && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

void for_each_corpus_chunk(const std::string& path, size_t chunk_bytes,
                           const std::function<bool(const std::string& text, uint64_t bytes_read, bool last)>& fn) {
  if (chunk_bytes < 16) throw UsageError("chunk_bytes must be at least 16");
  // Streamed, so any size; but a regular file: /dev/zero never ends and a FIFO blocks (regular_file.hpp).
  detail::check_regular_file(path, detail::kMaxCorpusBytes, "corpora");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw FormatError(path, std::string("cannot read: ") + std::strerror(errno));
  std::string leftover, buf(chunk_bytes, '\0');
  uint64_t bytes_read = 0;
  for (;;) {
    f.read(&buf[0], static_cast<std::streamsize>(buf.size()));
    const size_t got = static_cast<size_t>(f.gcount());
    if (got == 0 && f.bad()) throw FormatError(path, "read error");
    bytes_read += got;
    const bool eof = got < buf.size() || f.peek() == std::char_traits<char>::eof();
    std::string text = leftover;
    text.append(buf, 0, got);
    leftover.clear();
    if (!eof) {
      size_t cut = corpus_split_point(text);
      leftover = text.substr(cut);
      text.resize(cut);
    }
    if (!fn(text, bytes_read, eof) || eof) return;
  }
}

}  // namespace vocablens
