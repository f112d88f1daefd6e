# sweep --skip-invalid: a grid where some points are no valid scenario (tp 3
# does not divide 8 or 16 GPUs, tp 2 not the model's 25 heads) runs the others, lists those it left out with
# the reason, keeps the grid's point numbers in the CSV and the JSON, and its
# shards merge into the CSV of the sweep run in one piece.
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
set(common sweep ${SCENARIO} --set cluster.nodes=1,2 --set parallelism.tp=1,3,2 --skip-invalid --jobs 1)
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/whole.csv
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sweep --skip-invalid failed (${rc}): ${err}")
endif()
expect_matches("${out}" "the table" "\n +0  cluster.nodes=1 parallelism.tp=1 +8 "
               "\n +3  cluster.nodes=2 parallelism.tp=1 +16 "
               "\nskipped 4 point\\(s\\) that are not valid scenarios \\(--skip-invalid\\):\n"
               "\n  point 1 \\(cluster.nodes=1 parallelism.tp=3\\): parallelism.tp: tp x pp \\(3 x 1 = 3\\) does not divide the 8 GPUs \\(dp, not given, would be the GPUs over tp x pp\\)\n"
               "\n  point 2 \\(cluster.nodes=1 parallelism.tp=2\\): parallelism.tp: tp \\(2\\) must divide the model's heads \\(25\\)\n"
               "\n  point 4 \\(cluster.nodes=2 parallelism.tp=3\\): parallelism.tp: tp x pp \\(3 x 1 = 3\\) does not divide the 16 GPUs \\(dp, not given, would be the GPUs over tp x pp\\)\n")
if(out MATCHES "\n +[1245]  cluster")
  message(FATAL_ERROR "a skipped point has a row:\n${out}")
endif()
file(STRINGS ${WORKDIR}/whole.csv rows)
list(LENGTH rows n)
list(GET rows 1 row0)
list(GET rows 2 row3)
if(NOT n EQUAL 3 OR NOT row0 MATCHES "^0,1,1,8," OR NOT row3 MATCHES "^3,2,1,16,")
  message(FATAL_ERROR "the CSV should hold points 0 and 3 under their grid numbers:\n${rows}")
endif()
# --json: the points that ran, and the skipped ones with their settings and error.
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/json.csv --json
                OUTPUT_VARIABLE json ERROR_VARIABLE err RESULT_VARIABLE rc)
string(JSON ran LENGTH "${json}" points)
string(JSON second GET "${json}" points 1 point)
string(JSON skipped LENGTH "${json}" skipped)
string(JSON skipped_point GET "${json}" skipped 2 point)
string(JSON skipped_tp GET "${json}" skipped 2 settings parallelism.tp)
string(JSON skipped_error GET "${json}" skipped 2 error)
if(NOT rc EQUAL 0 OR NOT ran EQUAL 2 OR NOT second EQUAL 3 OR NOT skipped EQUAL 4 OR NOT skipped_point EQUAL 4
   OR NOT skipped_tp EQUAL 3 OR NOT skipped_error MATCHES "^parallelism.tp: tp x pp .* the 16 GPUs [(]dp, not given, would be the GPUs over tp x pp[)]$")
  message(FATAL_ERROR "--json (${rc}): expected points 0 and 3 and the skipped points 1, 2, 4 and 5:\n${json}\n${err}")
endif()
# Two shards: each names the skipped points on its first line; merged, the
# CSV of the whole sweep.
foreach(i 0 1)
  execute_process(COMMAND ${TESSERA} ${common} --shard ${i}/2 --out ${WORKDIR}/part${i}.csv
                  OUTPUT_VARIABLE shard_out ERROR_VARIABLE err RESULT_VARIABLE rc)
  file(STRINGS ${WORKDIR}/part${i}.csv first LIMIT_COUNT 1)
  # On its output, only its own skipped points with their errors.
  if(i EQUAL 0)
    set(own "skipped 2 point\\(s\\) [^\n]*\n  point 2 [^\n]*\n  point 4 [^\n]*\nthe other shards skip point\\(s\\) 1, 5 ")
  else()
    set(own "skipped 2 point\\(s\\) [^\n]*\n  point 1 [^\n]*\n  point 5 [^\n]*\nthe other shards skip point\\(s\\) 2, 4 ")
  endif()
  if(NOT rc EQUAL 0 OR NOT shard_out MATCHES "shard ${i}/2: 1 point\\(s\\) written to [^\n]* \\(its share of the sweep's 2 valid points\\)"
     OR NOT shard_out MATCHES "${own}" OR NOT first MATCHES ", skipping 1 2 4 5$")
    message(FATAL_ERROR "shard ${i} (${rc}): ${err}${shard_out}\nfirst line: ${first}")
  endif()
