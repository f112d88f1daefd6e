# A sweep interrupted half-way (two finished rows and a half-written third)
# and restarted gives the same CSV as an uninterrupted sweep, and does not
# recompute the finished points. Only an unfinished CSV of the same sweep is
# resumed: a finished one is run again and rewritten, an unfinished one of
# other settings is an error (never a stale row).
file(REMOVE ${WORKDIR}/full.csv ${WORKDIR}/full.svg ${WORKDIR}/resumed.csv ${WORKDIR}/resumed.svg
     ${WORKDIR}/shard.csv ${WORKDIR}/shard.svg ${WORKDIR}/other.csv)
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

# The sweep's ID (the same in a shard's first line).
execute_process(COMMAND ${TESSERA} ${common} --shard 0/1 --out ${WORKDIR}/shard.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(STRINGS ${WORKDIR}/shard.csv shard_lines LIMIT_COUNT 1)
if(NOT rc EQUAL 0 OR NOT shard_lines MATCHES "^# tessera sweep ([0-9a-f]+) shard 0/1 of 4 points$")
  message(FATAL_ERROR "no shard line: ${shard_lines} ${err}")
endif()
set(id ${CMAKE_MATCH_1})

# Simulate an interruption: the unfinished sweep's first line, the columns,
# rows 0 and 2 (finished out of order), and a partial line for row 1.
list(GET lines 0 header)
list(GET lines 1 row0)
list(GET lines 2 row1)
list(GET lines 3 row2)
string(SUBSTRING "${row1}" 0 10 partial)
set(unfinished "# tessera sweep ${id} unfinished: 4 points (run the same command to resume)")
file(WRITE ${WORKDIR}/resumed.csv "${unfinished}\n${header}\n${row2}\n${row0}\n${partial}")
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

# The same command on the finished CSV runs every point again (no message
# of resuming) and writes the same file.
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/resumed.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR err MATCHES "resuming" OR NOT err MATCHES "resumed.csv holds a finished sweep; every point runs again")
  message(FATAL_ERROR "a finished CSV was resumed, or the rerun failed: ${err}")
endif()
file(READ ${WORKDIR}/resumed.csv b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "the rerun CSV differs from the first:\n${a}\n---\n${b}")
endif()

# An unfinished CSV of another sweep (another ID), or another shard of this
# one: an error naming the file, and the file is left as it was.
set(other_line "# tessera sweep 0123456789abcdef unfinished: 4 points (run the same command to resume)")
file(WRITE ${WORKDIR}/other.csv "${other_line}\n${header}\n${row0}\n")
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/other.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^tessera: error: --out [^\n]*other.csv: the file holds an unfinished sweep of another scenario, other settings or another shard \\('# tessera sweep 0123456789abcdef unfinished: 4 points")
  message(FATAL_ERROR "an unfinished sweep of other settings was not refused (rc ${rc}): ${err}")
endif()
file(READ ${WORKDIR}/other.csv kept)
if(NOT kept STREQUAL "${other_line}\n${header}\n${row0}\n")
  message(FATAL_ERROR "the refused file was changed:\n${kept}")
endif()
execute_process(COMMAND ${TESSERA} ${common} --shard 1/2 --out ${WORKDIR}/shard.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2 OR NOT err MATCHES "shard.csv: the file holds a shard of another sweep \\(another scenario or other settings\\), or of this one run with another --shard \\('# tessera sweep ${id} shard 0/1 of 4 points'\\)")
  message(FATAL_ERROR "another shard's file was not refused (rc ${rc}): ${err}")
endif()
