# The ns-3 backend from the CLI (scenarios/small-ns3.yaml): the run summary
# and the JSON report carry the packet fabric's invariants, and the `ns3:`
# scenario keys reach the fabric.
#  - JSON: packets and payload delivered = injected, zero drops, zero credit
#    violations, every message delivered; the payload injected plus the
#    NVLink payload moved as flows (ns3.scale_up: flow, the default) is every
#    byte the ranks sent (network_bytes); with ns3.scale_up=packets every
#    byte crosses the packet fabric and no message is a flow; packet-hops at
#    least the packets (each crosses a link).
#  - ns3.packets_per_segment: 16x the segment gives fewer packets, the same
#    payload; ns3.mtu and ns3.model change what the report says they are.
#  - Text: the "Packet fabric" section; the flow backend's report has none,
#    and its JSON no "ns3" object.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
# run_ok(OUT ARGS...): `tessera run ${SCENARIO} ARGS...`, which must succeed.
macro(run_ok out)
  tessera_ok(${out} run ${SCENARIO} ${ARGN})
endmacro()

# Reads the ns3 object of a JSON report into ${prefix}_<key>.
function(ns3_fields json prefix)
  string(JSON network_bytes GET "${json}" network_bytes)
  set(${prefix}_network_bytes ${network_bytes} PARENT_SCOPE)
  foreach(key model packets_per_segment mtu_bytes messages_sent messages_delivered packets_injected
              packets_delivered packet_hops payload_injected_bytes payload_delivered_bytes drops credit_violations
              events scale_up scale_up_messages scale_up_payload_bytes)
    string(JSON v GET "${json}" ns3 ${key})
    set(${prefix}_${key} ${v} PARENT_SCOPE)
  endforeach()
endfunction()

function(check_invariants prefix)
  set(p ${prefix})
  if(NOT ${p}_packets_injected GREATER 0 OR NOT ${p}_packets_injected EQUAL ${p}_packets_delivered)
    message(FATAL_ERROR "${p}: packets injected ${${p}_packets_injected} != delivered ${${p}_packets_delivered}")
  endif()
  if(NOT ${p}_payload_injected_bytes EQUAL ${p}_payload_delivered_bytes)
    message(FATAL_ERROR "${p}: payload injected ${${p}_payload_injected_bytes} != delivered ${${p}_payload_delivered_bytes}")
  endif()
  math(EXPR moved "${${p}_payload_injected_bytes} + ${${p}_scale_up_payload_bytes}")
  if(NOT moved EQUAL ${p}_network_bytes)
    message(FATAL_ERROR "${p}: payload injected ${${p}_payload_injected_bytes} + NVLink flows "
                        "${${p}_scale_up_payload_bytes} != network_bytes ${${p}_network_bytes}")
  endif()
  if(NOT ${p}_messages_sent EQUAL ${p}_messages_delivered OR NOT ${p}_drops EQUAL 0 OR NOT ${p}_credit_violations EQUAL 0)
    message(FATAL_ERROR "${p}: messages ${${p}_messages_delivered} of ${${p}_messages_sent}, drops ${${p}_drops}, "
                        "credit violations ${${p}_credit_violations}")
  endif()
  if(${p}_packet_hops LESS ${p}_packets_injected OR NOT ${p}_events GREATER 0)
    message(FATAL_ERROR "${p}: ${${p}_packet_hops} packet-hops for ${${p}_packets_injected} packets, ${${p}_events} events")
  endif()
endfunction()

run_ok(json_k1 --json --set ns3.packets_per_segment=1)
ns3_fields("${json_k1}" k1)
check_invariants(k1)
if(NOT k1_model STREQUAL "infiniband" OR NOT k1_packets_per_segment EQUAL 1 OR NOT k1_mtu_bytes EQUAL 4096)
  message(FATAL_ERROR "ns3.packets_per_segment=1: the report says ${k1_model}, ${k1_packets_per_segment} x ${k1_mtu_bytes} B")
endif()

# The job's data-parallel rings cross NVLink inside each node: with the
# default those bytes are flows; with ns3.scale_up=packets none is.
if(NOT k1_scale_up STREQUAL "flow" OR NOT k1_scale_up_messages GREATER 0 OR NOT k1_scale_up_payload_bytes GREATER 0)
  message(FATAL_ERROR "default ns3.scale_up: ${k1_scale_up}, ${k1_scale_up_messages} messages, ${k1_scale_up_payload_bytes} B")
