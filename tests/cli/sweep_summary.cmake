# The sweep summary and CSV: one row per point with its GPU count in the GPUs
# column, the memory columns in the CSV, and points that do not fit marked OOM.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
set(csv ${WORKDIR}/summary.csv)
file(REMOVE ${csv} ${WORKDIR}/summary.svg ${WORKDIR}/wide.csv ${WORKDIR}/wide.svg)
file(MAKE_DIRECTORY ${WORKDIR})
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nodes=1,2 --set training.micro_batch=4,64
                        --out ${csv} --svg ${WORKDIR}/summary.svg --jobs 2
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sweep failed (${rc}): ${err}")
endif()
message("${out}")
# A node sweep: the scaling column (per-GPU throughput over the series' baseline;
# none for a point out of memory).
expect_matches("${out}" "the summary" "\n +0  cluster.nodes=1 training.micro_batch=4 +8 +[0-9.]+ +[0-9.]+ +[0-9]+ +100[.]0%\n"
               "\n +2  cluster.nodes=2 training.micro_batch=4 +16 +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9][0-9][.][0-9]%\n"
               "\n +3  cluster.nodes=2 training.micro_batch=64 +16 +[0-9.]+ +[0-9.]+ +[0-9]+ +-  OOM\n"
               "2 point\\(s\\) do not fit in GPU memory")
file(STRINGS ${csv} lines)
list(GET lines 0 header)
if(NOT header MATCHES "^point,cluster.nodes,training.micro_batch,gpus,fabric_tiers,iteration_time_s,.*,tokens_per_s,peak_memory_bytes,oom,dp,tp,pp,micro_batches,mfu,global_batch,ep,hfu,memory_capacity_bytes,virtual_stages,network_bytes,nvlink_bytes,fabric_bytes,training_tokens,training_days,gpu_hours,cost$")
  message(FATAL_ERROR "CSV header: ${header}")
endif()
list(GET lines 1 first)
# dp 8 (auto on one node), tp, pp, 1 micro-batch, MFU, 8 x 4 sequences, no
# expert parallelism, HFU (no recomputation: the MFU's GEMMs and the other
# kernels, under 1% more here), an H100's 80 GiB, one model chunk per rank,
# the bytes sent (all over NVLink on one node: the network's are the
# NVLink's, none between nodes), no training run (no training.tokens)
if(NOT first MATCHES "^0,1,4,8,2,.*,[0-9]+,0,8,1,1,1,0[.]([0-9]+),32,1,0[.]([0-9]+),85899345920,1,([1-9][0-9]+),([0-9]+),0,,,,$"
   OR NOT CMAKE_MATCH_3 STREQUAL CMAKE_MATCH_4)
  message(FATAL_ERROR "first row: ${first}")
endif()
# (six decimals each: MFU and HFU in millionths)
math(EXPR hfu_over_mfu "${CMAKE_MATCH_2} - ${CMAKE_MATCH_1}")
if(hfu_over_mfu LESS_EQUAL 0 OR hfu_over_mfu GREATER 4000)
  message(FATAL_ERROR "HFU - MFU in millionths: ${hfu_over_mfu} (${first})")
endif()
# Labels longer than the settings column's 40 characters widen it: every
# row's GPUs column ends where the header's does. A key given one value
# (training.micro_batch=4) is said once above the table, not in its rows.
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nodes=1,2 --set training.micro_batch=4
                        --set collectives.granularity=flows,steps --out ${WORKDIR}/wide.csv --svg ${WORKDIR}/wide.svg
                OUTPUT_VARIABLE wide ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "wide sweep failed (${rc}): ${err}")
endif()
if(NOT wide MATCHES "^models: tile-mlp node model, flow network backend\nevery point: training.micro_batch=4\npoint  settings ")
  message(FATAL_ERROR "the one-value key is not said once above the table:\n${wide}")
endif()
string(REPLACE "\n" ";" wide_lines "${wide}")
set(end_at "")
foreach(line IN LISTS wide_lines)
  if(line MATCHES "^point  settings" OR line MATCHES "^ +[0-9]+  cluster")
    string(FIND "${line}" "GPUs" at_header)
    if(at_header GREATER -1)
      math(EXPR end_at "${at_header} + 4")
    else()
      string(REGEX MATCH "^ +[0-9]+  cluster[^ ]+ collectives[^ ]+ +[0-9]+" head "${line}")
      string(LENGTH "${head}" n)
      if(NOT n EQUAL end_at)
        message(FATAL_ERROR "GPUs column misaligned (ends at ${n}, header at ${end_at}):\n${wide}")
      endif()
    endif()
  endif()
endforeach()
if(end_at STREQUAL "")
  message(FATAL_ERROR "no header in:\n${wide}")
endif()
