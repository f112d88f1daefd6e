# cluster.gpu as nvidia-smi prints it (and in any case) is the preset of that
# part: the same forecast, byte for byte, as the preset's own name, on a
# scenario that leaves cluster.nvlink_bandwidth to the preset's default.
function(run_json out gpu)
  execute_process(COMMAND ${TESSERA} run ${SCENARIOS}/minimal.yaml --json "--set=cluster.gpu=${gpu}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cluster.gpu=${gpu}: exit ${rc}: ${e}")
  endif()
  set(${out} "${o}" PARENT_SCOPE)
endfunction()
foreach(pair IN ITEMS "A100-80GB|NVIDIA A100-SXM4-80GB" "H100-SXM|NVIDIA H100 80GB HBM3" "H100-SXM|h100_sxm")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 preset)
  list(GET pair 1 alias)
  run_json(a "${preset}")
  run_json(b "${alias}")
  if(NOT a MATCHES "\"gpu\": \"${preset}\"")
    message(FATAL_ERROR "cluster.gpu=${preset}: the JSON does not name it:\n${a}")
  endif()
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "cluster.gpu='${alias}' differs from ${preset}:\n${a}\n${b}")
  endif()
endforeach()
