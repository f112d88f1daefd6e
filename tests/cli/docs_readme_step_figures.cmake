# README's accuracy table quotes, for each of our measured step files, the
# mean and max error that `tessera validate steps` prints on its last line
# ("mean error A, max B, ..."): the README must say "A mean, B max" for each.
# The validate.h*_steps tests guard these figures from getting worse; this
# one keeps the README's copy of them true when they change either way.
# -DTESSERA (the binary), -DREADME (README.md), -DROOT (repository root).
set(commands
    "--data tests/data/h200/steps.csv"
    "--data tests/data/h200/steps.csv --set calibration.host_launch=32us"
    "--data tests/data/h200/tp_steps.csv --set calibration.host_launch=32us"
    "--data tests/data/h100/tp_steps.csv --gpu H100-SXM --set calibration.host_launch=32us"
    "--data tests/data/h200/recompute_steps.csv --set calibration.host_launch=32us"
    "--data tests/data/h200/sp_steps.csv --set calibration.host_launch=32us"
    "--data tests/data/h200/megatron_steps.csv --set calibration.host_launch=32us --set calibration.host_microbatch=0ms")
file(READ ${README} readme)
foreach(command ${commands})
  separate_arguments(arguments UNIX_COMMAND "${command}")
  execute_process(COMMAND ${TESSERA} validate steps ${arguments} WORKING_DIRECTORY ${ROOT}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "\nmean error ([0-9.]+%), max ([0-9.]+%), signed ")
    message(FATAL_ERROR "validate steps ${command}: exit ${rc}, no summary line\n${out}${err}")
  endif()
  set(figure "${CMAKE_MATCH_1} mean, ${CMAKE_MATCH_2} max")
  string(FIND "${readme}" "${figure}" at)
  if(at LESS 0)
    message(FATAL_ERROR "README.md does not quote '${figure}', what `tessera validate steps ${command}` prints now")
  endif()
endforeach()
