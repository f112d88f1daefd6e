# `tessera run` of a scenario with jobs, one of which does not fit in GPU
# memory (job-b at micro-batch 64): the summary on stdout with the Memory
# line marking it, one line on stderr naming the job and its stage, exit
# code 3; with --allow-oom the same forecast, exit code 0, and in --json
# each job's memory with "oom".
set(base ${WORKDIR}/run_jobs_oom.yaml)
file(READ ${SCENARIO} text)
string(REPLACE "  - name: job-b\n    nodes: 2\n"
       "  - name: job-b\n    nodes: 2\n    training:\n      micro_batch: 64\n      seq_len: 1024\n      dtype: bf16\n"
       edited "${text}")
if(edited STREQUAL text)
  message(FATAL_ERROR "two-jobs.yaml no longer has job-b as this test expects")
endif()
file(WRITE ${base} "${edited}")
execute_process(COMMAND ${TESSERA} run ${base} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 3)
  message(FATAL_ERROR "expected exit code 3, got ${rc}\nstdout: ${out}\nstderr: ${err}")
endif()
if(NOT out MATCHES "\nMemory         job-a: [0-9.]+ of 80.0 GiB \\(stage 0\\); job-b: [0-9.]+ of 80.0 GiB \\(stage 0\\) \\*\\* OUT OF MEMORY \\*\\*\n")
  message(FATAL_ERROR "no Memory line marking job-b:\n${out}")
endif()
string(REGEX REPLACE "\n$" "" line "${err}")
if(line MATCHES "\n" OR NOT line MATCHES "^tessera: out of memory: .*run_jobs_oom.yaml: job job-b does not fit in GPU memory: pipeline stage 0 needs [0-9.]+ GiB of 80.0 GiB \\(--allow-oom to accept the forecast\\)$")
  message(FATAL_ERROR "unexpected stderr:\n${err}")
endif()
execute_process(COMMAND ${TESSERA} run ${base} --allow-oom --json OUTPUT_VARIABLE out2 ERROR_VARIABLE err2 RESULT_VARIABLE rc2)
if(NOT rc2 EQUAL 0 OR NOT err2 STREQUAL "")
  message(FATAL_ERROR "--allow-oom: expected exit code 0 and no stderr, got ${rc2}: ${err2}")
endif()
string(JSON a_oom GET "${out2}" jobs 0 oom)
string(JSON b_oom GET "${out2}" jobs 1 oom)
string(JSON b_peak GET "${out2}" jobs 1 peak_memory_bytes)
string(JSON b_cap GET "${out2}" jobs 1 memory_capacity_bytes)
if(NOT a_oom STREQUAL "OFF" OR NOT b_oom STREQUAL "ON" OR NOT b_cap EQUAL 85899345920 OR NOT b_peak GREATER b_cap)
  message(FATAL_ERROR "--json: job oom ${a_oom}/${b_oom}, job-b ${b_peak} of ${b_cap}\n${out2}")
endif()
# Both jobs out of memory: one line naming both.
string(REPLACE "  - name: job-a\n" "  - name: job-a\n    training:\n      micro_batch: 64\n      seq_len: 1024\n      dtype: bf16\n"
       both "${edited}")
if(both STREQUAL edited)
  message(FATAL_ERROR "two-jobs.yaml no longer has job-a as this test expects")
endif()
file(WRITE ${WORKDIR}/run_jobs_oom_both.yaml "${both}")
execute_process(COMMAND ${TESSERA} run ${WORKDIR}/run_jobs_oom_both.yaml OUTPUT_QUIET ERROR_VARIABLE err3 RESULT_VARIABLE rc3)
string(REGEX REPLACE "\n$" "" line3 "${err3}")
if(NOT rc3 EQUAL 3 OR line3 MATCHES "\n" OR NOT line3 MATCHES "^tessera: out of memory: .*run_jobs_oom_both.yaml: jobs job-a, job-b do not fit in GPU memory: job-a's pipeline stage 0 needs [0-9.]+ GiB of 80.0 GiB; job-b's pipeline stage 0 needs [0-9.]+ GiB of 80.0 GiB \\(--allow-oom to accept the forecast\\)$")
  message(FATAL_ERROR "both jobs out of memory (${rc3}):\n${err3}")
endif()
