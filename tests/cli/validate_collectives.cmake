# Accuracy guard for `tessera validate collectives` (docs/collectives.md,
# "Calibration"): simulates every measured NCCL collective of the A100 and
# H100 NVLink tables with the calibrated model and fails when a summary MAPE
# exceeds its threshold. LIMITS is a ;-list of "LABEL=PERCENT" where LABEL is
# the text after "summary " up to the colon (e.g. "table a100 (>= 1 MiB)").
# FIT (optional) is passed as --fit. Prints "SKIP: ..." (the test's
# SKIP_REGULAR_EXPRESSION) when the data is absent.
if(NOT IS_DIRECTORY "${DATA}/vtrain/allreduce_a100" OR NOT EXISTS "${DATA}/xla/collectives_h100.csv")
  message("SKIP: collective measurements not found under ${DATA}")
  return()
endif()
set(args validate collectives --data ${DATA})
if(FIT)
  list(APPEND args --fit ${FIT})
endif()
execute_process(COMMAND ${TESSERA} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera validate collectives failed (exit code ${rc}): ${err}")
endif()
foreach(limit IN LISTS LIMITS)
  string(REGEX MATCH "^(.*)=([0-9.]+)$" ok "${limit}")
  if(NOT ok)
    message(FATAL_ERROR "bad limit '${limit}'")
  endif()
  set(label "${CMAKE_MATCH_1}")
  set(max "${CMAKE_MATCH_2}")
  string(REGEX REPLACE "([][()+.*?^$|\\\\])" "\\\\\\1" pattern "${label}")
  if(NOT out MATCHES "\nsummary ${pattern}: ([0-9.]+)%")
    message(FATAL_ERROR "no summary line for '${label}'")
  endif()
  set(value ${CMAKE_MATCH_1})
  message(STATUS "${label}: ${value}% (limit ${max}%)")
  if(value GREATER ${max})
    message(FATAL_ERROR "${label}: MAPE ${value}% exceeds ${max}%")
  endif()
endforeach()
