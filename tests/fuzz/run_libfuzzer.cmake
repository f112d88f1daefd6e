# Runs the libFuzzer target for SECONDS on a working copy of the seed corpus
# (libFuzzer adds the inputs it finds to its first corpus directory).
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
file(GLOB seeds ${SEEDS}/*.yaml)
file(COPY ${seeds} DESTINATION ${WORKDIR})
execute_process(COMMAND ${FUZZER} ${WORKDIR} -max_total_time=${SECONDS} -seed=1 -max_len=8192 -print_final_stats=1
                        -artifact_prefix=${WORKDIR}/
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "libFuzzer found a crash (exit ${rc}); the input is in ${WORKDIR}/crash-*\n${err}")
endif()
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" runs "${err}")
message(STATUS "libFuzzer: ${runs}")
