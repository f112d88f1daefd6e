# `tessera search` prints its winner as --set flags; running the scenario with
# them reproduces the winner's iteration time (rank 1 of the table).
# CAP: --max-candidates (default 8). MOE: the scenario's model has experts:
# the table has an ep column, some plan of it has ep > 1, and the flags and
# YAML name ep; otherwise none of them mentions ep. EXTRA: more search
# options (a list). SETS: --set options for both search and run (a list).
# KEPT: a line the YAML must end its parallelism section with (the
# scenario's keys search keeps), also named in the Kept line. ZERO: the
# stage the winner's flags and YAML must give (EXTRA with --zero-stages).
# SYNC: the gradient sync the winner's flags and YAML must give (EXTRA with
# --grad-syncs).
if(NOT DEFINED CAP)
  set(CAP 8)
endif()
execute_process(COMMAND ${TESSERA} search ${SCENARIO} ${SETS} --max-candidates ${CAP} --top ${CAP} ${EXTRA}
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "search failed: ${rc}")
endif()
# rank dp tp pp [ep] mb schedule [chunks] recompute [zero] [grad sync] iteration-ms
if(NOT out MATCHES "\n +1 +[0-9]+ +[0-9]+ +[0-9]+( +[0-9]+)? +[0-9]+ +[a-z0-9-]+( +[0-9]+)? +[a-z]+( +[0-3])?( +[a-z-]+)? +([0-9.]+) ")
  message(FATAL_ERROR "no rank-1 row in\n${out}")
endif()
set(best_ms ${CMAKE_MATCH_5})
if(NOT out MATCHES "best plan as flags: ([^\n]+)\n")
  message(FATAL_ERROR "no best-plan flags in\n${out}")
endif()
set(flag_text "${CMAKE_MATCH_1}")
separate_arguments(flags UNIX_COMMAND "${flag_text}")
if(MOE)
  if(NOT out MATCHES "\n *rank +dp +tp +pp +ep +mb ")
    message(FATAL_ERROR "no ep column in\n${out}")
  endif()
  if(NOT out MATCHES "\n +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +([2-9]|[1-9][0-9]+) +[0-9]+ +[a-z0-9-]+ +[a-z]+ +[0-9.]+ ")
    message(FATAL_ERROR "no plan with ep > 1 in\n${out}")
  endif()
  if(NOT flag_text MATCHES "--set parallelism.ep=[0-9]+ "
     OR NOT out MATCHES "best plan as YAML:\nparallelism:\n  dp: [0-9]+\n  tp: [0-9]+\n  pp: [0-9]+\n  ep: [0-9]+\n")
    message(FATAL_ERROR "the winner's flags or YAML do not name ep:\n${out}")
  endif()
else()
  if(out MATCHES " ep " OR out MATCHES "parallelism\\.ep=" OR out MATCHES "\n  ep: ")
    message(FATAL_ERROR "a dense model's search mentions ep:\n${out}")
  endif()
endif()
if(NOT out MATCHES "best plan as YAML:\nparallelism:\n  dp: [0-9]+\n  tp: [0-9]+\n  pp: [0-9]+\n")
  message(FATAL_ERROR "no best-plan YAML in\n${out}")
endif()
if(DEFINED ZERO)
  if(NOT out MATCHES "\n *rank +dp +tp +pp +mb +schedule +recompute +zero +iteration ms"
     OR NOT flag_text MATCHES "--set parallelism.zero_stage=${ZERO} "
     OR NOT out MATCHES "\n  zero_stage: ${ZERO}\ntraining:\n")
    message(FATAL_ERROR "no zero column, or the winner's flags and YAML do not give zero_stage ${ZERO}:\n${out}")
  endif()
endif()
if(DEFINED SYNC)
  if(NOT out MATCHES "\n *rank +dp +tp +pp +mb +schedule +recompute( +zero)? +grad sync +iteration ms"
     OR NOT flag_text MATCHES "--set parallelism.grad_sync=${SYNC} "
     OR NOT out MATCHES "\n  grad_sync: ${SYNC}\ntraining:\n")
    message(FATAL_ERROR "no grad sync column, or the winner's flags and YAML do not give grad_sync ${SYNC}:\n${out}")
  endif()
endif()
if(DEFINED KEPT)
  string(REPLACE ";" ", " kept_line "${KEPT}")
  string(REPLACE ";" "\n  " kept_yaml "${KEPT}")
  # (a ZeRO stage kept is followed by the option that searches it, and by
  # "(0 where dp = 1)" where a plan without data parallelism was simulated:
  # search.zero_stage_dropped_without_dp checks that note)
  string(REPLACE " (0 where dp = 1)" "" kept_out "${out}")
  string(FIND "${kept_out}" "\nKept           ${kept_line} (the scenario's, not searched" k1)
  string(FIND "${out}" "\n  ${kept_yaml}\ntraining:\n" k2)
  if(k1 EQUAL -1 OR k2 EQUAL -1)
    message(FATAL_ERROR "the kept keys (${KEPT}) are not in the Kept line and the YAML:\n${out}")
  endif()
endif()
# The flags alone reproduce it on the scenario file: they carry the search's
# own --set flags (helper 73: not the node count searched with).
execute_process(COMMAND ${TESSERA} run ${SCENARIO} ${flags} --allow-oom OUTPUT_VARIABLE run RESULT_VARIABLE rc2)
if(NOT rc2 EQUAL 0 OR NOT run MATCHES "Iteration +([0-9.]+) ms")
  message(FATAL_ERROR "run with the flags failed (${rc2}):\n${run}")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL best_ms)
  message(FATAL_ERROR "run with the winner's flags: ${CMAKE_MATCH_1} ms, search said ${best_ms} ms")
endif()
