# docs/cli.md's "Communication costs" example is what `tessera run
# mixtral-ep.yaml --comm-breakdown` prints: each line of its Comm costs
# block, and the exposed communication above it.
# -DTESSERA, -DSCENARIO (mixtral-ep.yaml), -DDOCS (docs/cli.md).
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --comm-breakdown OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n(  exposed comm[^\n]*)\n(Comm costs[^\n]*)\n")
  message(FATAL_ERROR "run --comm-breakdown (${rc}): no Comm costs block:\n${out}${err}")
endif()
set(lines "${CMAKE_MATCH_1}" "${CMAKE_MATCH_2}")
string(REGEX MATCHALL "\n  [a-z-]+( [a-z-]+)* +[0-9.]+ ms faster[^\n]*" rows "${out}")
list(LENGTH rows n)
if(n LESS 4)
  message(FATAL_ERROR "expected four classes, got ${n}:\n${out}")
endif()
foreach(row ${rows})
  string(REGEX REPLACE "^\n" "" row "${row}")
  list(APPEND lines "${row}")
endforeach()
file(READ ${DOCS} docs)
foreach(line ${lines})
  string(FIND "${docs}" "${line}\n" at)
  if(at LESS 0)
    message(FATAL_ERROR "docs/cli.md lacks the line\n${line}\nof run --comm-breakdown")
  endif()
endforeach()
