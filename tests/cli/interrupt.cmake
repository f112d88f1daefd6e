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

# search (SIGINT) and validate (SIGTERM): the same code and one line; they
# write nothing before they finish.
execute_process(COMMAND timeout --preserve-status -s INT 2 ${TESSERA} search ${SCENARIO} --max-candidates 256
                        --set training.global_batch=1536
                WORKING_DIRECTORY ${WORKDIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 130)
  message(FATAL_ERROR "search: expected exit code 130 after SIGINT, got ${rc}\n${err}")
endif()
if(NOT err MATCHES "^tessera: interrupted; nothing was written \\(search prints its plans when every candidate has been simulated\\)\n$"
   OR NOT out STREQUAL "")
  message(FATAL_ERROR "search: unexpected output after SIGINT:\n${out}\n${err}")
endif()
if(EXISTS "${KERNELS}")
  execute_process(COMMAND timeout --preserve-status -s TERM 1 ${TESSERA} validate kernels --leave-one-gpu-out
                          --data ${KERNELS}
                  WORKING_DIRECTORY ${WORKDIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 130)
    message(FATAL_ERROR "validate: expected exit code 130 after SIGTERM, got ${rc}\n${err}")
  endif()
  if(NOT err MATCHES "^tessera: interrupted; nothing was written \\(validate prints its report, and writes --rows, when it finishes\\)\n$")
    message(FATAL_ERROR "validate: unexpected message after SIGTERM:\n${err}")
  endif()
endif()
