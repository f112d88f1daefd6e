# A job whose tensor-parallel group spans nodes (tp 4 with layout dp-tp-pp on
# two 8-GPU nodes): `tessera run` on the jobs scenario prints the warning on
# stderr, prefixed with the job's name, and the JSON report carries it in
# "warnings"; the scenario as shipped has none.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
file(READ ${SCENARIO} text)
string(REPLACE "  - name: job-a\n    nodes: 2\n"
               "  - name: job-a\n    nodes: 2\n    parallelism:\n      dp: 4\n      tp: 4\n      layout: dp-tp-pp\n"
               text "${text}")
if(NOT text MATCHES "layout: dp-tp-pp")
  message(FATAL_ERROR "could not give job-a its parallelism")
endif()
file(WRITE ${WORKDIR}/jobs_warn.yaml "${text}")
execute_process(COMMAND ${TESSERA} run ${WORKDIR}/jobs_warn.yaml --json
                OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT err MATCHES "^tessera: warning: .*jobs_warn.yaml: jobs job-a: parallelism.tp = 4 spans nodes")
  message(FATAL_ERROR "expected exit code 0 and job-a's warning on stderr, got ${rc}: ${err}")
endif()
json_one_warning("${json}" "^jobs job-a: parallelism.tp = 4 spans nodes: with layout dp-tp-pp " "job-a")
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --json OUTPUT_VARIABLE plain ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR plain MATCHES "\"warnings\"" OR NOT err STREQUAL "")
  message(FATAL_ERROR "the shipped jobs scenario: expected no warning, got ${rc}: ${err}\n${plain}")
endif()
