# tessera search with a small --max-candidates screens the plans that fit by
# their iteration with free communication before simulating: its winner must be the winner
# of the search that simulates every plan.
function(rank1 out var)
  if(NOT out MATCHES "\n +1 +([^\n]+)")
    message(FATAL_ERROR "no rank-1 line in:\n${out}")
  endif()
  set(${var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()
execute_process(COMMAND ${TESSERA} search ${SCENARIO} --top 1 --max-candidates ${CAP}
                OUTPUT_VARIABLE capped RESULT_VARIABLE rc1)
execute_process(COMMAND ${TESSERA} search ${SCENARIO} --top 1 --max-candidates 100000
                OUTPUT_VARIABLE full RESULT_VARIABLE rc2)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "tessera search failed (${rc1}, ${rc2})")
endif()
if(NOT capped MATCHES "fit in memory( [(][^)]*[)])?, ${CAP} simulated \\(by their iteration with free communication, the best of each dp x tp x pp")
  message(FATAL_ERROR "the capped search did not screen:\n${capped}")
endif()
rank1("${capped}" a)
rank1("${full}" b)
message("capped: ${a}\nfull:   ${b}")
if(NOT a STREQUAL b)
  message(FATAL_ERROR "screened search found '${a}', the full search '${b}'")
endif()
