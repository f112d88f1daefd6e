# `tessera run` and `tessera compare-schedules` print the same pipeline
# bubble (time and share of the iteration) and the same MFU for the same
# scenario and schedule: both take the bubble from cli::breakdown
# (pipeline.hpp) and IterationBreakdown::share, the MFU from make_report.
execute_process(COMMAND ${TESSERA} compare-schedules ${SCENARIO}
                OUTPUT_VARIABLE table ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera compare-schedules failed (${rc}):\n${table}${err}")
endif()
set(number "[0-9]+\\.[0-9]+")
foreach(name gpipe 1f1b interleaved-1f1b zb-h1 zb-h2)
  set(extra "")
  set(row "${name}")
  if(name STREQUAL "interleaved-1f1b")
    # compare-schedules' default chunk count is virtual_stages: auto's (3 on
    # schedules.yaml's 3 layers per stage).
    set(extra --set parallelism.virtual_stages=auto)
    set(row "${name} \\(v=3\\)")
  endif()
  if(NOT table MATCHES "\n${row} +${number} ms +(${number}) ms +(${number})% +${number} ms +${number} ms +${number} ms +(${number})%")
    message(FATAL_ERROR "compare-schedules: no row for ${name}:\n${table}")
  endif()
  set(table_ms "${CMAKE_MATCH_1}")
  set(table_pct "${CMAKE_MATCH_2}")
  set(table_mfu "${CMAKE_MATCH_3}")
  execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set parallelism.schedule=${name} ${extra}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tessera run (${name}) failed (${rc}):\n${out}${err}")
  endif()
  if(NOT out MATCHES "\n  bubble +(${number}) ms +(${number})%")
    message(FATAL_ERROR "run (${name}): no bubble line:\n${out}")
  endif()
  message("${name}: run ${CMAKE_MATCH_1} ms ${CMAKE_MATCH_2}%, compare-schedules ${table_ms} ms ${table_pct}%")
  if(NOT CMAKE_MATCH_1 STREQUAL table_ms OR NOT CMAKE_MATCH_2 STREQUAL table_pct)
    message(FATAL_ERROR "${name}: run prints a bubble of ${CMAKE_MATCH_1} ms (${CMAKE_MATCH_2}%), "
                        "compare-schedules ${table_ms} ms (${table_pct}%)")
  endif()
  if(NOT out MATCHES "\\(MFU (${number})%\\)")
    message(FATAL_ERROR "run (${name}): no MFU:\n${out}")
  endif()
  if(NOT CMAKE_MATCH_1 STREQUAL table_mfu)
    message(FATAL_ERROR "${name}: run prints MFU ${CMAKE_MATCH_1}%, compare-schedules ${table_mfu}%")
  endif()
endforeach()
