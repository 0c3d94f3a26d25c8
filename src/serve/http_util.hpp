// src/serve/http_util.hpp — the explorer's answers and request parsing, shared by its routes.
//
// Every handler ends in an Answer: a status and a JSON body ({"error": "<one line>", "status": N} for
// errors). answer_for_current_exception() maps the library's exceptions to 4xx (what the caller can fix)
// and 5xx (the rest) and never rethrows, which is how no request can stop the server.
//
//   try { ... } catch (...) { send(res, answer_for_current_exception()); }
#pragma once
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace vocablens::serve {

using json = nlohmann::json;

/// JSON text that stays valid whatever bytes a token or a prompt holds (like the CLI's --format json).
std::string dump(const json& j);

struct Answer {
  Answer(int s = 200, std::string b = "", std::string c = "") : status(s), body(std::move(b)), cache(std::move(c)) {}
  int status;
  std::string body;     ///< JSON
  std::string cache;    ///< analyses: "hit" (answered from the cache) or "miss"
  std::string forward;  ///< lens, attribute: "replayed" (the prompt's kept forward pass) or "computed"
};

Answer error_answer(int status, const std::string& message);

/// The current exception as an HTTP answer: the library's one-line message, a 4xx for what the caller can
/// fix, a 5xx for the rest. Call inside a catch block; never rethrows.
Answer answer_for_current_exception();

/// f() as an Answer, any exception mapped by answer_for_current_exception().
template <class F>
Answer guarded(F&& f) {
  try {
    return f();
  } catch (...) { return answer_for_current_exception(); }
}

void send(httplib::Response& res, const Answer& a);

/// The request body as a JSON object ({} for an empty body). Throws UsageError naming the problem
/// (invalid JSON, not an object, nested deeper than the library's limit).
json parse_body(const httplib::Request& req);

/// s cut to n characters (with "...") for messages that quote what a client sent.
std::string shorten(const std::string& s, size_t n = 60);

/// 128 random bits as 32 hex digits (/dev/urandom).
std::string random_token();

/// a == b, in time that depends on b's length only (b: the secret).
bool same_secret(const std::string& a, const std::string& b);

/// True for a Content-Type of JSON: "application/json" compared case-insensitively and exactly, parameters
/// (`; charset=utf-8`) allowed; "application/jsonx" or "text/json" are not.
bool is_json_media_type(const std::string& content_type);

/// "127.0.0.1:8765" -> "127.0.0.1", "[::1]:80" -> "::1".
std::string host_name_of(const std::string& host_header);

}  // namespace vocablens::serve
