# Wraps a text file in a C++ raw string literal (cmake -DIN=file -DOUT=file.cpp -DNAME=ns::var -P embed_text.cmake):
# `vocablens serve` carries its page in the binary, so it needs no file at run time and works offline.
file(READ "${IN}" text)
string(FIND "${text}" ")vlembed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN}: contains the raw-string delimiter )vlembed\"")
endif()
string(REGEX MATCH "^(.*)::([A-Za-z_][A-Za-z0-9_]*)$" _ "${NAME}")
set(ns "${CMAKE_MATCH_1}")
set(var "${CMAKE_MATCH_2}")
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake: do not edit.\nnamespace ${ns} {\nextern const char* const ${var};\nconst char* const ${var} = R\"vlembed(${text})vlembed\";\n}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
