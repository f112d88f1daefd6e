# One case of the hostile-input corpus (hostile.cmake): runs TESSERA with ARGS
# (a ;-list) in a fresh WORKDIR holding s.yaml (a copy of SCENARIO) and every
# file of FILES_DIR, optionally with environment ENVS (VAR=VALUE;...) and
# SETUP steps (readonly:NAME makes a read-only file NAME), stdout to the file
# STDOUT if given. Checks:
#  - the exit code is RC;
#  - for RC 2 or 3: exactly one line on stderr (unless MULTILINE), matching
#    REGEX; for RC 2
#    nothing on stdout;
#  - for RC != 0: no file was created, removed or changed in WORKDIR (no
#    partial output, no temporary left, no input overwritten).
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
file(COPY ${SCENARIO} DESTINATION ${WORKDIR})
get_filename_component(scenario_name ${SCENARIO} NAME)
file(RENAME ${WORKDIR}/${scenario_name} ${WORKDIR}/s.yaml)
file(GLOB inputs ${FILES_DIR}/*)
file(COPY ${inputs} DESTINATION ${WORKDIR})
foreach(step IN LISTS SETUP)
  if(step MATCHES "^readonly:(.+)$")
    file(WRITE ${WORKDIR}/${CMAKE_MATCH_1} "keep me\n")
    file(CHMOD ${WORKDIR}/${CMAKE_MATCH_1} PERMISSIONS OWNER_READ GROUP_READ WORLD_READ)
  endif()
endforeach()

function(snapshot out)
  file(GLOB_RECURSE files LIST_DIRECTORIES true RELATIVE ${WORKDIR} ${WORKDIR}/* ${WORKDIR}/.*)
  list(SORT files)
  set(state "")
  foreach(f IN LISTS files)
    if(IS_DIRECTORY ${WORKDIR}/${f})
      string(APPEND state "${f}/\n")
    else()
      file(SHA256 ${WORKDIR}/${f} h)
      string(APPEND state "${f} ${h}\n")
    endif()
  endforeach()
  set(${out} "${state}" PARENT_SCOPE)
endfunction()

snapshot(before)
set(command ${TESSERA} ${ARGS})
if(ENVS)
  set(command ${CMAKE_COMMAND} -E env ${ENVS} ${TESSERA} ${ARGS})
endif()
if(STDOUT)
  execute_process(COMMAND ${command} WORKING_DIRECTORY ${WORKDIR} OUTPUT_FILE ${STDOUT} ERROR_VARIABLE err
                  RESULT_VARIABLE rc TIMEOUT 60)
  set(out "")
else()
  execute_process(COMMAND ${command} WORKING_DIRECTORY ${WORKDIR} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc TIMEOUT 60)
endif()
snapshot(after)
if(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "expected exit code ${RC}, got ${rc}\nstderr: ${err}\nstdout: ${out}")
endif()
if(RC EQUAL 2 OR RC EQUAL 3)
  string(REGEX REPLACE "\n$" "" line "${err}")
  if(line MATCHES "\n" AND NOT MULTILINE)
    message(FATAL_ERROR "expected one line on stderr, got:\n${err}")
  endif()
  if(NOT line MATCHES "${REGEX}")
    message(FATAL_ERROR "stderr does not match\n  ${REGEX}\ngot\n  ${line}")
  endif()
endif()
if(RC EQUAL 0 AND REGEX AND NOT out MATCHES "${REGEX}")
  message(FATAL_ERROR "stdout does not match\n  ${REGEX}\ngot\n  ${out}")
endif()
if(RC EQUAL 2 AND NOT out STREQUAL "")
  message(FATAL_ERROR "expected nothing on stdout, got:\n${out}")
endif()
if(NOT RC EQUAL 0 AND NOT before STREQUAL after)
  message(FATAL_ERROR "the failed command changed its directory:\nbefore:\n${before}\nafter:\n${after}")
endif()