endif()
run_ok(json_pk --json --set ns3.packets_per_segment=1 --set ns3.scale_up=packets)
ns3_fields("${json_pk}" pk)
check_invariants(pk)
if(NOT pk_scale_up STREQUAL "packets" OR NOT pk_scale_up_messages EQUAL 0 OR NOT pk_payload_injected_bytes EQUAL pk_network_bytes
   OR NOT pk_messages_sent EQUAL k1_messages_sent OR NOT pk_packets_injected GREATER k1_packets_injected)
  message(FATAL_ERROR "ns3.scale_up=packets: ${pk_scale_up}, ${pk_scale_up_messages} flow messages, "
                      "${pk_payload_injected_bytes} of ${pk_network_bytes} B as packets, ${pk_messages_sent} messages "
                      "(${k1_messages_sent} with flows), ${pk_packets_injected} packets (${k1_packets_injected})")
endif()

run_ok(json_k16 --json --set ns3.packets_per_segment=16)
ns3_fields("${json_k16}" k16)
check_invariants(k16)
if(NOT k16_payload_injected_bytes EQUAL k1_payload_injected_bytes)
  message(FATAL_ERROR "the segment size changed the payload: ${k1_payload_injected_bytes} -> ${k16_payload_injected_bytes}")
endif()
# At least 8x fewer packets with 16x the segment (messages that are not a
# whole number of segments end in a short one).
math(EXPR k16_times_8 "${k16_packets_injected} * 8")
if(NOT k16_times_8 LESS k1_packets_injected)
  message(FATAL_ERROR "ns3.packets_per_segment=16: ${k16_packets_injected} packets against ${k1_packets_injected} with 1")
endif()

run_ok(json_mtu --json --set ns3.packets_per_segment=1 --set ns3.mtu=2KiB)
ns3_fields("${json_mtu}" mtu)
check_invariants(mtu)
if(NOT mtu_mtu_bytes EQUAL 2048 OR NOT mtu_packets_injected GREATER k1_packets_injected)
  message(FATAL_ERROR "ns3.mtu=2KiB: ${mtu_mtu_bytes} B MTU, ${mtu_packets_injected} packets against ${k1_packets_injected} at 4 KiB")
endif()

run_ok(json_p2p --json --set ns3.model=point-to-point)
ns3_fields("${json_p2p}" p2p)
check_invariants(p2p)
if(NOT p2p_model STREQUAL "point-to-point")
  message(FATAL_ERROR "ns3.model=point-to-point: the report says ${p2p_model}")
endif()

run_ok(text)
if(NOT text MATCHES "\nPacket fabric  infiniband, segment = [0-9]+ x 4096 B MTU \\+ 30 B headers, 1 VL, static routing\n  (packets|segments) +([0-9]+) injected, ([0-9]+) delivered, [0-9]+ (packet|segment)-hops, 0 dropped\n  payload +([0-9]+) B injected, ([0-9]+) B delivered \\(([0-9]+) messages of ([0-9]+)\\), [0-9]+ B on the wire summed over hops\n  NVLink +[0-9]+ messages \\([0-9]+ B\\) inside nodes moved as flows, not packets \\(ns3\\.scale_up\\)\n  credits +[0-9.]+ ms stalled \\(summed over ports\\), 0 violations; buffers [0-9.]+ KiB to [0-9.]+ KiB per port and VL \\(auto: credit round trip \\+ 3 segments\\)\n  ns-3 events +[0-9]+\n$")
  message(FATAL_ERROR "no Packet fabric section at the end of the text report:\n${text}")
endif()
if(NOT CMAKE_MATCH_2 EQUAL CMAKE_MATCH_3 OR NOT CMAKE_MATCH_5 EQUAL CMAKE_MATCH_6 OR NOT CMAKE_MATCH_7 EQUAL CMAKE_MATCH_8)
  message(FATAL_ERROR "the text report's invariants do not hold:\n${text}")
endif()

run_ok(flow_text --backend flow)
run_ok(flow_json --backend flow --json)
if(flow_text MATCHES "Packet fabric" OR flow_json MATCHES "\"ns3\"")
  message(FATAL_ERROR "the flow backend reports a packet fabric:\n${flow_text}\n${flow_json}")
endif()
