# A sweep whose first point fails while simulating (a 2 bit/s NIC) still
# runs the point after it (helper 94: one point that always failed kept the
# rest from ever running): exit 2 naming point 0, point 1's row in the CSV,
# and the same command again runs only point 0.
file(REMOVE ${CSV})
set(args sweep ${SCENARIO} --set cluster.nic_bandwidth=2bps,400Gbps --jobs 1 --out ${CSV})
execute_process(COMMAND ${TESSERA} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "tessera: error: sweep point 0 \\(cluster.nic_bandwidth=2bps\\): [^\n]* \\(the finished points are kept; the same command runs the failed points again; --skip-failed finishes the sweep without them\\)\n$")
  message(FATAL_ERROR "expected exit 2 naming point 0 (${rc}):\n${err}")
endif()
file(READ ${CSV} csv)
if(NOT csv MATCHES "\n1,400Gbps,16,2,2[.]05843[0-9]+e-01,")
  message(FATAL_ERROR "point 1 did not run after point 0 failed:\n${csv}")
endif()
execute_process(COMMAND ${TESSERA} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "sweep: resuming [^\n]*: 1 of 2 points already done\ntessera: error: sweep point 0 ")
  message(FATAL_ERROR "the second run should resume and run point 0 alone (${rc}):\n${err}")
endif()
