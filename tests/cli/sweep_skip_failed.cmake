# --skip-failed: a sweep whose points fail while simulating (a 2 bit/s NIC)
# finishes without them, naming each and why (helper 94, helper 96: a point
# that failed every time kept its sweep unfinished for good). Whole: exit
# 0, the other point's row alone, the failed one named after the table and
# in --json's "failed". Sharded: each shard lists its own failed points
# after its rows, sweep-merge takes them as accounted for and gives the
# whole sweep's CSV byte for byte; a shard run again retries them.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
set(common sweep ${SCENARIO} --set cluster.nic_bandwidth=2bps,400Gbps --jobs 1 --skip-failed)
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/whole.csv RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\nleft out 1 point\\(s\\) whose simulation failed \\(--skip-failed\\):\n  point 0 \\(cluster.nic_bandwidth=2bps\\): [^\n]*2bps cannot carry this iteration"
   OR NOT err MATCHES "sweep: 1 point\\(s\\) failed and are left out \\(--skip-failed\\)")
  message(FATAL_ERROR "whole sweep (${rc}):\n${out}\n${err}")
endif()
file(READ ${WORKDIR}/whole.csv whole)
if(NOT whole MATCHES "^point,[^\n]*\n1,400Gbps,[^\n]*\n$")
  message(FATAL_ERROR "the whole sweep's CSV should hold point 1 alone:\n${whole}")
endif()
# The chart says which point it lacks and with which models it was drawn
# (helper 121: a failed point vanished from the chart without a word).
set(left_out ">Left out: point 0, whose simulation failed [(]--skip-failed[)]</text>")
set(models ">Models: tile-mlp node model, flow network backend</text>")
file(READ ${WORKDIR}/whole.svg whole_svg)
if(NOT whole_svg MATCHES "${left_out}" OR NOT whole_svg MATCHES "${models}")
  message(FATAL_ERROR "the whole sweep's chart should name point 0 as left out, and its models:\n${whole_svg}")
endif()
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/whole.csv --json RESULT_VARIABLE rc OUTPUT_VARIABLE json
                ERROR_QUIET)
string(JSON failed_point ERROR_VARIABLE json_error GET "${json}" failed 0 point)
string(JSON points ERROR_VARIABLE json_error2 LENGTH "${json}" points)
if(NOT rc EQUAL 0 OR json_error OR json_error2 OR NOT failed_point EQUAL 0 OR NOT points EQUAL 1)
  message(FATAL_ERROR "--json should list point 0 as failed and point 1 alone (${rc}): ${json_error}\n${json}")
endif()
run_two_shards(part ${common})
file(READ ${WORKDIR}/part0.csv part0)
# ... and its GPUs and settings, for sweep-merge's scaling note.
if(NOT part0 MATCHES "\n# failed point 0: [^\n]*2bps cannot carry this iteration[^\n]*\n# failed settings 0: 16,2bps\n$")
  message(FATAL_ERROR "shard 0 should end with its failed point and its settings:\n${part0}")
endif()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/merged.csv ${WORKDIR}/part0.csv ${WORKDIR}/part1.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORKDIR}/whole.csv ${WORKDIR}/merged.csv RESULT_VARIABLE same)
if(NOT rc EQUAL 0 OR NOT same EQUAL 0 OR NOT out MATCHES "left out 1 point\\(s\\) whose simulation failed \\(--skip-failed\\):\n  point 0: ")
  message(FATAL_ERROR "merge (${rc}, same ${same}):\n${out}\n${err}")
endif()
# The merged chart as the whole sweep's, and the models line above the table.
file(READ ${WORKDIR}/merged.svg merged_svg)
if(NOT merged_svg MATCHES "${left_out}" OR NOT merged_svg MATCHES "${models}"
   OR NOT out MATCHES "^models: tile-mlp node model, flow network backend\npoint ")
  message(FATAL_ERROR "the merged chart and table should say what the whole sweep's do:\n${out}\n${merged_svg}")
endif()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/merged.csv ${WORKDIR}/part0.csv ${WORKDIR}/part1.csv
                        --json RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_QUIET)
string(JSON merged_error ERROR_VARIABLE json_error GET "${json}" failed 0 error)
if(NOT rc EQUAL 0 OR json_error OR NOT merged_error MATCHES "^cluster.nic_bandwidth: 2bps cannot carry this iteration")
  message(FATAL_ERROR "merge --json should list point 0's error, without the file's path (${rc}): ${json_error}\n${json}")
endif()
# Hand-edited shards: a failed line not as the shard wrote it (a leading
# zero, no error), and a point both failed and with a row, are refused.
foreach(bad "# failed point 00: x" "# failed point 0: " "# failed point 1: x")
  string(REPLACE "\n# failed point 0: " "\n${bad}\n# failed point 0: " edited "${part0}")
  if(bad MATCHES "point 1")
    file(READ ${WORKDIR}/part1.csv edited)
    string(APPEND edited "${bad}\n")
    set(expected "point 1 is given twice")
    set(other ${WORKDIR}/part0.csv)
    set(edited_file ${WORKDIR}/bad1.csv)
  else()
    set(expected "malformed line")
    set(other ${WORKDIR}/part1.csv)
    set(edited_file ${WORKDIR}/bad0.csv)
  endif()
  file(WRITE ${edited_file} "${edited}")
  expect_merge_refused("'${bad}' should be refused with '${expected}'" "${expected}" ${edited_file} ${other})
