// vocablens/result_kinds.hpp — the registry of result kinds: every analysis registers its kind once (name,
// title, reading order, how the HTML report draws it, the notebook cell that redraws it); the report and the
// notebook only iterate this registry, so no kind name is spelled outside its own slice.
//
// A slice registers in analyses/<slice>_report.cpp, which defines one function named after its file:
//
//   // analyses/my_report.cpp
//   namespace vocablens::kinds {
//   void register_my_report(ResultKinds& k) {
//     ResultKind mine{"my_analysis", "My analysis", 20};
//     mine.report = draw_mine;                 // void(report_detail::Section&): the kind's own figures
//     mine.notebook_code = "...python...";     // runs after r = load_result(kind); A, S = arrays, summary
//     mine.example = my_example;               // Result(const ExampleInput&), for `report --example`
//     mine.shapes = {{"tokens", "T"}, {"scores", "L T"}};   // checked whenever a run directory is read
//     k.add(std::move(mine));
//   }
//   }
//
// The build collects analyses/*_report.cpp and generates the one function that calls every
// register_<file>() (CMakeLists.txt, builtin_result_kinds.cpp), so adding a slice edits no list here.
// Anything a kind leaves empty falls back to the generic rendering (settings, summary, every array and
// table) — a kind nobody registered is shown that way too, titled by its name.
//
//   const vocablens::ResultKind* k = vocablens::result_kinds().find(r.kind);   // nullptr if unknown
//   for (const ResultKind* k : vocablens::result_kinds().all()) ...             // in reading order
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vocablens/result.hpp"

namespace vocablens {

namespace report_detail {
struct Section;  // notebooks-export/report_blocks.hpp: one result's HTML section while it is built
}

/// What a kind's example is made from: the prompt and its tokens as a byte-level BPE would split them.
struct ExampleInput {
  std::string prompt;
  std::vector<std::string> tokens;
};

struct ResultKind {
  std::string name;            ///< Result::kind, [A-Za-z0-9_-]+ (it names files)
  std::string title;           ///< section heading in the report
  int order = 1000;            ///< reading order in report and notebook (ties: by name)
  std::string notebook_title;  ///< notebook heading; "" = the name itself
  /// Draws the kind's own figures into the section and marks what it used; the generic rendering shows
  /// the rest. Empty: generic only.
  std::function<void(report_detail::Section&)> report;
  /// Python run after `r = load_result("<kind>")` and `A, S = r["arrays"], r["summary"]` (helpers of the
  /// notebook's prelude: input_tokens, layer_labels, as_grid, heatmap, per_layer_curves, show_generic ...).
  /// Never contains data of a result. Empty: "show_generic(r)".
  std::string notebook_code;
  /// A synthetic result shaped like the analysis's own output, for `vocablens report --example` (a preview
  /// of the report and notebook without a model). Empty: the kind has none.
  std::function<Result(const ExampleInput&)> example;
  /// The shapes of the kind's arrays, by array name: dimensions separated by spaces, each a number or a
  /// symbol bound by the first array that uses it ({"tokens", "T"}, {"entropy", "L T"}). Every reader of a
  /// run directory (read_run_directory: `report`, the notebook, Python's load_results) refuses a result
  /// whose arrays disagree with these (arrays of different runs put together), so the figures never see
  /// an entropy of [5, 17] beside 16 tokens. Arrays not listed are shown generically, whatever their shape.
  std::vector<std::pair<std::string, std::string>> shapes;
};

class ResultKinds {
 public:
  /// Adds a kind; throws std::logic_error when the name is taken (two slices claiming one kind).
  void add(ResultKind k);
  /// The kind registered under `name`, or nullptr.
  const ResultKind* find(std::string_view name) const;
  /// Every kind, in reading order.
  std::vector<const ResultKind*> all() const;

 private:
  std::vector<ResultKind> kinds_;
};

/// The built-in kinds (registered on first use; thread-safe).
const ResultKinds& result_kinds();

/// Where a kind's section goes in the report and notebook: its registered order, 1000 when unknown.
int report_order(const std::string& kind);

/// The report's heading for a kind: its registered title, else its name made readable ("my_kind" -> "My kind").
std::string kind_title(const std::string& kind);

namespace detail {
/// Throws FormatError(path, ...) when an array of `r` disagrees with its kind's declared shapes (wrong rank,
/// a number that differs, a symbol bound to two sizes), naming both arrays. Unknown kinds: nothing to check.
void check_result_shapes(const Result& r, const std::string& path);

/// Defined by the build (builtin_result_kinds.cpp): calls every analyses/*_report.cpp's register function.
void register_builtin_result_kinds(ResultKinds& k);
}  // namespace detail

}  // namespace vocablens
