# `tessera validate kernels --data gemm_h100.csv`: detects XLA's GEMM table by
# its header and prints MAPE per dtype beside the FP32-twin method and the
# roofline, plus the noise floor against the older table. Prints "SKIP: ..."
# (the test's SKIP_REGULAR_EXPRESSION) when the data is absent.
if(NOT EXISTS "${DATA}")
  message("SKIP: XLA data not found at ${DATA}")
  return()
endif()
get_filename_component(dir "${DATA}" DIRECTORY)
execute_process(COMMAND ${TESSERA} validate kernels --data ${DATA} --noise ${dir}/gemm_h100_older_table.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera validate kernels failed (exit code ${rc}): ${err}")
endif()
foreach(re "dtype +rows +tile-mlp MAPE +fp32-twin MAPE +roofline MAPE"
           "\nbf16 +375 +[0-9.]+% +[0-9.]+% +[0-9.]+%"
           "\ntf32 +375 +[0-9.]+% +[0-9.]+% +[0-9.]+%"
           "\nfp8 +1125 "
           "noise floor: .*\nbf16 +375 +[0-9.]+%\ntf32 +375 ")
  if(NOT out MATCHES "${re}")
    message(FATAL_ERROR "output does not match '${re}'")
  endif()
endforeach()
