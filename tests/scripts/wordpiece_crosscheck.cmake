# WordPiece (BERT) tokenizer cross-check against transformers.js BertTokenizer and llama.cpp's BERT test
# vectors (tests/wordpiece_crosscheck/README.md). Uses vocablens_tokenize_corpus (tokenizer_crosscheck.cmake).
# Registered unconditionally: a missing reference (node, npm packages, llama.cpp) fails the test.
find_program(VOCABLENS_BASH bash)
add_test(NAME wordpiece_crosscheck
         COMMAND ${VOCABLENS_BASH} ${PROJECT_SOURCE_DIR}/tests/wordpiece_crosscheck/run_crosscheck.sh
                 $<TARGET_FILE:vocablens_tokenize_corpus> ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/wordpiece_crosscheck)
set_tests_properties(wordpiece_crosscheck PROPERTIES TIMEOUT 600 LABELS "crosscheck;node;refs")
