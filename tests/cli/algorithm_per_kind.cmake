# collectives.algorithm per collective kind (scenarios/mixtral-ep.yaml: expert
# parallelism 8 with ZeRO-1, here on 8 nodes of 4 GPUs so that each expert
# all-to-all spans two nodes):
#  - `hierarchical` for every kind stops the run (ZeRO's reduce-scatter has no
#    hierarchical algorithm), naming the key, the algorithms reduce-scatter
#    has and the kinds that have hierarchical;
#  - {all-to-all: hierarchical} runs: the all-to-all's inter-node bytes are
#    the direct algorithm's (same fabric bytes), plus (L-1)/L of it again
#    inside the node (more NVLink bytes), and the iteration changes (slower
#    here, 1972 against 1919 ms: the direct exchange, every peer at once, is
#    bound by the HCAs alone on this non-blocking fabric; the hierarchical
#    one moves its NVLink phase first);
#  - {all-to-all: direct} is what auto does (the same JSON as no choice).
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
set(shape --set cluster.nodes=8 --set cluster.gpus_per_node=4)
execute_process(COMMAND ${TESSERA} run ${SCENARIO} ${shape} --set collectives.algorithm=hierarchical
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "^tessera: error: [^\n]*mixtral-ep\\.yaml \\(--set collectives\\.algorithm\\): collectives\\.algorithm: collective reduce-scatter has no algorithm 'hierarchical' \\(available: auto, ring, halving-doubling\\), which this plan runs; give 'hierarchical' per kind to the kinds that have it \\(all-reduce, all-to-all\\), e\\.g\\. collectives\\.algorithm: {all-reduce: hierarchical}, and the others keep auto\n$")
  message(FATAL_ERROR "hierarchical for every kind: expected an error naming reduce-scatter's algorithms, got ${rc}: ${err}")
endif()
tessera_ok(plain run ${SCENARIO} ${shape} --json)
tessera_ok(direct run ${SCENARIO} ${shape} --json --set "collectives.algorithm={all-to-all: direct}")
tessera_ok(hier run ${SCENARIO} ${shape} --json --set "collectives.algorithm={all-to-all: hierarchical, reduce-scatter: ring}")
if(NOT direct STREQUAL plain)
  message(FATAL_ERROR "{all-to-all: direct} should be auto's choice:\n${direct}\n${plain}")
endif()
foreach(v plain hier)
  string(JSON ${v}_it GET "${${v}}" iteration_time_s)
  string(JSON ${v}_fabric GET "${${v}}" fabric_bytes)
  string(JSON ${v}_nvlink GET "${${v}}" nvlink_bytes)
endforeach()
if(NOT hier_fabric EQUAL plain_fabric OR NOT hier_nvlink GREATER plain_nvlink OR NOT hier_it GREATER plain_it)
  message(FATAL_ERROR "{all-to-all: hierarchical}: fabric ${hier_fabric} B (direct ${plain_fabric}), NVLink "
                      "${hier_nvlink} B (direct ${plain_nvlink}), iteration ${hier_it} s (direct ${plain_it})")
endif()
