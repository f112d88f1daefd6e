# A tensor-parallel group across nodes is legal but slow: `tessera run` (and
# `kernels`, `collectives`) prints the forecast and one warning line on stderr
# naming parallelism.tp and cluster.gpus_per_node, exit code 0. tp = 8 on 8-GPU nodes: no warning. The
# same plan under every rank layout prints the same forecast without it when
# TP fits a node. The JSON report has the warning in "warnings" (absent
# without one). Micro-batches of 4, so that Megatron's fused softmax takes
# the 1 or 2 heads per rank (4 or 8 score matrices) and warns of nothing.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set model.heads=16 --set model.layers=2 --set training.micro_batch=4
                        --set parallelism.dp=1 --set parallelism.tp=16
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tp = 16 on 8-GPU nodes: expected exit code 0, got ${rc}\nstderr: ${err}")
endif()
string(REGEX REPLACE "\n$" "" line "${err}")
if(line MATCHES "\n" OR NOT line MATCHES "^tessera: warning: .*default.yaml \\(--set parallelism.tp\\): parallelism.tp = 16 spans nodes: .*cluster.gpus_per_node = 8 ")
  message(FATAL_ERROR "tp = 16: expected one warning line on stderr, got:\n${err}")
endif()
if(NOT out MATCHES "dp=1 tp=16 pp=1")
  message(FATAL_ERROR "tp = 16: no forecast on stdout:\n${out}")
endif()
foreach(layout tp-dp-pp dp-tp-pp)
  execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set model.heads=16 --set model.layers=2 --set training.micro_batch=4
                          --set parallelism.dp=2 --set parallelism.tp=8 --set parallelism.layout=${layout}
                  OUTPUT_VARIABLE out8 ERROR_VARIABLE err8 RESULT_VARIABLE rc8)
  if(layout STREQUAL "tp-dp-pp")
    if(NOT rc8 EQUAL 0 OR NOT err8 STREQUAL "")
      message(FATAL_ERROR "tp = 8 on 8-GPU nodes: expected exit code 0 and no stderr, got ${rc8}: ${err8}")
    endif()
  elseif(NOT rc8 EQUAL 0 OR NOT err8 MATCHES "^tessera: warning: .*parallelism.tp = 8 spans nodes: with layout dp-tp-pp ")
    # dp innermost: a TP group is ranks 2 apart, 16 GPUs wide: across both nodes.
    message(FATAL_ERROR "tp = 8, layout ${layout}: expected exit code 0 and a warning, got ${rc8}: ${err8}")
  endif()
endforeach()
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set model.heads=16 --set model.layers=2 --set training.micro_batch=4
                        --set parallelism.dp=2 --set parallelism.tp=8 --set parallelism.layout=dp-tp-pp --json
                OUTPUT_VARIABLE json ERROR_VARIABLE ignored RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT json MATCHES "\"pp\": 1, \"layout\": \"dp-tp-pp\", \"schedule\"")
  message(FATAL_ERROR "layout dp-tp-pp: expected \"layout\" in the JSON, got ${rc}:\n${json}")
endif()
# The JSON report carries the same warning ("warnings", only when there is one).
json_one_warning("${json}" "^parallelism.tp = 8 spans nodes: with layout dp-tp-pp " "layout dp-tp-pp")
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set model.heads=16 --set model.layers=2 --set training.micro_batch=4
                        --set parallelism.dp=2 --set parallelism.tp=8 --json
                OUTPUT_VARIABLE json_ok ERROR_VARIABLE ignored RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR json_ok MATCHES "\"warnings\"")
  message(FATAL_ERROR "tp = 8 in a node: expected no \"warnings\" in the JSON, got ${rc}:\n${json_ok}")
endif()
# kernels and collectives give the same warning on stderr; collectives lists
# the tensor-parallel all-reduces as groups of 16 across both nodes.
set(tp16 --set model.heads=16 --set model.layers=2 --set training.micro_batch=4 --set parallelism.dp=1
         --set parallelism.tp=16)
foreach(command kernels collectives)
  execute_process(COMMAND ${TESSERA} ${command} ${SCENARIO} ${tp16}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  string(REGEX REPLACE "\n$" "" line "${err}")
  if(NOT rc EQUAL 0 OR line MATCHES "\n"
     OR NOT line MATCHES "^tessera: warning: .*default.yaml \\(--set parallelism.tp\\): parallelism.tp = 16 spans nodes: ")
    message(FATAL_ERROR "${command}, tp = 16: expected exit code 0 and one warning line, got ${rc}:\n${err}")
  endif()
endforeach()
if(NOT out MATCHES "\nlayer\\.fwd\\.tp\\.all-reduce +all-reduce +[0-9.]+ MiB +16 +2 ")
  message(FATAL_ERROR "collectives, tp = 16: no all-reduce over 16 ranks on 2 nodes:\n${out}")
endif()
