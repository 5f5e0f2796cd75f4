cmake_minimum_required(VERSION 3.25)
# cmake -DDIR=<folder> -DKERNEL=<name> -DTUNABLES=a,b,... -DATTN_SHAPES_PROGRAM=<attn_shapes>
# -P cmake/check_tuned.cmake: reads the folder's tuned files as the configure step does
# (cmake/tuned.cmake) and prints what it found (the tuned-file parser's unit tests run this).
include(${CMAKE_CURRENT_LIST_DIR}/tuned.cmake)
string(REPLACE "," ";" tunables "${TUNABLES}")
attn_read_tuned("${DIR}" "${KERNEL}" "${tunables}" entries)
list(LENGTH entries n)
set(first "")
if(n GREATER 0)
  list(GET entries 0 first)
endif()
message("entries=${n} first=${first}")
