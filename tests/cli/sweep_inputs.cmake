# A sweep's identity covers the files its scenario reads (helper 94): shards
# run before and after the measured kernel times of node_model.overrides
# were edited are shards of two sweeps, which sweep-merge refuses, where two
# shards of the unedited file merge.
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
file(READ ${SCENARIO} text)
file(WRITE ${WORKDIR}/s.yaml "${text}node_model:\n  overrides: k.csv\n")
file(WRITE ${WORKDIR}/k.csv "op,b,m,n,k,h,dtype,time_us\nlinear,1,8192,2048,2048,0,bf16,100\n")
set(common sweep s.yaml --set training.micro_batch=1,2 --jobs 1)
foreach(shard 0 1)
  execute_process(COMMAND ${TESSERA} ${common} --shard ${shard}/2 --out a${shard}.csv WORKING_DIRECTORY ${WORKDIR}
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "shard ${shard}/2 failed (${rc}): ${err}")
  endif()
endforeach()
execute_process(COMMAND ${TESSERA} sweep-merge --out a.csv a0.csv a1.csv WORKING_DIRECTORY ${WORKDIR}
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "shards of one sweep should merge (${rc}): ${err}")
endif()
file(WRITE ${WORKDIR}/k.csv "op,b,m,n,k,h,dtype,time_us\nlinear,1,8192,2048,2048,0,bf16,1000\n")
execute_process(COMMAND ${TESSERA} ${common} --shard 1/2 --out b1.csv WORKING_DIRECTORY ${WORKDIR}
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
execute_process(COMMAND ${TESSERA} sweep-merge --out b.csv a0.csv b1.csv WORKING_DIRECTORY ${WORKDIR}
                RESULT_VARIABLE rc2 ERROR_VARIABLE err2 OUTPUT_QUIET)
if(NOT rc EQUAL 0 OR NOT rc2 EQUAL 2 OR NOT err2 MATCHES "b1.csv: a shard of another sweep")
  message(FATAL_ERROR "a shard run after k.csv was edited should not merge (${rc}, ${rc2}): ${err}${err2}")
endif()
# node_model.weights: what the predictor reads of the folder (tile_mlp.txt,
# tensor_core.txt) is covered, no other file: a log written into the folder
# between two shards leaves them one sweep.
file(MAKE_DIRECTORY ${WORKDIR}/w)
file(COPY ${WEIGHTS}/tile_mlp.txt ${WEIGHTS}/tensor_core.txt DESTINATION ${WORKDIR}/w)
file(WRITE ${WORKDIR}/w.yaml "${text}node_model:\n  weights: w\n")
set(common sweep w.yaml --set training.micro_batch=1,2 --jobs 1)
execute_process(COMMAND ${TESSERA} ${common} --shard 0/2 --out w0.csv WORKING_DIRECTORY ${WORKDIR}
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
file(WRITE ${WORKDIR}/w/train.log "epoch 1\n")
execute_process(COMMAND ${TESSERA} ${common} --shard 1/2 --out w1.csv WORKING_DIRECTORY ${WORKDIR}
                RESULT_VARIABLE rc1 ERROR_VARIABLE err1 OUTPUT_QUIET)
execute_process(COMMAND ${TESSERA} sweep-merge --out w.csv w0.csv w1.csv WORKING_DIRECTORY ${WORKDIR}
                RESULT_VARIABLE rc2 ERROR_VARIABLE err2 OUTPUT_QUIET)
if(NOT rc EQUAL 0 OR NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "a file the predictor does not read should not split the sweep (${rc}, ${rc1}, ${rc2}): ${err}${err1}${err2}")
endif()
