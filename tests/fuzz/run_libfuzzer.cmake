# Runs the libFuzzer target for SECONDS on a working copy of the seed corpus
# (libFuzzer adds the inputs it finds to its first corpus directory).
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
if(LOADERS)
  # loader_fuzz: the first byte names the loader (d, k, h, g), from the
  # hostile corpus's file name prefix.
  foreach(pair IN ITEMS "dev_*.json|d" "k_*.csv|k" "hf_*.json|h" "g_*.csv|g")
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 pattern)
    list(GET pair 1 selector)
    file(GLOB seeds ${SEEDS}/${pattern})
    foreach(seed IN LISTS seeds)
      file(SIZE ${seed} bytes)
      if(bytes GREATER 8000)
        continue()
      endif()
      file(READ ${seed} text)
      get_filename_component(name ${seed} NAME)
      file(WRITE ${WORKDIR}/${name} "${selector}${text}")
    endforeach()
  endforeach()
else()
  file(GLOB seeds ${SEEDS}/*.yaml)
  file(COPY ${seeds} DESTINATION ${WORKDIR})
endif()
# (-timeout: an input that takes more than 10 s is a hang, reported as a
# crash; TIMEOUT: the process never outlives the test by much)
math(EXPR hard_limit "${SECONDS} + 120")
execute_process(COMMAND ${FUZZER} ${WORKDIR} -max_total_time=${SECONDS} -seed=1 -max_len=8192 -print_final_stats=1
                        -timeout=10 -rss_limit_mb=2048 -artifact_prefix=${WORKDIR}/
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${hard_limit})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "libFuzzer found a crash (exit ${rc}); the input is in ${WORKDIR}/crash-*\n${err}")
endif()
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" runs "${err}")
message(STATUS "libFuzzer: ${runs}")
