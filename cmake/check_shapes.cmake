cmake_minimum_required(VERSION 3.25)
# cmake -DSHAPES=<file> -DATTN_SHAPES_PROGRAM=<attn_shapes> -P cmake/check_shapes.cmake: parses
# a shapes file as the configure step does (attn_read_shapes, through attn_shapes) and prints
# the number of cases (the shapes parser's unit tests run this).
include(${CMAKE_CURRENT_LIST_DIR}/shapes.cmake)
attn_read_shapes("${SHAPES}" S)
list(LENGTH S_CASES n)
set(first "")
if(n GREATER 0)
  list(GET S_CASES 0 first)
endif()
list(LENGTH S_PACKED npacked)
# lists joined by ',': a ';' in a test's PASS_REGULAR_EXPRESSION would split it into
# alternatives, any one of which passes
string(REPLACE ";" "," pages "${S_PAGE_SIZES}")
message("cases=${n} batch=${S_BATCH} heads=${S_HEADS} first=${first} packed=${npacked} pages=${pages}")