endforeach()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/merged.csv ${WORKDIR}/part0.csv ${WORKDIR}/part1.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE merged_out)
file(READ ${WORKDIR}/whole.csv whole)
file(READ ${WORKDIR}/merged.csv merged)
# It prints the sweep's models line and table (the scaling column too), its caveats and
# the skipped points.
if(NOT rc EQUAL 0 OR NOT merged STREQUAL whole
   OR NOT merged_out MATCHES "^models: tile-mlp node model, flow network backend\nevery point: parallelism.tp=1\npoint  settings [^\n]*  scaling\n +0  cluster.nodes=1 +8 [^\n]* 100[.]0%\n +3  cluster.nodes=2 +16 [^\n]*%\nnote: scaling: tokens/s per GPU over that of point 0 \\(8 GPUs\\), the fewest GPUs that fit\nnote: Untested scale, points with cluster.nodes=2: [^\n]*\nskipped 4 point\\(s\\) that are not valid scenarios \\(--skip-invalid\\): 1, 2, 4, 5 \\(each shard said why\\)\nmerged 2 points from 2 shards")
  message(FATAL_ERROR "merge (${rc}): ${err}${merged_out}\nmerged:\n${merged}\nwhole:\n${whole}")
endif()
# --json: the merged points and the skipped ones in sweep --json's shape.
execute_process(COMMAND ${TESSERA} sweep-merge --json --out ${WORKDIR}/merged_json.csv ${WORKDIR}/part0.csv ${WORKDIR}/part1.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE merged_json)
string(JSON n_skipped ERROR_VARIABLE json_error LENGTH "${merged_json}" skipped)
string(JSON third ERROR_VARIABLE json_error2 GET "${merged_json}" skipped 2 point)
if(NOT rc EQUAL 0 OR json_error OR json_error2 OR NOT n_skipped EQUAL 4 OR NOT third EQUAL 4)
  message(FATAL_ERROR "sweep-merge --json skipped (${rc}): ${err} ${json_error}\n${merged_json}")
endif()
# A shard whose skipped points differ is not of this sweep; a shard that
# skipped one of its points holds all it should.
edit_file("other skipped points" ${WORKDIR}/part1.csv ", skipping 1 2 4 5" ", skipping 1 2 4" ${WORKDIR}/other1.csv)
expect_merge_refused("a shard with other skipped points was merged"
                     "other1.csv: its sweep skipped points 1, 2, 4, where [^\n]*part0.csv's skipped 1, 2, 4, 5"
                     ${WORKDIR}/part0.csv ${WORKDIR}/other1.csv)
# Resuming an unfinished CSV that holds a row of a point skipped now (an
# older binary ran it): that row is dropped, not merged into the sweep.
file(STRINGS ${WORKDIR}/part0.csv shard_first LIMIT_COUNT 1)
if(NOT shard_first MATCHES "^# tessera sweep ([0-9a-f]+) shard")
  message(FATAL_ERROR "no sweep id in ${shard_first}")
endif()
set(id ${CMAKE_MATCH_1})
file(STRINGS ${WORKDIR}/whole.csv whole_lines)
list(GET whole_lines 0 columns)
list(GET whole_lines 1 row0)
string(REGEX REPLACE "^0,1,1," "1,1,3," stale "${row0}")
file(WRITE ${WORKDIR}/resume.csv
     "# tessera sweep ${id} unfinished: 6 points (run the same command to resume)\n${columns}\n${row0}\n${stale}\n")
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/resume.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
file(READ ${WORKDIR}/resume.csv resumed)
if(NOT rc EQUAL 0 OR NOT resumed STREQUAL whole OR NOT err MATCHES "resuming [^\n]*: 1 of 2 points already done")
  message(FATAL_ERROR "resume (${rc}): ${err}\nresumed:\n${resumed}\nwhole:\n${whole}")
endif()
