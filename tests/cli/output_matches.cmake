# Runs TESSERA with ARGS (a ;-list) once and checks: exit code 0 and its
# stdout matching REGEX and, where given, REGEX2 (two checks of one run
# that would otherwise run the same command twice).
execute_process(COMMAND ${TESSERA} ${ARGS} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit code 0, got ${rc}\nstderr: ${err}")
endif()
foreach(regex REGEX REGEX2)
  if(DEFINED ${regex} AND NOT out MATCHES "${${regex}}")
    message(FATAL_ERROR "stdout does not match\n  ${${regex}}\ngot\n${out}")
  endif()
endforeach()
