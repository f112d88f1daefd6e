# The sweep summary and CSV: one row per point with its GPU count in the GPUs
# column, the memory columns in the CSV, and points that do not fit marked OOM.
set(csv ${WORKDIR}/summary.csv)
file(REMOVE ${csv} ${WORKDIR}/summary.svg)
file(MAKE_DIRECTORY ${WORKDIR})
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nodes=1,2 --set training.micro_batch=4,64
                        --out ${csv} --svg ${WORKDIR}/summary.svg --jobs 2
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sweep failed (${rc}): ${err}")
endif()
message("${out}")
foreach(expect "\n +0  cluster.nodes=1 training.micro_batch=4 +8 +[0-9.]+ +[0-9.]+ +[0-9]+\n"
               "\n +3  cluster.nodes=2 training.micro_batch=64 +16 +[0-9.]+ +[0-9.]+ +[0-9]+  OOM\n"
               "2 point\\(s\\) do not fit in GPU memory")
  if(NOT out MATCHES "${expect}")
    message(FATAL_ERROR "summary does not match ${expect}")
  endif()
endforeach()
file(STRINGS ${csv} lines)
list(GET lines 0 header)
if(NOT header MATCHES ",tokens_per_s,peak_memory_bytes,oom$")
  message(FATAL_ERROR "CSV header: ${header}")
endif()
list(GET lines 1 first)
if(NOT first MATCHES "^0,1,4,8,.*,[0-9]+,0$")
  message(FATAL_ERROR "first row: ${first}")
endif()
