# Runs TESSERA with ARGS (a ;-list) and checks: exit code 2 (or RC), nothing
# on stdout, exactly one line on stderr, matching REGEX. REMOVE_FIRST
# (optional): a file removed before the run (a sweep's CSV, which it would
# resume).
if(DEFINED REMOVE_FIRST)
  file(REMOVE ${REMOVE_FIRST})
endif()
if(NOT DEFINED RC)
  set(RC 2)
endif()
execute_process(COMMAND ${TESSERA} ${ARGS} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL RC)
  message(FATAL_ERROR "expected exit code ${RC}, got ${rc}\nstderr: ${err}")
endif()
if(NOT out STREQUAL "")
  message(FATAL_ERROR "expected no output on stdout, got:\n${out}")
endif()
string(REGEX REPLACE "\n$" "" line "${err}")
if(line MATCHES "\n")
  message(FATAL_ERROR "expected one line on stderr, got:\n${err}")
endif()
if(NOT line MATCHES "${REGEX}")
  message(FATAL_ERROR "stderr does not match\n  ${REGEX}\ngot\n  ${line}")
endif()
