# `tessera run --backend ns3 --links` (scenarios/small-ns3.yaml): with the
# default ns3.scale_up: flow, the NVLink links' rows come from the flow model
# (payload and busy time, 0 packets) and the fabric's from the packets. Hand
# check: every NVLink message crosses two NVLink links (GPU -> NVSwitch ->
# GPU), so the nvlink rows' payload sums to twice the JSON's
# scale_up_payload_bytes; every other row carried packets.
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --json --links ${WORKDIR}/ns3_links.csv
                OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera run failed (${rc}):\n${err}")
endif()
string(JSON scale_up_payload GET "${json}" ns3 scale_up_payload_bytes)
file(STRINGS ${WORKDIR}/ns3_links.csv rows)
list(GET rows 0 header)
if(NOT header MATCHES "^link,src,dst,tier,bandwidth_bps,payload_bytes,busy_us,utilization,segments,wire_bytes,credit_stall_us,max_queue_bytes,max_queue_segments$")
  message(FATAL_ERROR "header: ${header}")
endif()
list(REMOVE_AT rows 0)
set(nvlink_rows 0)
set(nvlink_payload 0)
set(fabric_rows 0)
foreach(row IN LISTS rows)
  string(REPLACE "," ";" f "${row}")
  list(GET f 3 tier)
  list(GET f 5 payload)
  list(GET f 6 busy)
  list(GET f 8 packets)  # segments
  if(tier STREQUAL "nvlink")
    if(NOT packets EQUAL 0 OR NOT payload GREATER 0 OR busy STREQUAL "0.000")
      message(FATAL_ERROR "an NVLink row should carry flows (payload, busy time, no packets): ${row}")
    endif()
    math(EXPR nvlink_rows "${nvlink_rows} + 1")
    math(EXPR nvlink_payload "${nvlink_payload} + ${payload}")
  else()
    if(NOT packets GREATER 0)
      message(FATAL_ERROR "a fabric row without packets: ${row}")
    endif()
    # The column counts segments of 32 MTU packets (the default
    # packets_per_segment), each well past one 4 KiB packet's payload on
    # these bulk messages (helper 149: the column said packets).
    math(EXPR per_segment "${payload} / ${packets}")
    if(per_segment LESS 65536)
      message(FATAL_ERROR "a segment carrying ${per_segment} B: not 32 packets: ${row}")
    endif()
    math(EXPR fabric_rows "${fabric_rows} + 1")
  endif()
endforeach()
math(EXPR twice "2 * ${scale_up_payload}")
if(nvlink_rows EQUAL 0 OR fabric_rows EQUAL 0 OR NOT nvlink_payload EQUAL twice)
  message(FATAL_ERROR "${nvlink_rows} NVLink rows carrying ${nvlink_payload} B (expected 2 x ${scale_up_payload}), "
                      "${fabric_rows} fabric rows")
endif()
