# tessera run's FP8 line and node_model.md quote the FP8 rows' MAPE with
# their shapes held out (and the FP32-twin baseline's), as does the fp8
# scenario's comment; this runs `validate kernels --kfold 5` on XLA's
# H100 table and checks both carry today's figure.
# -DTESSERA, -DXLA (gemm_h100.csv), -DSCENARIO (an fp8 scenario), -DDOCS (node_model.md).
execute_process(COMMAND ${TESSERA} validate kernels --data ${XLA} --kfold 5 OUTPUT_VARIABLE v RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT v MATCHES "\nfp8 +1125 +([0-9]+\\.[0-9])% +([0-9]+\\.[0-9])%")
  message(FATAL_ERROR "validate kernels --kfold 5 (${rc}): no fp8 row in\n${v}")
endif()
set(mape "${CMAKE_MATCH_1}")
set(twin "${CMAKE_MATCH_2}")
execute_process(COMMAND ${TESSERA} run ${SCENARIO} OUTPUT_VARIABLE r RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT r MATCHES "\nFP8 +[^\n]*\\(([0-9]+\\.[0-9])% MAPE on XLA's H100 FP8 rows, shapes held")
  message(FATAL_ERROR "run ${SCENARIO} (${rc}): no FP8 line with a MAPE in\n${r}")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL mape)
  message(FATAL_ERROR "tessera run's FP8 line says ${CMAKE_MATCH_1}%, validate kernels --kfold 5 says ${mape}%")
endif()
if(NOT r MATCHES "shapes held out, worse than the FP32-twin baseline's ${twin}%")
  message(FATAL_ERROR "tessera run's FP8 line does not give the FP32-twin baseline's ${twin}%:\n${r}")
endif()
# ("worse than": true while the model's MAPE is above the baseline's)
if(NOT mape GREATER twin)
  message(FATAL_ERROR "the FP8 MAPE (${mape}%) is no longer above the FP32-twin baseline's (${twin}%): "
                      "reword kFp8GemmFigure's \"worse than\"")
endif()
# The scenario's own comment and node_model.md quote the figure too.
function(expect_quoted path separators text what)
  file(READ ${path} content)
  string(REGEX REPLACE "${separators}" " " content "${content}")
  string(FIND "${content}" "${text}" at)
  if(at LESS 0)
    message(FATAL_ERROR "${what} does not quote the FP8 rows' held-out MAPE as ${mape}%")
  endif()
endfunction()
expect_quoted(${SCENARIO} "\n# " "(${mape}% MAPE on XLA's" "${SCENARIO}'s comment")
expect_quoted(${DOCS} "[ \n]+" "(${mape}% MAPE on those rows with their shapes held out" "docs/node_model.md")
