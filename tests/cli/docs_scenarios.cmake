# docs/scenarios.md, "Shipped scenarios": every forecast the table quotes
# ("forecast: X s per ..., MFU Y%, Z of ... GiB on stage 0") is what the
# scenario's golden text output (tests/cli/golden/NAME.text, which ctest
# keeps equal to `tessera run`) prints, rounded as the table rounds it. So
# a change that moves a forecast fails here until the docs say the new one.
file(STRINGS ${DOCS} lines REGEX "^\\| `scenarios/[a-z0-9-]+\\.yaml` \\|.*forecast: ")
list(LENGTH lines n)
if(n LESS 3)
  message(FATAL_ERROR "expected at least 3 forecasts in the shipped-scenarios table, found ${n}")
endif()
foreach(line IN LISTS lines)
  string(REGEX MATCH "^\\| `scenarios/([a-z0-9-]+)\\.yaml`" _ "${line}")
  set(name "${CMAKE_MATCH_1}")
  string(REGEX MATCH "forecast: ([0-9]+\\.[0-9][0-9]) s per[^|]*MFU ([0-9]+\\.[0-9])%[^|]*[ (]([0-9]+\\.[0-9]) of [0-9]+ GiB on stage 0" _
               "${line}")
  if(NOT CMAKE_MATCH_0)
    message(FATAL_ERROR "${name}: the forecast is not 'forecast: X.XX s per ..., MFU Y.Y%, ..., Z.Z of N GiB on stage 0'")
  endif()
  set(doc_s "${CMAKE_MATCH_1}")
  set(doc_mfu "${CMAKE_MATCH_2}")
  set(doc_mem "${CMAKE_MATCH_3}")
  file(READ ${GOLDEN_DIR}/${name}.text golden)
  if(NOT golden MATCHES "\nIteration +([0-9]+)\\.([0-9][0-9][0-9]) ms\n")
    message(FATAL_ERROR "${name}: no Iteration line in the golden output")
  endif()
  # milliseconds with three decimals -> seconds with two, rounded half up
  math(EXPR centi "(${CMAKE_MATCH_1}${CMAKE_MATCH_2} + 5000) / 10000")
  math(EXPR whole "${centi} / 100")
  math(EXPR frac "${centi} % 100")
  if(frac LESS 10)
    set(frac "0${frac}")
  endif()
  set(run_s "${whole}.${frac}")
  string(REGEX MATCH "\\(MFU ([0-9]+\\.[0-9])%\\)" _ "${golden}")
  set(run_mfu "${CMAKE_MATCH_1}")
  string(REGEX MATCH "\nMemory stage 0 +([0-9]+\\.[0-9]) GiB of" _ "${golden}")
  set(run_mem "${CMAKE_MATCH_1}")
  message("${name}: docs ${doc_s} s, MFU ${doc_mfu}%, ${doc_mem} GiB; run ${run_s} s, MFU ${run_mfu}%, ${run_mem} GiB")
  if(NOT doc_s STREQUAL run_s OR NOT doc_mfu STREQUAL run_mfu OR NOT doc_mem STREQUAL run_mem)
    message(FATAL_ERROR "${name}: docs/scenarios.md quotes ${doc_s} s, MFU ${doc_mfu}%, ${doc_mem} GiB on stage 0; "
                        "tessera run prints ${run_s} s, MFU ${run_mfu}%, ${run_mem} GiB (golden/${name}.text)")
  endif()
endforeach()
