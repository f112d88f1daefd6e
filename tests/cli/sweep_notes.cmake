# The lines under a sweep's table say what holds, for the points they name,
# and sweep-merge of its shards says the same (helper 157, a node sweep of
# GPT-3 over tp=4,8 and recompute=none,selective):
# - the scaling column compares each series with its own baseline: a note
#   names each series' baseline point (100% at 1024 GPUs beside 82% read as
#   a misprint), and --json gives each point its `scaling_baseline`;
# - the plan's known bias said of every point names every width
#   ("4- to 8-way", as the chart; it said "8-way" of tp=4 points too);
# - the warnings about the points' settings reach the merged table
#   (`# sweep warning:` lines in each shard; the merge dropped them).
# -DTESSERA, -DSCENARIO (gpt3-175b.yaml), -DWORKDIR.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
set(common sweep ${SCENARIO} --set cluster.nodes=16,32,128 --set parallelism.tp=4,8
           --set parallelism.recompute=none,selective --jobs 2)
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/whole.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sweep failed (${rc}): ${err}")
endif()
# tp=4 with no recompute fits first at 128 nodes (point 8); the others at 16.
set(scaling_note "\nnote: scaling: tokens/s per GPU over its series' baseline, the point of fewest GPUs that fits: point 8 \\(1024 GPUs\\) for parallelism.tp=4, parallelism.recompute=none; point 1 \\(128 GPUs\\) for parallelism.tp=4, parallelism.recompute=selective; point 2 \\(128 GPUs\\) for parallelism.tp=8, parallelism.recompute=none; point 3 \\(128 GPUs\\) for parallelism.tp=8, parallelism.recompute=selective\n")
set(warning "\nwarning for points 2, 3: parallelism.zero_stage 1 has no effect with dp = 1")
expect_matches("${out}" "sweep output"
    "\n    8  cluster.nodes=128 parallelism.tp=4 parallelism.recompute=none [^\n]* 100.0%\n"
    "${scaling_note}"
    "${warning}"
    "\nnote \\(every point\\): known bias: 4- to 8-way tensor parallelism: on measured")
if(out MATCHES "known bias: 8-way")
  message(FATAL_ERROR "sweep says '8-way' of every point, half of them tp=4:\n${out}")
endif()
# --json: each point's baseline, null where its series fits nowhere.
execute_process(COMMAND ${TESSERA} ${common} --json --out ${WORKDIR}/whole.csv
                OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
foreach(expected
    "\"point\": 0, [^{}]*\\{[^{}]*\\}[^{}]*\"scaling_efficiency\": null, \"scaling_baseline\": 8[,}]"
    "\"point\": 5, [^{}]*\\{[^{}]*\\}[^{}]*\"scaling_efficiency\": [0-9.]+, \"scaling_baseline\": 1[,}]")
  if(NOT rc EQUAL 0 OR NOT json MATCHES "${expected}")
    message(FATAL_ERROR "sweep --json lacks /${expected}/ (${rc}):\n${json}${err}")
  endif()
endforeach()
# Two shards and their merge: the same lines.
run_two_shards(part ${common})
file(READ ${WORKDIR}/part0.csv part0)
if(NOT part0 MATCHES "\n# sweep warning: warning for points 2, 3: parallelism.zero_stage 1 has no effect")
  message(FATAL_ERROR "shard 0 carries no warning line:\n${part0}")
endif()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/merged.csv ${WORKDIR}/part0.csv ${WORKDIR}/part1.csv
                OUTPUT_VARIABLE merged ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sweep-merge failed (${rc}): ${err}")
endif()
expect_matches("${merged}" "sweep-merge output" "${scaling_note}" "${warning}"
               "\nnote: Known bias, every point: 4- to 8-way tensor parallelism")
# Shards whose warnings differ are refused, as those whose chart notes do.
string(REPLACE "# sweep warning: warning for points 2, 3" "# sweep warning: warning for points 2" edited "${part0}")
file(WRITE ${WORKDIR}/edited0.csv "${edited}")
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/refused.csv ${WORKDIR}/part1.csv ${WORKDIR}/edited0.csv
                OUTPUT_VARIABLE o ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0 OR NOT err MATCHES "edited0.csv: its chart notes \\(its warnings\\) differ from [^\n]*part1.csv's")
  message(FATAL_ERROR "shards with other warnings were not refused (${rc}): ${err}${o}")
endif()