endforeach()
# A failed point's settings that are not its point's are refused as a row's
# are (helper 152), naming the line and column.
string(REPLACE "\n# failed settings 0: 16,2bps\n" "\n# failed settings 0: 16,3bps\n" edited "${part0}")
file(WRITE ${WORKDIR}/bad0.csv "${edited}")
expect_merge_refused("a failed point's edited settings should be refused"
                     "bad0\\.csv:[0-9]+: column 'cluster\\.nic_bandwidth': '3bps', where point 0 of the sweep has cluster\\.nic_bandwidth=2bps "
                     ${WORKDIR}/bad0.csv ${WORKDIR}/part1.csv)
execute_process(COMMAND ${TESSERA} ${common} --shard 0/2 --out ${WORKDIR}/part0.csv RESULT_VARIABLE rc OUTPUT_QUIET
                ERROR_VARIABLE err)
file(READ ${WORKDIR}/part0.csv again)
if(NOT rc EQUAL 0 OR NOT err MATCHES "sweep: 1 point\\(s\\) failed and are left out" OR NOT again STREQUAL part0)
  message(FATAL_ERROR "a finished shard run again should retry its failed point (${rc}):\n${err}\n${again}")
endif()
# Every point failed: no result, the error (exit 2: the input is at fault).
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nic_bandwidth=2bps,1bps --jobs 1 --skip-failed
                        --out ${WORKDIR}/none.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT out STREQUAL "" OR NOT err MATCHES "tessera: error: sweep point 0 [^\n]*; 2 points failed: 0, 1 \\(the same command runs the failed points again\\)\n$")
  message(FATAL_ERROR "a sweep whose every point failed should be an error (${rc}):\n${out}\n${err}")
endif()
# A node sweep's scaling column is relative to each series' fewest GPUs that
# ran: a failed point with fewer GPUs (the 1-node point, its NVLink at
# 1 bit/s) would have been its baseline, and that is said; one with more (the
# 2-node point of a series whose 1-node point ran) is not (helper 136: said
# whenever a point failed).
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nodes=1,2,4
                        --set cluster.nvlink_bandwidth=1bps,450GB/s,450GB/s --zip --set parallelism.dp=auto
                        --jobs 1 --skip-failed --out ${WORKDIR}/baseline.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\nnote: scaling is relative to the fewest GPUs among the points that ran; a failed point with fewer GPUs would have been its baseline\n")
  message(FATAL_ERROR "a failed point below the baseline should be said (${rc}):\n${out}")
endif()
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nodes=1,2 --set cluster.nic_bandwidth=400Gbps,1bps
                        --set parallelism.dp=auto --jobs 1 --skip-failed --out ${WORKDIR}/above.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n  point 3 [(]" OR out MATCHES "fewest GPUs among")
  message(FATAL_ERROR "a failed point above every baseline is no baseline (${rc}):\n${out}")
endif()
# ... each failed point against its own series' baseline: the failed 8-GPU
# point of pp 8 at 1 bit/s is in a series none of whose points ran, not
# below the 16-GPU baseline of another series (helper 138).
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nodes=1,2,4
                        --set cluster.nic_bandwidth=400Gbps,1bps --set parallelism.pp=1,8 --set cluster.gpus_per_node=4
                        --set parallelism.dp=auto --jobs 1 --skip-invalid --skip-failed --out ${WORKDIR}/series.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n  point 7 [(]" OR out MATCHES "fewest GPUs among")
  message(FATAL_ERROR "a failed point is compared with its own series' baseline only (${rc}):\n${out}")
endif()
# sweep-merge says the scaling note as the unsharded sweep does, from the
# shards' failed settings lines (helper 138: said whenever a point failed):
# not for the 16-GPU failed point above 8-GPU baselines, but for a 1-node
# point below its zipped series' 16-GPU baseline.
foreach(shard 0 1)
  execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nodes=1,2 --set cluster.nic_bandwidth=400Gbps,1bps
                          --set parallelism.dp=auto --jobs 1 --skip-failed --shard ${shard}/2
                          --out ${WORKDIR}/above${shard}.csv
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.nodes=1,2,4
                          --set cluster.nvlink_bandwidth=1bps,450GB/s,450GB/s --zip --set parallelism.dp=auto
                          --jobs 1 --skip-failed --shard ${shard}/2 --out ${WORKDIR}/below${shard}.csv
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
endforeach()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/above.csv ${WORKDIR}/above0.csv ${WORKDIR}/above1.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n  point 3: " OR out MATCHES "fewest GPUs among")
  message(FATAL_ERROR "sweep-merge: a failed point above every baseline is no baseline (${rc}):\n${out}")
endif()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/below.csv ${WORKDIR}/below0.csv ${WORKDIR}/below1.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\nnote: scaling is relative to the fewest GPUs among the points that ran")
  message(FATAL_ERROR "sweep-merge: a failed point below its baseline should be said (${rc}):\n${out}")
endif()
# A settings line that does not hold the GPUs and one cell per setting is
# refused, naming the line.
edit_file("a malformed settings line" ${WORKDIR}/above1.csv "# failed settings 3: 16," "# failed settings 3: x,"
          ${WORKDIR}/bad1.csv)
expect_merge_refused("a malformed settings line should be refused"
                     "bad1[.]csv:[0-9]+: malformed line [(]expected '# failed settings N: GPUS,SETTING,...' after point N's '# failed point N: error'[)]"
                     ${WORKDIR}/above0.csv ${WORKDIR}/bad1.csv)
