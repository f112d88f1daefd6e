# Ctrl-C (SIGINT) during a long run: exit code 130, one line saying what was
# kept, and no output file (outputs are written when the run finishes).
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
execute_process(COMMAND timeout --preserve-status -s INT 2 ${TESSERA} run ${SCENARIO} --set training.global_batch=1536
                        --json-out r.json
                WORKING_DIRECTORY ${WORKDIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 130)
  message(FATAL_ERROR "expected exit code 130 after SIGINT, got ${rc}\n${err}")
endif()
if(NOT err MATCHES "^tessera: interrupted; nothing was written \\(outputs are written when the run finishes\\)\n$")
  message(FATAL_ERROR "unexpected message after SIGINT:\n${err}")
endif()
if(EXISTS ${WORKDIR}/r.json OR NOT out STREQUAL "")
  message(FATAL_ERROR "an interrupted run wrote output")
endif()
