# Reads the committed tuned files (thresholds/<gpu>.tuned.txt, written by attn_tune) through
# attn_shapes --tuned, which cmake/shapes.cmake compiles at configure time; the format, every
# rule and every message are the parser's (harness/tuned.h, harness/tuned.c):
#
#   gpu <the GPU's name as cudaDeviceProp.name gives it>
#   <kernel> <fp16|bf16> d<head dim> <full|causal> <lo>-<hi> <tunable>=<value> ...   # comment
#
#   attn_read_tuned(<dir> <kernel> "<tunable>[=<v>|<v>...];..." <out>)
# reads <dir>/*.tuned.txt and sets <out> to a list of "<gpu>|<dtype>|<head dim>|<causal 0/1>|<lo>|<hi>|<v>,<v>,..." for
# <kernel>'s lines, the values in the order of the tunables given (each must appear once, with
# one of the values listed after its '=' where there is a list).
# A malformed line stops the configure step with "<file>:<line>: <what was expected>"; other
# kernels' lines are checked too, then skipped. What would only fail the compile later is
# refused here: a number that does not fit in an int, a GPU name that cannot go into a C
# string as written.
# In script mode (cmake -P) there is no compiler: pass -DATTN_SHAPES_PROGRAM=<attn_shapes>.
include(${CMAKE_CURRENT_LIST_DIR}/shapes.cmake) # _attn_shapes_run

function(attn_read_tuned dir kernel tunables out)
  if(CMAKE_SCRIPT_MODE_FILE) # cmake -P (the unit tests)
    file(GLOB files "${dir}/*.tuned.txt")
  else() # a new or removed tuned file re-runs the configure step
    file(GLOB files CONFIGURE_DEPENDS "${dir}/*.tuned.txt")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${files})
  endif()
  string(REPLACE ";" "," spec "${tunables}")
  _attn_shapes_run(result --tuned "${kernel}" "${spec}" ${files})
  string(STRIP "${result}" result)
  set(${out} "${result}" PARENT_SCOPE)
endfunction()
