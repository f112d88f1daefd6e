# `tessera validate steps --data tests/data/h200/steps.csv`: plain-PyTorch
# training steps measured on an H200 (never fit on), each predicted as a
# one-GPU pytorch-eager scenario. Guards the figures measured on 2026-11-26
# (mean 9.5%, max 23.4%), each limit rounded up slightly.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
tessera_ok(out validate steps --data ${DATA})
message("${out}")
if(NOT out MATCHES "\n2 x 12288, 2048, 1, flash +1 +130.98 +[0-9.]+ +[-+][0-9.]+% +[-+][0-9.]+% +[-+][0-9.]+%\n")
  message(FATAL_ERROR "no row for the FlashAttention 2 x 12288 step (measured 130.98 ms)")
endif()
if(NOT out MATCHES "mean error ([0-9.]+)%, max ([0-9.]+)%, signed [-+][0-9.]+% over 10 configurations")
  message(FATAL_ERROR "no summary line")
endif()
set(mean ${CMAKE_MATCH_1})
set(max ${CMAKE_MATCH_2})
set(mean_limit 10.0)
set(max_limit 25.0)
if(mean GREATER ${mean_limit} OR max GREATER ${max_limit})
  message(FATAL_ERROR "mean ${mean}% / max ${max}%: above the limits ${mean_limit}% / ${max_limit}%")
endif()
