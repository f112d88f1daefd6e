# `tessera validate kernels --data FILE --device H200`: the node model on our
# own H200 measurements (tests/data/h200; no H200 was ever fit on). Checks the
# table's shape and guards the held-out figures: each limit is the figure
# measured on 2026-11-26 rounded up slightly, so a regression fails.
#   FILE       group                          measured   limit
#   gemm.csv   all (1,599 GEMMs)              12.3%      13.0%
#   gemm.csv   linear/bf16/transformer/fwd    11.0%      11.7%
#   xla_grid   all (750)                      25.9%      27.0%
#   vector     all (98)                       22.4%      23.5%
# (targets not met: docs/node_model.md, "Tensor-core GEMMs on an H200")
function(check_group out group limit)
  string(REGEX MATCH "\n${group} +[0-9]+ +([0-9.]+)%" m "${out}")
  if(NOT m)
    message(FATAL_ERROR "no row '${group}' in the output")
  endif()
  if(CMAKE_MATCH_1 GREATER ${limit})
    message(FATAL_ERROR "${group}: ${CMAKE_MATCH_1}% MAPE, above the limit ${limit}%")
  endif()
  message("${group}: ${CMAKE_MATCH_1}% (limit ${limit}%)")
endfunction()
foreach(spec "gemm:all:13.0" "gemm:linear/bf16/transformer/fwd:11.7" "xla_grid:all:27.0" "vector:all:23.5")
  string(REPLACE ":" ";" parts "${spec}")
  list(GET parts 0 file)
  list(GET parts 1 group)
  list(GET parts 2 limit)
  execute_process(COMMAND ${TESSERA} validate kernels --data ${DATA}/${file}.csv --device H200
                          --noise ${DATA}/${file}_repeat.csv
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tessera validate kernels --data ${file}.csv failed (exit code ${rc}): ${err}")
  endif()
  if(NOT out MATCHES "group +rows +tile-mlp MAPE +signed median +P90 +roofline MAPE +noise MAPE")
    message(FATAL_ERROR "no table header")
  endif()
  # the noise floor is printed for every group (the repeat measured every shape)
  if(NOT out MATCHES "\nall +[0-9]+ +[0-9.]+% +[-+][0-9.]+% +[0-9.]+% +[0-9.]+% +[0-9.]+%\n")
    message(FATAL_ERROR "the 'all' row has no noise floor")
  endif()
  check_group("${out}" "${group}" ${limit})
endforeach()
