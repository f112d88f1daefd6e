# Accuracy guard for `tessera validate distributed` (docs/parallelism.md,
# "Validation"): runs every scenario in scenarios/validation/ against
# NeuSight's measured 4-GPU Megatron-LM iterations and fails when the mean or
# the worst error exceeds MAX_MEAN / MAX_WORST (percent). Prints "SKIP: ..."
# (the test's SKIP_REGULAR_EXPRESSION) when the data is absent.
if(NOT IS_DIRECTORY "${DATA}")
  message("SKIP: NeuSight data not found at ${DATA}")
  return()
endif()
execute_process(COMMAND ${TESSERA} validate distributed --data ${DATA} --scenarios ${SCENARIOS}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera validate distributed failed (exit code ${rc}): ${err}")
endif()
if(NOT out MATCHES "([0-9]+) runs: mean error ([0-9.]+)%, max ([0-9.]+)%")
  message(FATAL_ERROR "no summary line in the output")
endif()
set(runs ${CMAKE_MATCH_1})
set(mean ${CMAKE_MATCH_2})
set(worst ${CMAKE_MATCH_3})
if(NOT runs EQUAL 11)
  message(FATAL_ERROR "expected the 11 measured runs, got ${runs}")
endif()
if(mean GREATER ${MAX_MEAN})
  message(FATAL_ERROR "mean error ${mean}% exceeds ${MAX_MEAN}%")
endif()
if(worst GREATER ${MAX_WORST})
  message(FATAL_ERROR "worst error ${worst}% exceeds ${MAX_WORST}%")
endif()
