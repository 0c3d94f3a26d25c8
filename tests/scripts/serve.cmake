# `vocablens serve` (src/serve/, docs/serve.md): the JSON API against the CLI and under hostile requests
# (tests/serve/api_test.py, Debian's python3, no extra module), and the page in Debian's headless chromium
# driven by puppeteer-core (tests/serve/page_test.js; npm packages installed by scripts/setup.sh into
# build/serve). Registered unconditionally: a missing fixture, chromium or npm package fails the test.
# Each test starts its own server on 127.0.0.1 and a free port, and stops it however it ends.
set(VOCABLENS_FIXTURES_DIR ${PROJECT_SOURCE_DIR}/../shared/fixtures)
if(DEFINED ENV{VOCABLENS_FIXTURES})
  set(VOCABLENS_FIXTURES_DIR $ENV{VOCABLENS_FIXTURES})
endif()
add_test(NAME serve_api COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/serve/api_test.py ${VOCABLENS_FIXTURES_DIR})
set_tests_properties(serve_api PROPERTIES TIMEOUT 900 LABELS "serve"
  ENVIRONMENT "${VOCABLENS_CLI_FOR_TESTS};VOCABLENS_THREADS=1;OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")
# The SAE's feature pages and the corpus's top activations (tests/serve/sae_test.py: the features command and
# a float64 NumPy forward as references).
add_test(NAME serve_sae COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/serve/sae_test.py ${VOCABLENS_FIXTURES_DIR})
set_tests_properties(serve_sae PROPERTIES TIMEOUT 600 LABELS "serve"
  ENVIRONMENT "${VOCABLENS_CLI_FOR_TESTS};VOCABLENS_THREADS=1;OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")
# The attribution graph over HTTP (tests/serve/graph_api_test.py): serve --transcoders, POST /api/graph's
# Neuronpedia JSON against `vocablens graph --format json`, bad input, GET /api/progress, a cancelled graph.
add_test(NAME serve_graph COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/serve/graph_api_test.py ${VOCABLENS_FIXTURES_DIR})
set_tests_properties(serve_graph PROPERTIES TIMEOUT 600 LABELS "serve"
  ENVIRONMENT "${VOCABLENS_CLI_FOR_TESTS};VOCABLENS_THREADS=1;OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")
# The server under abuse (tests/serve/hostile_test.py): slowloris, connections over the cap, a chunked body over
# the limit, clients that never read, too-big answers, protocol and start-up refusals, under a 4 GB address
# space; a normal lens request answered correctly within 1 s after each.
add_test(NAME hostile_http COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/serve/hostile_test.py ${VOCABLENS_FIXTURES_DIR})
set_tests_properties(hostile_http PROPERTIES TIMEOUT 300 LABELS "serve"
  ENVIRONMENT "${VOCABLENS_CLI_FOR_TESTS};VOCABLENS_THREADS=1;OMP_NUM_THREADS=1;PYTHONDONTWRITEBYTECODE=1")
if(TEST cli_server_start)  # the CLI through the fork server (tests/CMakeLists.txt)
  set_tests_properties(serve_api serve_sae serve_graph hostile_http PROPERTIES FIXTURES_REQUIRED vl_fork_servers)
endif()
find_program(VOCABLENS_NODE node)
add_test(NAME serve_page COMMAND ${VOCABLENS_NODE} ${PROJECT_SOURCE_DIR}/tests/serve/page_test.js
         $<TARGET_FILE:vocablens_cli> ${VOCABLENS_FIXTURES_DIR}/gpt2-tiny ${PROJECT_BINARY_DIR}/serve)
set_tests_properties(serve_page PROPERTIES TIMEOUT 600 LABELS "serve;node"
  ENVIRONMENT "VOCABLENS_THREADS=1;OMP_NUM_THREADS=1")
# The routing view of a mixture of experts (tests/serve/experts_page_test.js): the Mixtral fixture's cell click
# against POST /api/experts and /api/attribute, and nothing on gpt2-tiny.
add_test(NAME serve_experts_page COMMAND ${VOCABLENS_NODE} ${PROJECT_SOURCE_DIR}/tests/serve/experts_page_test.js
         $<TARGET_FILE:vocablens_cli> ${PROJECT_SOURCE_DIR}/tests/fixtures/families/mixtral ${VOCABLENS_FIXTURES_DIR}/gpt2-tiny
         ${PROJECT_BINARY_DIR}/serve)
set_tests_properties(serve_experts_page PROPERTIES TIMEOUT 300 LABELS "serve;node"
  ENVIRONMENT "VOCABLENS_THREADS=1;OMP_NUM_THREADS=1")
# The static report's first-screen rule (tests/serve/report_first_screen.js, the same puppeteer-core): the
# heatmap of a 37-token `lens --report` within the first 900 px, the raw summary and provenance folded.
add_test(NAME report_first_screen COMMAND ${VOCABLENS_NODE} ${PROJECT_SOURCE_DIR}/tests/serve/report_first_screen.js
         $<TARGET_FILE:vocablens_cli> ${VOCABLENS_FIXTURES_DIR}/gpt2-tiny ${PROJECT_BINARY_DIR}/serve)
set_tests_properties(report_first_screen PROPERTIES TIMEOUT 300 LABELS "report;node"
  ENVIRONMENT "VOCABLENS_THREADS=1;OMP_NUM_THREADS=1")
