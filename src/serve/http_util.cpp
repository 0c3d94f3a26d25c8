// The explorer's answers and request parsing (see http_util.hpp).
#include "serve/http_util.hpp"

#include <cctype>
#include <cstdint>
#include <new>
#include <random>

#include <fmt/format.h>

#include "util/json_depth.hpp"
#include "vocablens/error.hpp"
#include "vocablens/interrupt.hpp"
#include "vocablens/nonfinite.hpp"

namespace vocablens::serve {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Answer error_answer(int status, const std::string& message) {
  return {status, dump({{"error", message}, {"status", status}}) + "\n"};
}

Answer answer_for_current_exception() {
  try {
    throw;
  } catch (const UsageError& e) { return error_answer(400, e.what()); } catch (const NonFiniteError& e) {
    return error_answer(422, e.what());
  } catch (const FormatError& e) { return error_answer(422, e.what()); } catch (const Interrupted& e) {
    return error_answer(503, e.what());
  } catch (const Error& e) { return error_answer(400, e.what()); } catch (const json::exception& e) {
    return error_answer(400, std::string("request: ") + e.what());
  } catch (const std::bad_alloc&) { return error_answer(503, "out of memory"); } catch (const std::exception& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
    // LibTorch reports a failed allocation as a c10::Error ("DefaultCPUAllocator: can't allocate memory: you
    // tried to allocate N bytes"), not std::bad_alloc: the same condition, the same 503.
    if (msg.find("can't allocate memory") != std::string::npos || msg.find("not enough memory") != std::string::npos)
      return error_answer(503, "out of memory: " + msg);
    return error_answer(500, "internal error: " + msg);
  } catch (...) { return error_answer(500, "internal error"); }
}

void send(httplib::Response& res, const Answer& a) {
  res.status = a.status;
  if (!a.cache.empty()) res.set_header("X-Vocablens-Cache", a.cache);
  if (!a.forward.empty()) res.set_header("X-Vocablens-Forward", a.forward);
  res.set_content(a.body, "application/json; charset=utf-8");
}

std::string random_token() {
  std::random_device rd;  // /dev/urandom on Linux
  std::string t;
  for (int i = 0; i < 4; ++i) t += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  return t;
}

bool same_secret(const std::string& a, const std::string& b) {  // constant time in the length of b
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < b.size(); ++i)
    diff |= static_cast<unsigned char>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

bool is_json_media_type(const std::string& content_type) {
  std::string type = content_type.substr(0, content_type.find(';'));
  const auto first = type.find_first_not_of(" \t");
  const auto last = type.find_last_not_of(" \t");
  type = first == std::string::npos ? "" : type.substr(first, last - first + 1);
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type == "application/json";
}

std::string host_name_of(const std::string& host_header) {  // "127.0.0.1:8765" -> "127.0.0.1", "[::1]:80" -> "::1"
  if (!host_header.empty() && host_header[0] == '[') {
    auto close = host_header.find(']');
    return close == std::string::npos ? host_header : host_header.substr(1, close - 1);
  }
  return host_header.substr(0, host_header.find(':'));
}

// The request body as a JSON object ({} for an empty body). Throws UsageError naming the problem.
json parse_body(const httplib::Request& req) {
  if (req.body.empty()) return json::object();
  detail::check_json_depth(req.body, "request body");
  json j;
  try {
    j = json::parse(req.body);
  } catch (const json::parse_error& e) {
    std::string m = e.what();
    throw UsageError("request body: invalid JSON (" + m.substr(m.find(':') == std::string::npos ? 0 : m.find(':') + 2) + ")");
  }
  if (!j.is_object()) throw UsageError(std::string("request body: expected a JSON object of options, got ") + j.type_name());
  return j;
}

std::string shorten(const std::string& s, size_t n) { return s.size() > n ? s.substr(0, n - 3) + "..." : s; }

}  // namespace vocablens::serve
