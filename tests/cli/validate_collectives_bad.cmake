# `tessera validate collectives` on damaged copies of the measured tables
# (helper 143): a header with no rows, an element count or type that does
# not give the bytes, and another GPU's arch are refused by file, row and
# column, not read past (they had left rows out of the table, or been read
# as they were, with exit 0). Prints "SKIP: ..." when the data is absent.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
if(NOT IS_DIRECTORY "${DATA}/vtrain/allreduce_a100" OR NOT EXISTS "${DATA}/xla/collectives_h100.csv")
  message("SKIP: collective measurements not found under ${DATA}")
  return()
endif()
set(ar ${DATA}/vtrain/allreduce_a100)
set(h100 ${DATA}/xla/collectives_h100.csv)
# A fresh copy of both tables, then one file replaced.
function(fresh_copy dir)
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir}/vtrain ${dir}/xla)
  file(COPY ${ar} DESTINATION ${dir}/vtrain)
  file(COPY ${h100} DESTINATION ${dir}/xla)
endfunction()
function(expect_refused what dir regex)
  execute_process(COMMAND ${TESSERA} validate collectives --data ${dir} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${regex}" OR NOT out STREQUAL "")
    message(FATAL_ERROR "${what}: exit ${rc}, stderr: ${err}\nstdout: ${out}")
  endif()
endfunction()
set(d ${WORKDIR}/collectives_bad)

fresh_copy(${d})
file(READ ${ar}/AR_GPU4_1M_1024M_LUT.csv text)
string(REGEX MATCH "^[^\n]*\n" header "${text}")
file(WRITE ${d}/vtrain/allreduce_a100/AR_GPU4_1M_1024M_LUT.csv "${header}")
expect_refused("nccl-tests header only" ${d}
               "^tessera: error: [^\n]*/AR_GPU4_1M_1024M_LUT.csv: no measurements \\(a header line, then one per row\\)\n$")

fresh_copy(${d})
edit_file("type" ${ar}/AR_GPU2_1M_1024M_LUT.csv "\n1048576,262144,float," "\n1048576,262144,int8,"
          ${d}/vtrain/allreduce_a100/AR_GPU2_1M_1024M_LUT.csv)
expect_refused("count and type against the size" ${d}
               "AR_GPU2_1M_1024M_LUT.csv: row 1, columns 'count' and 'size\\(B\\)': 262144 elements of int8 \\(1 B each\\) are not 1048576 bytes\n$")

fresh_copy(${d})
edit_file("unknown type" ${ar}/AR_GPU2_1M_1024M_LUT.csv "\n1048576,262144,float," "\n1048576,262144,quad,"
          ${d}/vtrain/allreduce_a100/AR_GPU2_1M_1024M_LUT.csv)
expect_refused("unknown type" ${d} "row 1, column 'type': unknown element type 'quad'\n$")

fresh_copy(${d})
edit_file("arch" ${h100} "\nsm_90,all-gather,F32,256," "\nsm_70,all-gather,F32,256," ${d}/xla/collectives_h100.csv)
expect_refused("arch" ${d} "collectives_h100.csv: row 1, column 'arch': unknown arch 'sm_70'")

fresh_copy(${d})
file(READ ${h100} text)
string(REGEX MATCH "^[^\n]*\n" header "${text}")
file(WRITE ${d}/xla/collectives_h100.csv "${header}")
expect_refused("XLA header only" ${d} "collectives_h100.csv: no measurements \\(a header line, then one per row\\)\n$")

# The copies as taken are read (the checks refuse no measured row).
fresh_copy(${d})
execute_process(COMMAND ${TESSERA} validate collectives --data ${d} OUTPUT_QUIET ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the tables as measured: exit ${rc}: ${err}")
endif()
file(REMOVE_RECURSE ${d})
