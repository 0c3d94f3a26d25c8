# GPT-2 tokenizer cross-check against OpenAI's tiktoken (npm @dqbd/tiktoken, WASM) on >= 5 MB of real text,
# and the tokenizer benchmark program. Included by the top-level CMakeLists.txt.

# The C++ side of the cross-check: encodes a corpus, writes the ids (vocablens_core only: builds in seconds).
add_executable(vocablens_tokenize_corpus ${PROJECT_SOURCE_DIR}/tests/tokenizer_crosscheck/tokenize_corpus.cpp)
target_link_libraries(vocablens_tokenize_corpus PRIVATE vocablens_core)

# The benchmark (not built by default): `ninja bench_tokenizer`, run by bench/tokenizer_bench.sh.
# Its source is not named bench_*.cpp so that the top-level bench glob does not also link it to LibTorch.
add_executable(bench_tokenizer EXCLUDE_FROM_ALL ${PROJECT_SOURCE_DIR}/bench/tokenizer_bench.cpp)
target_link_libraries(bench_tokenizer PRIVATE vocablens_core)

# Registered whatever is installed: without node/npm the script itself fails, naming what is missing
# (scripts/setup.sh installs them); 77 (CTest "Skipped") only for a fixture missing under
# VOCABLENS_ALLOW_MISSING_FIXTURES=1.
add_test(NAME tokenizer_crosscheck
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/tokenizer_crosscheck/run_crosscheck.sh
                 $<TARGET_FILE:vocablens_tokenize_corpus> ${PROJECT_SOURCE_DIR}
                 ${PROJECT_BINARY_DIR}/tokenizer_crosscheck)
set_tests_properties(tokenizer_crosscheck PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "crosscheck;node")
