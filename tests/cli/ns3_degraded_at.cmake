# failures.degraded with `at:` on the ns-3 backend (scenarios/default.yaml:
# the data-parallel all-reduce crosses leaf0-spine0 at the end of the
# iteration): slowing the cable to 0.1 from 180 ms makes the iteration
# longer than without, shorter than with the cable slow from the start,
# and within 1% of the flow backend's answer to the same change; from the
# start, ns-3 gives the same as the untimed `degraded` entry. A timed
# failure (failures.links) is still refused (hostile.failures.at_with_ns3).
function(iteration out)
  execute_process(COMMAND ${TESSERA} run ${SCENARIO} --json ${ARGN}
                  OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tessera run ${ARGN} failed (${rc}): ${err}")
  endif()
  string(JSON t GET "${json}" iteration_time_s)
  set(${out} ${t} PARENT_SCOPE)
endfunction()
iteration(base --backend ns3)
iteration(at180 --backend ns3 --set failures.degraded_rate=0.1 --set "failures.degraded=[{cable: leaf0-spine0, at: 180ms}]")
iteration(at0 --backend ns3 --set failures.degraded_rate=0.1 --set "failures.degraded=[{cable: leaf0-spine0, at: 0ms}]")
iteration(always --backend ns3 --set failures.degraded_rate=0.1 --set "failures.degraded=[leaf0-spine0]")
iteration(flow180 --backend flow --set failures.degraded_rate=0.1 --set "failures.degraded=[{cable: leaf0-spine0, at: 180ms}]")
if(NOT base LESS at180 OR NOT at180 LESS at0 OR NOT at0 EQUAL always)
  message(FATAL_ERROR "ns-3: without ${base} s, from 180 ms ${at180} s, from 0 ${at0} s, untimed ${always} s")
endif()
string(REGEX REPLACE "e.*" "" a "${at180}")
string(REGEX REPLACE "e.*" "" f "${flow180}")
string(REGEX MATCH "e-?[0-9]+" ea "${at180}")
string(REGEX MATCH "e-?[0-9]+" ef "${flow180}")
if(NOT ea STREQUAL ef)
  message(FATAL_ERROR "ns-3 ${at180} s and flow ${flow180} s differ in magnitude")
endif()
string(REPLACE "." "" a_digits "${a}")
string(REPLACE "." "" f_digits "${f}")
string(SUBSTRING "${a_digits}" 0 7 a7)
string(SUBSTRING "${f_digits}" 0 7 f7)
math(EXPR diff "${a7} - ${f7}")
if(diff LESS 0)
  math(EXPR diff "-${diff}")
endif()
math(EXPR limit "${f7} / 100")
if(diff GREATER limit)
  message(FATAL_ERROR "ns-3 from 180 ms: ${at180} s, flow backend ${flow180} s: more than 1% apart")
endif()
