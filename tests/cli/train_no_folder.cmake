# train-predictor whose training fails (GEMM times in microseconds where
# milliseconds are read) exits 2 and leaves no --out folder behind: the
# folder is made when the first weights are written.
set(csv ${WORKDIR}/gemms_us.csv)
file(WRITE ${csv} "OPName,Latency,Device,dtype,B,M,N,K\n")
foreach(m 1024 2048 4096 8192)
  file(APPEND ${csv} "linear,8.864,NVIDIA H100 80GB HBM3,bf16,1,${m},1024,768\n")
  file(APPEND ${csv} "linear,9.5,NVIDIA H100 80GB HBM3,bf16,1,${m},4096,1024\n")
endforeach()
set(out ${WORKDIR}/weights_never)
file(REMOVE_RECURSE ${out})
execute_process(COMMAND ${TESSERA} train-predictor --only tensor-core --gemms ${csv} --device H100-SXM --out ${out}
                OUTPUT_VARIABLE stdout ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit code 2, got ${rc}\n${stdout}${err}")
endif()
if(NOT err MATCHES "its times must be milliseconds")
  message(FATAL_ERROR "unexpected error: ${err}")
endif()
if(EXISTS ${out})
  message(FATAL_ERROR "the failed training left ${out} behind")
endif()
