# `mpirun -np 2 tessera sweep ... --shard auto` then sweep-merge gives the
# same CSV as the sweep run in one piece.
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
set(common sweep ${SCENARIO} --set training.micro_batch=1,2,4 --jobs 1)
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/whole.csv RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "whole sweep failed: ${err}")
endif()
execute_process(COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe -np 2 ${TESSERA} ${common} --shard auto
                WORKING_DIRECTORY ${WORKDIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun failed (${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/merged.csv ${WORKDIR}/default-sweep.shard0of2.csv
                        ${WORKDIR}/default-sweep.shard1of2.csv RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "merge failed: ${err}")
endif()
file(READ ${WORKDIR}/whole.csv a)
file(READ ${WORKDIR}/merged.csv b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "MPI shards merged differ from the whole sweep:\n${a}\n---\n${b}")
endif()
