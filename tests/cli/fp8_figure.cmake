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
if(NOT rc EQUAL 0 OR NOT r MATCHES "\nFP8 +[^\n]*\\(([0-9]+\\.[0-9])% MAPE on XLA's FP8 rows, shapes held")
  message(FATAL_ERROR "run ${SCENARIO} (${rc}): no FP8 line with a MAPE in\n${r}")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL mape)
  message(FATAL_ERROR "tessera run's FP8 line says ${CMAKE_MATCH_1}%, validate kernels --kfold 5 says ${mape}%")
endif()
if(NOT r MATCHES "shapes held out, against ${twin}% for the FP32-twin baseline")
  message(FATAL_ERROR "tessera run's FP8 line does not give the FP32-twin baseline's ${twin}%:\n${r}")
endif()
# The scenario's own comment quotes the figure too.
file(READ ${SCENARIO} yaml)
string(REGEX REPLACE "\n# " " " yaml "${yaml}")
string(FIND "${yaml}" "(${mape}% MAPE on XLA's" at)
if(at LESS 0)
  message(FATAL_ERROR "${SCENARIO}'s comment does not quote the FP8 rows' held-out MAPE as ${mape}%")
endif()
file(READ ${DOCS} docs)
string(REGEX REPLACE "[ \n]+" " " docs "${docs}")
string(FIND "${docs}" "(${mape}% MAPE on those rows with their shapes held out" at)
if(at LESS 0)
  message(FATAL_ERROR "docs/node_model.md does not quote the FP8 rows' held-out MAPE as ${mape}%")
endif()
