# `tessera validate kernels --data FILE --device GPU`: the node model on our
# own measurements (tests/data/h100, tests/data/h200: cuBLAS under PyTorch,
# each kernel alone after an L2 flush, or warm from a CUDA graph in
# gemm_warm.csv; the tensor-core model is fit on XLA's H100 table, never on
# these). Checks the table's shape and guards the
# figures: LIMITS is a list of FILE:GROUP:LIMIT, each limit the MAPE measured
# on 2026-11-26 rounded up slightly, so a regression fails (the measured
# figures are in tests/CMakeLists.txt beside each test).
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
function(check_group out group limit)
  string(REGEX MATCH "\n${group} +[0-9]+ +([0-9.]+)%" m "${out}")
  if(NOT m)
    message(FATAL_ERROR "no row '${group}' in the output")
  endif()
  if(CMAKE_MATCH_1 GREATER ${limit})
    message(FATAL_ERROR "${group}: ${CMAKE_MATCH_1}% MAPE, above the limit ${limit}%")
  endif()
  message("${group}: ${CMAKE_MATCH_1}% (limit ${limit}%)")
endfunction()
foreach(spec IN LISTS LIMITS)
  string(REPLACE ":" ";" parts "${spec}")
  list(GET parts 0 file)
  list(GET parts 1 group)
  list(GET parts 2 limit)
  set(noise_args "")
  if(EXISTS ${DATA}/${file}_repeat.csv)
    set(noise_args --noise ${DATA}/${file}_repeat.csv)
  endif()
  tessera_ok(out validate kernels --data ${DATA}/${file}.csv --device ${GPU} ${noise_args})
  message("${out}")
  if(NOT out MATCHES "group +rows +tile-mlp MAPE +signed median +P90 +roofline MAPE +noise MAPE")
    message(FATAL_ERROR "no table header")
  endif()
  if(noise_args AND NOT out MATCHES "\nall +[0-9]+ +[0-9.]+% +[-+][0-9.]+% +[0-9.]+% +[0-9.]+% +[0-9.]+%\n")
    message(FATAL_ERROR "the 'all' row has no noise floor although a repeat was given")
  endif()
  check_group("${out}" "${group}" ${limit})
endforeach()
