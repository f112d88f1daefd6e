# A warning only the forecast can give is placed at the key it opens with,
# as the loader's warnings are (the noted gap: "failures: ... changes
# nothing" and the ns3.buffer warning named only the file): a cable failing
# after the iteration, written in the file, at the `failures` section's
# first line (its `links:`; not yet the cable's own entry); and with the
# scenario run as shipped, no such warning.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
file(READ ${SCENARIO} text)
string(STRIP "${text}" text)
string(APPEND text "\n")
string(REGEX MATCHALL "\n" lines "${text}")
list(LENGTH lines n)
math(EXPR line "${n} + 2")
file(WRITE ${WORKDIR}/late_failure.yaml "${text}failures:\n  links:\n    - {cable: leaf0-spine0, at: 10s}\n")
execute_process(COMMAND ${TESSERA} run ${WORKDIR}/late_failure.yaml
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT err MATCHES "^tessera: warning: [^\n]*late_failure.yaml:${line}:3: failures: leaf0-spine0 fails at 10000 ms, after the iteration ends")
  message(FATAL_ERROR "expected exit code 0 and the late failure at line ${line}, got ${rc}: ${err}")
endif()
execute_process(COMMAND ${TESSERA} run ${SCENARIO} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR err MATCHES "failures:")
  message(FATAL_ERROR "the shipped scenario: expected no failure warning, got ${rc}: ${err}")
endif()
