# Shared by the CLI test scripts: include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake).

# tessera_ok(OUT ARGS...): runs `${TESSERA} ARGS...` and fails the test,
# naming the command and its stderr, unless it exits 0; OUT = its stdout.
function(tessera_ok out)
  execute_process(COMMAND ${TESSERA} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tessera ${ARGN} failed (${rc}): ${e}")
  endif()
  set(${out} "${o}" PARENT_SCOPE)
endfunction()

# json_get(OUT JSON PATH...): string(JSON GET), failing the test with the
# path and the document when the path is not there.
function(json_get out json)
  string(JSON value ERROR_VARIABLE error GET "${json}" ${ARGN})
  if(error)
    message(FATAL_ERROR "JSON ${ARGN}: ${error}\n${json}")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# json_one_warning(JSON REGEX WHAT): the JSON report's "warnings" holds exactly
# one warning and it matches REGEX; else the test fails, naming WHAT.
function(json_one_warning json regex what)
  string(JSON n ERROR_VARIABLE error LENGTH "${json}" warnings)
  if(NOT error)
    string(JSON w GET "${json}" warnings 0)
  endif()
  if(error OR NOT n EQUAL 1 OR NOT w MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected one warning matching '${regex}' in the JSON, got ${n}: ${w}\n${json}")
  endif()
endfunction()

# seconds_to_ns(OUT VALUE): a number of seconds as string(JSON GET) returns
# it ("0.21476149110000001", "9.5e-05") in whole nanoseconds (rounded down),
# for integer comparisons: CMake has no float math.
function(seconds_to_ns out value)
  if(NOT value MATCHES "^([0-9]+)(\\.([0-9]*))?([eE]([-+]?[0-9]+))?$")
    message(FATAL_ERROR "not a number of seconds: '${value}'")
  endif()
  set(int "${CMAKE_MATCH_1}")
  set(digits "${CMAKE_MATCH_1}${CMAKE_MATCH_3}")
  set(exponent 0)
  if(NOT "${CMAKE_MATCH_5}" STREQUAL "")
    set(exponent "${CMAKE_MATCH_5}")
  endif()
  # The decimal point of value x 1e9 sits after `point` digits.
  string(LENGTH "${int}" point)
  math(EXPR point "${point} + ${exponent} + 9")
  string(LENGTH "${digits}" n)
  if(point LESS_EQUAL 0)
    set(digits 0)
  elseif(point LESS n)
    string(SUBSTRING "${digits}" 0 ${point} digits)
  else()
    while(n LESS point)
      string(APPEND digits 0)
      math(EXPR n "${n} + 1")
    endwhile()
  endif()
  string(REGEX REPLACE "^0+([0-9])" "\\1" digits "${digits}")
  set(${out} ${digits} PARENT_SCOPE)
endfunction()

# The sweep of tessera's arguments after `name` (a sweep command line
# without --shard and --out) run as shards 0/2 and 1/2 into
# ${WORKDIR}/NAME0.csv and NAME1.csv; the test fails where one does.
function(run_two_shards name)
  foreach(i 0 1)
    execute_process(COMMAND ${TESSERA} ${ARGN} --shard ${i}/2 --out ${WORKDIR}/${name}${i}.csv
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "shard ${i}/2 failed (${rc}): ${err}")
    endif()
  endforeach()
endfunction()

# sweep-merge of the files after `regex` refused (exit 2) with an error
# matching `regex`; `what` names the case (its --out in ${WORKDIR}).
function(expect_merge_refused what regex)
  execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/bad.csv ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${regex}")
    message(FATAL_ERROR "${what}: ${rc} ${err}")
  endif()
endfunction()

# edit_file(WHAT IN FROM TO OUT): IN with FROM replaced by TO (a regex),
# written as OUT; the test's setup fails if nothing matched.
function(edit_file what in from to out)
  file(READ ${in} text)
  string(REGEX REPLACE "${from}" "${to}" edited "${text}")
  if(edited STREQUAL text)
    message(FATAL_ERROR "test setup (${what}): '${from}' not found in ${in}:\n${text}")
  endif()
  file(WRITE ${out} "${edited}")
endfunction()

# expect_matches(TEXT WHAT REGEX...): every REGEX matches TEXT, else a fatal
# error naming WHAT and the first REGEX that does not. Each REGEX is one
# argument, ';' and all (ARGV<n>; a foreach over the arguments would split
# a regex at its ';' and check the halves apart).
function(expect_matches text what)
  math(EXPR last "${ARGC} - 1")
  foreach(i RANGE 2 ${last})
    if(NOT text MATCHES "${ARGV${i}}")
      message(FATAL_ERROR "${what} lacks /${ARGV${i}}/:\n${text}")
    endif()
  endforeach()
endfunction()
