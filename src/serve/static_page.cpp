// The explorer's static content: the page, embedded in the binary at build time (cmake/embed_text.cmake),
// and the headers every answer carries. Nothing is read from disk after start-up, so no path a client
// sends (`/../../etc/passwd`, `%2e%2e`, ...) can reach a file: only these routes and the API exist.
#include "serve/explorer.hpp"

#include <string>
#include <utility>

namespace vocablens::serve {

namespace {

// The page with its views in place: several files in the source (page.html stays readable), one document
// served (the Content-Security-Policy below admits inline scripts only, no script from a path).
const std::string& page_html() {
  static const std::string page = [] {
    std::string s = kPageHtml;
    for (const auto& [marker, view] : {std::pair<std::string, const char*>{"<!-- graph view -->", kGraphViewHtml},
                                       {"<!-- experts view -->", kExpertsViewHtml}}) {
      const auto at = s.find(marker);
      if (at != std::string::npos) s.replace(at, marker.size(), view);
    }
    return s;
  }();
  return page;
}

}  // namespace

void add_page_routes(httplib::Server& svr) {
  auto page = [](const httplib::Request&, httplib::Response& res) { res.set_content(page_html(), "text/html; charset=utf-8"); };
  svr.Get("/", page);
  svr.Get("/index.html", page);
  svr.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
}

httplib::Headers security_headers() {
  return {
      {"X-Content-Type-Options", "nosniff"},
      {"Cache-Control", "no-store"},
      {"Referrer-Policy", "no-referrer"},  // the URL may carry the access token
      {"X-Frame-Options", "DENY"},
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
  };
}

}  // namespace vocablens::serve
