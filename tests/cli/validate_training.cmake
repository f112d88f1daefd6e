# Accuracy guard for `tessera validate training` (docs/calibration.md): every
# measured single-node Megatron-DeepSpeed iteration of vTrain's table run as a
# scenario with the shipped calibration. ARGS are extra arguments (e.g. --gpu,
# --every, --cv); LIMITS is a ;-list of "GPU:STAT=PERCENT" with STAT one of
# mean, p90, max, read from the "summary GPU: ..." lines, or marginal_mean,
# marginal_p90, marginal_max from the "marginal GPU: ..." lines (the cost of
# one more micro-batch, what large-batch forecasts extrapolate), or
# layer_mean, layer_p90, layer_max from the "per-layer GPU: ..." lines (the
# cost of one more layer, what forecasts of deeper models extrapolate).
# SIGNED is a ;-list of "GPU:ROW=LOW..HIGH": the signed error (percent) of
# that row of the Per layer table must lie in [LOW, HIGH] (two-sided: a
# figure that `tessera run` quotes to users, parallelism::known_bias_note,
# must still be true). Prints "SKIP: ..." (the test's
# SKIP_REGULAR_EXPRESSION) when the data is absent.
if(NOT EXISTS "${DATA}/ground_truth_single.csv")
  message("SKIP: vTrain measurements not found under ${DATA}")
  return()
endif()
separate_arguments(extra UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${TESSERA} validate training --data ${DATA} ${extra}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera validate training failed (exit code ${rc}): ${err}")
endif()
foreach(limit IN LISTS LIMITS)
  string(REGEX MATCH "^([^:]+):([a-z0-9_]+)=([0-9.]+)$" ok "${limit}")
  if(NOT ok)
    message(FATAL_ERROR "bad limit '${limit}'")
  endif()
  set(gpu "${CMAKE_MATCH_1}")
  set(stat "${CMAKE_MATCH_2}")
  set(max "${CMAKE_MATCH_3}")
  set(line summary)
  if(stat MATCHES "^marginal_(.*)$")
    set(line marginal)
    set(stat "${CMAKE_MATCH_1}")
  elseif(stat MATCHES "^layer_(.*)$")
    set(line per-layer)
    set(stat "${CMAKE_MATCH_1}")
  endif()
  if(NOT out MATCHES "\n${line} ${gpu}: mean ([0-9.]+)% p90 ([0-9.]+)% max ([0-9.]+)%")
    message(FATAL_ERROR "no ${line} line for ${gpu}")
  endif()
  if(stat STREQUAL "mean")
    set(value ${CMAKE_MATCH_1})
  elseif(stat STREQUAL "p90")
    set(value ${CMAKE_MATCH_2})
  elseif(stat STREQUAL "max")
    set(value ${CMAKE_MATCH_3})
  else()
    message(FATAL_ERROR "bad statistic '${stat}'")
  endif()
  message(STATUS "${line} ${gpu} ${stat}: ${value}% (limit ${max}%)")
  if(value GREATER ${max})
    message(FATAL_ERROR "${gpu} ${stat}: ${value}% exceeds ${max}%")
  endif()
endforeach()
foreach(range IN LISTS SIGNED)
  string(FIND "${out}" "\nPer layer:" per_layer_at)
  string(REGEX MATCH "^([^:]+):(.+)=(-?[0-9.]+)[.][.](-?[0-9.]+)$" ok "${range}")
  if(NOT ok OR per_layer_at EQUAL -1)
    message(FATAL_ERROR "bad range '${range}' or no Per layer table")
  endif()
  string(SUBSTRING "${out}" ${per_layer_at} -1 per_layer)
  set(gpu "${CMAKE_MATCH_1}")
  set(row "${CMAKE_MATCH_2}")
  set(low "${CMAKE_MATCH_3}")
  set(high "${CMAKE_MATCH_4}")
  if(NOT per_layer MATCHES "\n${gpu} +${row} +[0-9]+ +[0-9.]+% +[0-9.]+% +[0-9.]+% +[0-9.]+% +([+-][0-9.]+)%")
    message(FATAL_ERROR "no Per layer row '${row}' for ${gpu}")
  endif()
  set(value ${CMAKE_MATCH_1})
  message(STATUS "per layer ${gpu} ${row} signed: ${value}% (range ${low}% .. ${high}%)")
  string(REGEX REPLACE "^[+]" "" value "${value}")
  if(value LESS ${low} OR value GREATER ${high})
    message(FATAL_ERROR "${gpu} per layer ${row}: signed ${value}% outside ${low}% .. ${high}%")
  endif()
endforeach()
