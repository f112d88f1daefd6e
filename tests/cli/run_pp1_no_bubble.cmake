# With one pipeline stage there is no fill or drain: the bubble is zero,
# whatever the host costs. A host that falls behind the GPU (ZeRO-3's
# parameter all-gathers, each a host launch; a dear launch) leaves the GPU
# waiting for it to launch the collectives the next kernel needs: host time
# (helper 76: 0.17 ms and, at host_launch 300 us, 16 ms of it were bubble).
# -DTESSERA, -DSCENARIO (minimal.yaml).
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
foreach(extra "parallelism.zero_stage=3" "calibration.host_launch=300us")
  tessera_ok(json run ${SCENARIO} --json --set parallelism.pp=1 --set ${extra})
  json_get(bubble "${json}" bubble_time_s)
  json_get(host "${json}" host_time_s)
  if(NOT bubble EQUAL 0)
    message(FATAL_ERROR "pp 1 with ${extra}: bubble ${bubble} s (host ${host} s), expected 0")
  endif()
  message("pp 1 with ${extra}: bubble 0, host ${host} s")
endforeach()
