# docs/parallelism.md ("Zero-bubble schedules") quotes what compare-schedules
# gives on scenarios/schedules.yaml: the bubbles, iterations and exposed
# communication of 1f1b, zb-h1 and zb-h2. Each is checked here against the
# command, rounded as the docs round it (one decimal), so a change that
# moves them fails until the docs say the new figures.
# -DTESSERA, -DSCENARIO, -DDOCS.
execute_process(COMMAND ${TESSERA} compare-schedules ${SCENARIO} --schedules 1f1b,zb-h1,zb-h2
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compare-schedules failed (${rc}): ${err}")
endif()
# "607.400" -> "607.4" (half up)
function(one_decimal out value)
  if(NOT value MATCHES "^([0-9]+)\\.([0-9][0-9][0-9])$")
    message(FATAL_ERROR "not a number with three decimals: '${value}'")
  endif()
  math(EXPR tenths "(${CMAKE_MATCH_1}${CMAKE_MATCH_2} + 50) / 100")
  math(EXPR whole "${tenths} / 10")
  math(EXPR frac "${tenths} % 10")
  set(${out} "${whole}.${frac}" PARENT_SCOPE)
endfunction()
foreach(schedule 1f1b zb-h1 zb-h2)
  if(NOT out MATCHES "\n${schedule} +([0-9.]+) ms +[0-9.]+ ms +([0-9.]+)% +([0-9.]+) ms")
    message(FATAL_ERROR "no ${schedule} row in:\n${out}")
  endif()
  one_decimal(it "${CMAKE_MATCH_1}")
  set(bubble_${schedule} "${CMAKE_MATCH_2}")
  one_decimal(comm "${CMAKE_MATCH_3}")
  set(it_${schedule} "${it}")
  set(comm_${schedule} "${comm}")
endforeach()
file(READ ${DOCS} docs)
string(REGEX REPLACE "[ \n]+" " " docs "${docs}")
set(expected
    "bubbles of ${bubble_1f1b} % (1f1b), ${bubble_zb-h1} % (zb-h1) and ${bubble_zb-h2} % (zb-h2) and iterations of ${it_1f1b}, ${it_zb-h1} and ${it_zb-h2} ms"
    "exposed communication grows from ${comm_1f1b} to ${comm_zb-h1} and ${comm_zb-h2} ms")
foreach(phrase IN LISTS expected)
  string(FIND "${docs}" "${phrase}" at)
  if(at LESS 0)
    message(FATAL_ERROR "docs/parallelism.md should say '${phrase}' (compare-schedules gives it):\n${out}")
  endif()
endforeach()
message("docs/parallelism.md quotes compare-schedules: ${expected}")
