# A sweep names each caveat tessera run would print, with its points, and the
# chart says each in its own direction: over llama3-70b-fp8 with
# training.dtype=bf16,fp8, the FP8 line holds for the fp8 point only, and
# FlashAttention's known bias (pessimistic attention) is not put among the
# GPU's optimistic ones.
# -DTESSERA, -DSCENARIO (llama3-70b-fp8.yaml), -DOUT (the CSV to write).
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set training.dtype=bf16,fp8 --jobs 1 --out ${OUT}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sweep failed (${rc}): ${err}")
endif()
expect_matches("${out}" "sweep output"
    "\nnote: fp8 for point 1: layer GEMMs in FP8, timed unvalidated: the BF16 fit's utilization on the FP8 peak, fit on no FP8 data \\([0-9.]+% MAPE on XLA's H100 FP8 rows"
    "\nnote \\(every point\\): known bias: flash_attention: [^\n]*so attention is pessimistic")
string(REGEX REPLACE "\\.csv$" ".svg" chart "${OUT}")
file(READ ${chart} svg)
foreach(expected
    "FP8, points with training.dtype=fp8: layer GEMM times unvalidated"
    "Known bias, every point: FlashAttention timed as the full s x s square")
  string(FIND "${svg}" "${expected}" at)
  if(at LESS 0)
    message(FATAL_ERROR "the chart lacks '${expected}':\n${svg}")
  endif()
endforeach()
if(svg MATCHES "flash_attention, whose forecasts validate optimistic")
  message(FATAL_ERROR "the chart calls FlashAttention's bias optimistic:\n${svg}")
endif()
