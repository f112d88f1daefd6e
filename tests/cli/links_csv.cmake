# `tessera run --links` on the flow backend (scenarios/shared-hcas.yaml: 2
# GPUs share each 100 Gb/s HCA over 25 GB/s = 200 Gb/s PCIe links): the
# columns every backend starts with (engine::kLinkCsvSharedColumns), then
# avg_utilization and peak_utilization; one tier per link kind. Hand check:
# the HCA's 100 Gb/s cable is the bottleneck of the inter-node traffic
# (peak 1), shared by its two GPUs, so each PCIe link peaks at
# 50 / 200 = 0.25; busy time never exceeds the iteration.
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --links ${WORKDIR}/links.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera run failed (${rc}):\n${out}${err}")
endif()
file(STRINGS ${WORKDIR}/links.csv rows)
list(GET rows 0 header)
set(expected "link,src,dst,tier,bandwidth_bps,payload_bytes,busy_us,utilization,avg_utilization,peak_utilization")
if(NOT header STREQUAL expected)
  message(FATAL_ERROR "header: ${header}\nexpected: ${expected}")
endif()
list(REMOVE_AT rows 0)
foreach(tier nvlink pcie host leaf-spine)
  set(count_${tier} 0)
endforeach()
foreach(row IN LISTS rows)
  string(REPLACE "," ";" f "${row}")
  list(LENGTH f n)
  if(NOT n EQUAL 10)
    message(FATAL_ERROR "row with ${n} columns: ${row}")
  endif()
  list(GET f 3 tier)
  list(GET f 7 utilization)
  list(GET f 9 peak)
  math(EXPR count_${tier} "${count_${tier}} + 1")
  if(utilization GREATER 1 OR peak GREATER 1)
    message(FATAL_ERROR "utilization above 1: ${row}")
  endif()
  if(tier STREQUAL "pcie" AND NOT peak STREQUAL "0.250000")
    message(FATAL_ERROR "a PCIe link behind a shared 100 Gb/s HCA should peak at 0.25: ${row}")
  endif()
  if(tier STREQUAL "host" AND NOT peak STREQUAL "1.000000")
    message(FATAL_ERROR "an HCA cable is the bottleneck and should peak at 1: ${row}")
  endif()
endforeach()
# 4 nodes x 8 GPUs: 32 x 2 directions of NVLink and of PCIe; 16 HCAs x 2 of host cable.
if(NOT count_nvlink EQUAL 64 OR NOT count_pcie EQUAL 64 OR NOT count_host EQUAL 32)
  message(FATAL_ERROR "links per tier: nvlink ${count_nvlink}, pcie ${count_pcie}, host ${count_host}")
endif()
