# docs/parallelism.md's table of the 4-GPU NeuSight runs quotes what
# `tessera validate distributed` prints for each: predicted, measured and
# the error. The validate.distributed test guards the errors from getting
# worse; this one keeps the doc's copy true when the model moves them
# (helper 122: four PP rows were 0.1-0.2 ms behind).
# -DTESSERA (the binary), -DDOC (docs/parallelism.md), -DROOT, -DDATA.
execute_process(COMMAND ${TESSERA} validate distributed --data ${DATA} WORKING_DIRECTORY ${ROOT}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "validate distributed: exit ${rc}\n${out}${err}")
endif()
file(READ ${DOC} doc)
string(REGEX MATCHALL "NVIDIA_[^/\n]+/[a-z0-9_]+-train-[0-9]+-[0-9]+-[a-z0-9_]+ +[0-9.]+ ms +[0-9.]+ ms +[-+][0-9.]+%"
       rows "${out}")
list(LENGTH rows n)
if(n LESS 11)
  message(FATAL_ERROR "expected 11 runs in validate distributed's output, found ${n}:\n${out}")
endif()
foreach(row ${rows})
  string(REGEX MATCH "^NVIDIA_([AH]100)[^/]*/([a-z0-9_]+)-train-[0-9]+-([0-9]+)-([a-z]+)[0-9_]* +([0-9.]+) ms +([0-9.]+) ms +[-+]([0-9.]+)%"
         parts "${row}")
  set(model ${CMAKE_MATCH_2})
  string(REPLACE "gpt2_large" "GPT2-L" model "${model}")
  string(REPLACE "gpt3_xl" "GPT3-XL" model "${model}")
  string(TOUPPER "${CMAKE_MATCH_4}" kind)
  set(line "| ${CMAKE_MATCH_1} ${model} b${CMAKE_MATCH_3} ${kind} | ${CMAKE_MATCH_5} ms | ${CMAKE_MATCH_6} ms | ${CMAKE_MATCH_7} % |")
  string(FIND "${doc}" "${line}" at)
  if(at LESS 0)
    message(FATAL_ERROR "docs/parallelism.md does not have the row '${line}', what validate distributed prints now")
  endif()
endforeach()
