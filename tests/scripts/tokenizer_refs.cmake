# Tokenizer reference check (tests/tokenizer_refs/README.md): vocablens' tokenizer.json / tokenizer.model /
# in-memory GGUF-vocabulary tokenizers against llama.cpp's llama_tokenize and transformers.js, on every line of
# the cross-check corpora. Registered unconditionally: a missing reference fails the test (setup.sh installs them).
add_executable(vocablens_tokenize_ids ${PROJECT_SOURCE_DIR}/tests/tokenizer_refs/tokenize_ids.cpp)
target_link_libraries(vocablens_tokenize_ids PRIVATE vocablens_core)
add_test(NAME tokenizer_refs
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/tokenizer_refs/run_refs.sh
                 $<TARGET_FILE:vocablens_tokenize_ids> ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/tokenizer_refs)
set_tests_properties(tokenizer_refs PROPERTIES TIMEOUT 1800 LABELS "reference;node;llama.cpp;refs")
