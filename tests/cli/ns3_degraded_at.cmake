# failures.degraded with `at:` on the ns-3 backend (scenarios/default.yaml:
# the data-parallel all-reduce crosses leaf0-spine0 at the end of the
# iteration): slowing the cable to 0.1 from 180 ms makes the iteration
# longer than without, shorter than with the cable slow from the start,
# and within 1% of the flow backend's answer to the same change; from the
# start, ns-3 gives the same as the untimed `degraded` entry. A timed
# failure (failures.links) is still refused (hostile.failures.at_with_ns3).
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
# iteration(OUT ARGS...): the iteration of `tessera run ${SCENARIO} --json ARGS...`, in ns.
function(iteration out)
  tessera_ok(json run ${SCENARIO} --json ${ARGN})
  json_get(t "${json}" iteration_time_s)
  seconds_to_ns(ns ${t})
  set(${out} ${ns} PARENT_SCOPE)
endfunction()
set(slow --set failures.degraded_rate=0.1 --set)
iteration(base --backend ns3)
iteration(at180 --backend ns3 ${slow} "failures.degraded=[{cable: leaf0-spine0, at: 180ms}]")
# (at 1 ps, not 0: `at: 0` is read as untimed, and the timed path is the test)
iteration(at0 --backend ns3 ${slow} "failures.degraded=[{cable: leaf0-spine0, at: 1ps}]")
iteration(always --backend ns3 ${slow} "failures.degraded=[leaf0-spine0]")
iteration(flow180 --backend flow ${slow} "failures.degraded=[{cable: leaf0-spine0, at: 180ms}]")
if(NOT base LESS at180 OR NOT at180 LESS at0 OR NOT at0 EQUAL always)
  message(FATAL_ERROR "ns-3: without ${base} ns, from 180 ms ${at180} ns, from 0 ${at0} ns, untimed ${always} ns")
endif()
math(EXPR diff "${at180} - ${flow180}")
if(diff LESS 0)
  math(EXPR diff "-${diff}")
endif()
math(EXPR limit "${flow180} / 100")
if(diff GREATER limit)
  message(FATAL_ERROR "ns-3 from 180 ms: ${at180} ns, flow backend ${flow180} ns: more than 1% apart")
endif()
