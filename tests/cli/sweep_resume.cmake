# A sweep interrupted half-way (two finished rows and a half-written third)
# and restarted gives the same CSV as an uninterrupted sweep, and does not
# recompute the finished points.
file(REMOVE ${WORKDIR}/full.csv ${WORKDIR}/full.svg ${WORKDIR}/resumed.csv ${WORKDIR}/resumed.svg)
set(common sweep ${SCENARIO} --set training.micro_batch=1,2,4,8 --jobs 2)
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/full.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "full sweep failed: ${err}")
endif()
file(STRINGS ${WORKDIR}/full.csv lines)
list(LENGTH lines n)
if(NOT n EQUAL 5)
  message(FATAL_ERROR "expected a header and 4 rows, got ${n} lines")
endif()
file(READ ${WORKDIR}/full.svg svg)
# A micro-batch sweep keeps the GPU count: throughput only, no efficiency
# panel (chart_test.cpp checks the charts in detail).
if(NOT svg MATCHES "^<svg" OR NOT svg MATCHES "throughput \\(tokens/s\\)" OR svg MATCHES "efficiency")
  message(FATAL_ERROR "the SVG chart is missing or malformed")
endif()

# Simulate an interruption: header, rows 0 and 2 (finished out of order), and
# a partial line for row 1.
list(GET lines 0 header)
list(GET lines 1 row0)
list(GET lines 2 row1)
list(GET lines 3 row2)
string(SUBSTRING "${row1}" 0 10 partial)
file(WRITE ${WORKDIR}/resumed.csv "${header}\n${row2}\n${row0}\n${partial}")
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/resumed.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "resumed sweep failed: ${err}")
endif()
if(NOT err MATCHES "resuming .*: 2 of 4 points already done")
  message(FATAL_ERROR "the restarted sweep did not resume: ${err}")
endif()
file(READ ${WORKDIR}/full.csv a)
file(READ ${WORKDIR}/resumed.csv b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "resumed CSV differs from the uninterrupted one:\n${a}\n---\n${b}")
endif()
