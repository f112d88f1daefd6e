# `tessera validate steps --data DATA [ARGS]` (ARGS a ;-list): training steps
# measured on a GPU (tests/data/h200, tests/data/h100), each predicted as a
# scenario of the rows' framework, pytorch-eager unless a training.framework
# column says otherwise (what was fit on which file: tests/cli/CMakeLists.txt
# beside the tests, docs/node_model.md). Guards the
# figures measured on 2026-11-26: the summary's mean and max error must stay
# at or below MEAN_LIMIT and MAX_LIMIT (each the measured figure rounded up
# slightly) over CONFIGS configurations, and the output must hold a row
# matching ROW (a regular expression naming one measured step).
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
set(extra ${ARGS})  # a ;-list
tessera_ok(out validate steps --data ${DATA} ${extra})
message("${out}")
if(NOT out MATCHES "${ROW}")
  message(FATAL_ERROR "no row matching '${ROW}'")
endif()
if(NOT out MATCHES "mean error ([0-9.]+)%, max ([0-9.]+)%, signed [-+][0-9.]+% over ${CONFIGS} configurations")
  message(FATAL_ERROR "no summary line over ${CONFIGS} configurations")
endif()
set(mean ${CMAKE_MATCH_1})
set(max ${CMAKE_MATCH_2})
if(mean GREATER ${MEAN_LIMIT} OR max GREATER ${MAX_LIMIT})
  message(FATAL_ERROR "mean ${mean}% / max ${max}%: above the limits ${MEAN_LIMIT}% / ${MAX_LIMIT}%")
endif()
