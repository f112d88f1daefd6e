# tessera compare-schedules on a shipped scenario lists the zero-bubble
# schedules by default (all five rows), and zb-h1 and zb-h2 have a smaller
# bubble than 1f1b: with the split backward the first B reaches stage 0
# after (p - 1)(T_F + T_B) instead of (p - 1)(T_F + T_B + T_W), and W fills
# the cool-down (docs/parallelism.md, "Schedules"). ZB-H2 holds more
# activation memory than 1f1b on the first stage ((2p - 1)/p of it).
execute_process(COMMAND ${TESSERA} compare-schedules ${SCENARIO}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera compare-schedules failed (${rc}):\n${out}${err}")
endif()
message("${out}")
# Row: name, iteration "ms", bubble "ms" and "%" of the iteration, exposed "ms", compute "ms", host "ms",
# MFU "%", memory per stage. The four parts add up to the iteration (to the 1 us of each rounding).
set(number "[0-9]+\\.[0-9]+")
foreach(name gpipe 1f1b interleaved-1f1b zb-h1 zb-h2)
  if(NOT out MATCHES "\n${name}( \\(v=[0-9]+\\))? +(${number}) ms +(${number}) ms +${number}% +(${number}) ms +(${number}) ms +(${number}) ms +${number}% +(${number})")
    message(FATAL_ERROR "no row for ${name}")
  endif()
  string(REPLACE "-" "_" var "${name}")
  set(bubble_${var} "${CMAKE_MATCH_3}")
  set(stage0_${var} "${CMAKE_MATCH_7}")
  foreach(i 2 3 4 5 6)
    string(REPLACE "." "" us_${i} "${CMAKE_MATCH_${i}}")
  endforeach()
  math(EXPR gap "${us_2} - ${us_3} - ${us_4} - ${us_5} - ${us_6}")
  if(gap GREATER 2 OR gap LESS -2)
    message(FATAL_ERROR "${name}: bubble + exposed comm + compute + host is ${gap} us off the iteration")
  endif()
endforeach()
message("bubble: 1f1b ${bubble_1f1b} ms, zb-h1 ${bubble_zb_h1} ms, zb-h2 ${bubble_zb_h2} ms")
# Milliseconds with three decimals: compare as microseconds.
foreach(var 1f1b zb_h1 zb_h2)
  string(REPLACE "." "" tenths_${var} "${bubble_${var}}")
endforeach()
if(NOT tenths_zb_h1 LESS tenths_1f1b OR NOT tenths_zb_h2 LESS tenths_1f1b)
  message(FATAL_ERROR "zero-bubble schedules should have a smaller bubble than 1f1b (${bubble_1f1b} ms): "
                      "zb-h1 ${bubble_zb_h1} ms, zb-h2 ${bubble_zb_h2} ms")
endif()
string(REPLACE "." "" m1 "${stage0_1f1b}")
string(REPLACE "." "" m2 "${stage0_zb_h2}")
if(NOT m2 GREATER m1)
  message(FATAL_ERROR "zb-h2 should hold more memory on stage 0 than 1f1b (${stage0_zb_h2} vs ${stage0_1f1b} GiB)")
endif()
