// src/cli/command.hpp — how a subcommand plugs into the `vocablens` CLI.
//
// Each src/cli/cmd_<name>.cpp defines one subcommand and registers it with a static object:
//
//   static vocablens::cli::Register registered_cmd_inspect{"inspect", "Show a model's family, shapes and parameter count",
//     [](CLI::App& sub) {
//       auto opts = std::make_shared<std::string>();
//       sub.add_option("MODEL", *opts, "...")->required();
//       return [opts]() -> int { ...; return 0; };      // runs after parsing
//     }};
//
// The object is named after its file: the CLI compiles as a unity build (CMakeLists.txt), batches of files in
// one translation unit, so no file-local name may repeat across src/cli and src/serve.
//
// The CLI stays thin: parse flags, call one analysis, hand the result to an exporter. Errors are thrown
// as vocablens::Error and printed by main() as one line "vocablens: error: <what>" with exit code 1
// (2 for usage errors reported by CLI11).
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace vocablens::cli {

/// The help text of a MODEL argument: every format load_model reads (vocablens/model.hpp).
inline constexpr const char* kModelHelp =
    "Hugging Face directory (safetensors or pytorch_model.bin, sharded or not), GGUF file, llama2.c .bin, or llama2.c ckpt.pt";

using Runner = std::function<int()>;
using Setup = std::function<Runner(CLI::App& sub)>;

struct CommandInfo {
  std::string name;
  std::string description;
  Setup setup;
};

std::vector<CommandInfo>& registry();

/// Adds a command for every declared analysis whose `command` no registered command has
/// (src/cli/cmd_declared.cpp): its flags from the declaration, its table the Result's tables.
void add_declared_commands(std::vector<CommandInfo>& commands);

struct Register {
  Register(std::string name, std::string description, Setup setup) {
    registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace vocablens::cli
