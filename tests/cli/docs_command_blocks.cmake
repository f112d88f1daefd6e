# Every fenced block of a doc that opens with a one-line `tessera validate
# steps ...`, `tessera validate kernels ...`, `tessera kernels ...` or
# `tessera collectives ...` command (written with or without a `$ ` prompt)
# and shows its output is what that command prints today: each line of the
# block below the command, other than a `...` elision, is a line of the
# command's output. The tables are quoted figures
# (docs/node_model.md's H200 and H100 steps); without this check they went
# stale when a kernel rule changed and the golden outputs were refreshed.
# -DTESSERA (the binary), -DDOCS (the doc), -DROOT (the repository root: the
# commands name tests/data/... relative to it), -DMIN_BLOCKS (how many such
# blocks the doc is expected to hold, so that a reformatted doc cannot make
# this test check nothing).
file(READ ${DOCS} docs)
set(rest "${docs}")
set(checked 0)
set(more 1)
while(more)
  string(FIND "${rest}" "```\ntessera " at)
  string(FIND "${rest}" "```\n$ tessera " prompted)
  if(at LESS 0 OR (prompted GREATER_EQUAL 0 AND prompted LESS at))
    set(at ${prompted})
  endif()
  if(at LESS 0)
    break()
  endif()
  math(EXPR start "${at} + 4")
  string(SUBSTRING "${rest}" ${start} -1 rest)
  string(FIND "${rest}" "\n```" end)
  if(end LESS 0)
    message(FATAL_ERROR "${DOCS}: a fenced block opened by a tessera command is not closed")
  endif()
  string(SUBSTRING "${rest}" 0 ${end} block)
  math(EXPR after "${end} + 4")
  string(SUBSTRING "${rest}" ${after} -1 rest)
  string(FIND "${block}" "\n" eol)
  if(eol LESS 0)
    continue()  # a command alone, no output shown
  endif()
  string(SUBSTRING "${block}" 0 ${eol} command)
  string(REGEX REPLACE "^\\$ " "" command "${command}")
  math(EXPR body_start "${eol} + 1")
  string(SUBSTRING "${block}" ${body_start} -1 body)
  if(command MATCHES "\\\\$")
    continue()  # a command continued on the next line: its arguments are not one line
  endif()
  if(NOT command MATCHES "^tessera (validate (steps|kernels)|kernels|collectives) ")
    continue()
  endif()
  string(REGEX REPLACE "^tessera " "" arguments "${command}")
  separate_arguments(arguments UNIX_COMMAND "${arguments}")
  execute_process(COMMAND ${TESSERA} ${arguments} WORKING_DIRECTORY ${ROOT} OUTPUT_VARIABLE out
                  ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${command}: exit ${rc}\n${out}${err}")
  endif()
  set(out "\n${out}")
  set(lines "${body}\n")
  while(NOT lines STREQUAL "")
    string(FIND "${lines}" "\n" eol)
    string(SUBSTRING "${lines}" 0 ${eol} line)
    math(EXPR next "${eol} + 1")
    string(SUBSTRING "${lines}" ${next} -1 lines)
    if(line STREQUAL "" OR line STREQUAL "...")
      continue()
    endif()
    string(FIND "${out}" "\n${line}\n" found)
    if(found LESS 0)
      message(FATAL_ERROR "${DOCS}: the block of\n  ${command}\nshows the line\n${line}\n"
                          "which the command no longer prints; it prints:${out}")
    endif()
  endwhile()
  math(EXPR checked "${checked} + 1")
endwhile()
if(checked LESS MIN_BLOCKS)
  message(FATAL_ERROR "${DOCS}: ${checked} blocks of a tessera command with its output, expected ${MIN_BLOCKS}")
endif()
message(STATUS "${checked} blocks checked")
