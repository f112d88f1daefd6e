# A sweep split into shards (as a Slurm job array or MPI ranks would run it,
# here through the variables those launchers set) and merged gives the same
# CSV as the sweep run in one piece.

include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
# Shard 0 (part0.csv) with `from` replaced by `to` (a regex; setup fails if
# nothing matched), written as `name` and merged with shard 1: refused.
function(expect_edited_part0_refused what name from to regex)
  edit_file("${what}" ${WORKDIR}/part0.csv "${from}" "${to}" ${WORKDIR}/${name})
  expect_merge_refused("${what}" "${regex}" ${WORKDIR}/${name} ${WORKDIR}/part1.csv)
endfunction()
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
set(common sweep ${SCENARIO} --set training.micro_batch=1,2,4 --set training.seq_len=512,1024 --jobs 1)
execute_process(COMMAND ${TESSERA} ${common} --out ${WORKDIR}/whole.csv RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "whole sweep failed: ${err}")
endif()
# Shard 0 as Slurm array task 0 of 2, shard 1 as MPI rank 1 of 2.
execute_process(COMMAND ${CMAKE_COMMAND} -E env SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2
                        ${TESSERA} ${common} --shard auto --out ${WORKDIR}/part0.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out0)
if(NOT rc EQUAL 0 OR NOT out0 MATCHES "shard 0/2: 3 point\\(s\\) written to [^\n]*part0.csv \\(its share of the sweep's 6 points\\)")
  message(FATAL_ERROR "shard 0 failed (${rc}): ${err}${out0}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2
                        ${TESSERA} ${common} --shard auto --out ${WORKDIR}/part1.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out1)
if(NOT rc EQUAL 0 OR NOT out1 MATCHES "shard 1/2: 3 point\\(s\\) written to [^\n]*part1.csv \\(its share of the sweep's 6 points\\); merge the shards with\n  tessera sweep-merge --out [a-z0-9-]+-sweep.csv SHARD.csv[.][.][.]\n")
  message(FATAL_ERROR "shard 1 failed (${rc}): ${err}${out1}")
endif()
# A Slurm array that does not count from 0 in steps of 1 (--array=1-2,
# --array=0-2:2, IDs above a million): the shard is the task ID's position
# in the array, so its second task writes shard 1/2, byte for byte part1.csv.
foreach(env IN ITEMS "SLURM_ARRAY_TASK_ID=2;SLURM_ARRAY_TASK_MIN=1;SLURM_ARRAY_TASK_STEP=1"
                     "SLURM_ARRAY_TASK_ID=2;SLURM_ARRAY_TASK_MIN=0;SLURM_ARRAY_TASK_STEP=2;SLURM_ARRAY_TASK_MAX=2"
                     "SLURM_ARRAY_TASK_ID=2000001;SLURM_ARRAY_TASK_MIN=2000000;SLURM_ARRAY_TASK_MAX=2000001")
  file(REMOVE ${WORKDIR}/slurm1.csv)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} SLURM_ARRAY_TASK_COUNT=2
                          ${TESSERA} ${common} --shard auto --out ${WORKDIR}/slurm1.csv
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORKDIR}/part1.csv ${WORKDIR}/slurm1.csv RESULT_VARIABLE same)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "shard 1/2: 3 point" OR NOT same EQUAL 0)
    message(FATAL_ERROR "Slurm array task (${env}) should run shard 1/2 as part1.csv (${rc}, same ${same}): ${err}${out}")
  endif()
endforeach()
# Without --out the shards' CSVs have default names, which the merge hint gives.
file(MAKE_DIRECTORY ${WORKDIR}/named)
execute_process(COMMAND ${TESSERA} ${common} --shard 1/2 WORKING_DIRECTORY ${WORKDIR}/named
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE named)
file(GLOB named_csv RELATIVE ${WORKDIR}/named ${WORKDIR}/named/*.csv)
set(hint_stem "")
if(named MATCHES "tessera sweep-merge --out ([a-z0-9-]+)-sweep.csv ([a-z0-9-]+)-sweep.shard[*]of2.csv\n")
  set(hint_stem "${CMAKE_MATCH_2}")
endif()
if(NOT rc EQUAL 0 OR hint_stem STREQUAL "" OR NOT named_csv STREQUAL "${hint_stem}-sweep.shard1of2.csv")
  message(FATAL_ERROR "shard 1 with default names (${rc}): ${err}${named}\nfiles: ${named_csv}")
endif()
# --json on a shard: one object with the shard and its points (the merge
# hint on stderr), as for a whole sweep.
execute_process(COMMAND ${TESSERA} ${common} --shard 1/2 --out ${WORKDIR}/part1.csv --json
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE json1)
string(JSON shard_count ERROR_VARIABLE json_error GET "${json1}" shard count)
string(JSON shard_points ERROR_VARIABLE json_error2 LENGTH "${json1}" points)
string(JSON second_point ERROR_VARIABLE json_error3 GET "${json1}" points 1 point)
if(NOT rc EQUAL 0 OR json_error OR json_error2 OR json_error3 OR NOT shard_count EQUAL 2 OR NOT shard_points EQUAL 3
   OR NOT second_point EQUAL 3 OR NOT err MATCHES "shard 1/2: merge the shards with tessera sweep-merge")
  message(FATAL_ERROR "shard 1 --json (${rc}): expected one object with shard 1/2's 3 points (1, 3, 5): ${json_error} ${json_error2}\n${json1}\n${err}")
endif()
# A shard of the same sweep split another way is named as such.
execute_process(COMMAND ${TESSERA} ${common} --shard 0/3 --out ${WORKDIR}/third0.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
expect_merge_refused("merging shards split two ways should say so" "third0.csv: shard 0/3 of the same sweep split 3 ways, where [^\n]*part1.csv is shard 1/2 \\(split 2 ways\\)" ${WORKDIR}/part1.csv ${WORKDIR}/third0.csv)
# Merging one shard alone must refuse (a shard missing).
expect_merge_refused("merging an incomplete set should fail with exit 2" "shard 0/2 of sweep [0-9a-f]+ is missing \\(give all 2 shard files\\)" ${WORKDIR}/part1.csv)
# A shard killed before its last point (its final row cut off) is refused,
# although the points it holds are contiguous with the other shard's.
expect_edited_part0_refused("merging an unfinished shard should fail with exit 2" cut0.csv "\n4,[^\n]*\n$" "\n"
                            "shard 0/2 holds 2 of its 3 points \\(point 4 is missing")
# A shard of another sweep (same keys and columns, other values) is refused.
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set training.micro_batch=1,2,8 --set training.seq_len=512,1024
                        --jobs 1 --shard 1/2 --out ${WORKDIR}/other1.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "other sweep's shard failed: ${err}")
endif()
expect_merge_refused("merging shards of two sweeps should fail with exit 2" "a shard of another sweep" ${WORKDIR}/part0.csv ${WORKDIR}/other1.csv)
# The same shard twice, and a whole sweep's CSV (no shard line), are refused.
expect_merge_refused("merging one shard twice should fail with exit 2" "shard 0/2 is also given as" ${WORKDIR}/part0.csv ${WORKDIR}/part0.csv)
expect_merge_refused("merging a whole sweep's CSV should fail with exit 2" "not a shard CSV" ${WORKDIR}/whole.csv)
if(EXISTS ${WORKDIR}/bad.csv)
  message(FATAL_ERROR "a refused merge left ${WORKDIR}/bad.csv")
endif()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/merged.csv ${WORKDIR}/part1.csv ${WORKDIR}/part0.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "merge failed: ${err}")
endif()
file(READ ${WORKDIR}/whole.csv a)
file(READ ${WORKDIR}/merged.csv b)
if(NOT a STREQUAL b)
  message(FATAL_ERROR "merged shards differ from the whole sweep:\n${a}\n---\n${b}")
endif()
if(NOT EXISTS ${WORKDIR}/merged.svg)
  message(FATAL_ERROR "sweep-merge wrote no SVG")
endif()
# ... the same chart as the whole sweep's, its title naming the scenario
# (helper 136: "tessera sweep-merge").
file(READ ${WORKDIR}/whole.svg whole_svg)
file(READ ${WORKDIR}/merged.svg merged_svg)
if(NOT whole_svg STREQUAL merged_svg)
  message(FATAL_ERROR "the merged chart differs from the whole sweep's:\n${whole_svg}\n---\n${merged_svg}")
endif()
# A shard copied with CRLF line ends and a last blank line merges the same
# (it was "not a shard CSV", and the blank line a malformed row).
file(READ ${WORKDIR}/part0.csv part0)
string(REPLACE "\n" "\r\n" part0_crlf "${part0}\n")
file(WRITE ${WORKDIR}/part0_crlf.csv "${part0_crlf}")
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/merged_crlf.csv ${WORKDIR}/part1.csv
                        ${WORKDIR}/part0_crlf.csv RESULT_VARIABLE rc ERROR_VARIABLE err)
file(READ ${WORKDIR}/merged_crlf.csv b)
if(NOT rc EQUAL 0 OR NOT a STREQUAL b)
  message(FATAL_ERROR "a CRLF shard should merge as its LF twin (${rc}): ${err}\n${b}")
endif()
# A metric cell that is not a number names its column (it was a bare
# "malformed row") and its line: the first row's, after the shard line, the
# chart title and notes and the column names (helper 139: the title line
# was not counted).
file(READ ${WORKDIR}/part0.csv p0)
string(FIND "${p0}" "\npoint," columns_at)
string(SUBSTRING "${p0}" 0 ${columns_at} above_columns)
string(REGEX MATCHALL "\n" above_newlines "${above_columns}")
list(LENGTH above_newlines first_row_line)
math(EXPR first_row_line "${first_row_line} + 3")
if(first_row_line LESS 4)
  message(FATAL_ERROR "test setup: shard 0 should have a chart title above its columns:\n${p0}")
endif()
expect_edited_part0_refused("a non-numeric metric should name its column and line" text0.csv
                            "\n([0-9]+,[^,\n]*,[^,\n]*,[^,\n]*,[^,\n]*,)[^,\n]*," "\n\\1abc,"
                            "text0.csv:${first_row_line}: column 'iteration_time_s': 'abc' is not a number\n$")
# (helper 179: an edited -1000 ms merged as the point's iteration)
expect_edited_part0_refused("a negative metric should be refused" negative0.csv
                            "\n([0-9]+,[^,\n]*,[^,\n]*,[^,\n]*,[^,\n]*,)[^,\n]*," "\n\\1-1.0,"
                            "negative0.csv:${first_row_line}: column 'iteration_time_s': '-1.0' is not a number of zero or more\n$")
# Each shard carries the sweep's grid ('# sweep axis: KEY=V1,V2,...', one
# line per swept key), and a row whose settings are not its point's is
# refused, naming the file, line and column and the point's value (helper
# 152: a hand-edited setting, or a row of another sweep, merged under the
# index it claimed), with no merged file written.
if(NOT p0 MATCHES "\n# sweep axis: training\\.micro_batch=1,2,4\n# sweep axis: training\\.seq_len=512,1024\n")
  message(FATAL_ERROR "shard 0 carries no '# sweep axis:' lines:\n${p0}")
endif()
math(EXPR second_row_line "${first_row_line} + 1")
expect_edited_part0_refused("an edited setting should name its file, line, column and the point's value" seq0.csv
                            "\n2,2,512," "\n2,2,1024,"
                            "^tessera: error: [^\n]*seq0\\.csv:${second_row_line}: column 'training\\.seq_len': '1024', where point 2 of the sweep has training\\.seq_len=512 [^\n]*\n$")
# A row of another sweep (micro-batches 1, 2, 8) in place of point 5's.
file(STRINGS ${WORKDIR}/other1.csv other_rows REGEX "^5,")
if(NOT other_rows MATCHES "^5,8,1024,")
  message(FATAL_ERROR "test setup: no point 5 (8, 1024) in other1.csv: ${other_rows}")
endif()
edit_file("a row of another sweep" ${WORKDIR}/part1.csv "\n5,[^\n]*" "\n${other_rows}" ${WORKDIR}/mixed1.csv)
expect_merge_refused("a row of another sweep should be refused"
                     "mixed1\\.csv:[0-9]+: column 'training\\.micro_batch': '8', where point 5 of the sweep has training\\.micro_batch=4 "
                     ${WORKDIR}/part0.csv ${WORKDIR}/mixed1.csv)
# Shards whose grids differ, and a shard without one (an older tessera's),
# are refused.
edit_file("other swept values" ${WORKDIR}/part0.csv "\n# sweep axis: training\\.micro_batch=1,2,4\n"
          "\n# sweep axis: training.micro_batch=1,2,8\n" ${WORKDIR}/axis0.csv)
expect_merge_refused("shards with other swept values should be refused"
                     "axis0\\.csv: its swept values \\('# sweep axis: ' lines\\) differ from [^\n]*part1\\.csv's"
                     ${WORKDIR}/part1.csv ${WORKDIR}/axis0.csv)
edit_file("a shard without its grid" ${WORKDIR}/part0.csv "\n# sweep axis: [^\n]*" "" ${WORKDIR}/noaxis0.csv)
expect_merge_refused("a shard without '# sweep axis:' lines should be refused as an older one"
                     "noaxis0\\.csv: no '# sweep axis: KEY=V1,V2,[.][.][.]' lines above its columns \\(a shard of an older version's sweep\\? run it again\\)"
                     ${WORKDIR}/part1.csv ${WORKDIR}/noaxis0.csv)
if(EXISTS ${WORKDIR}/bad.csv)
  message(FATAL_ERROR "a refused merge left ${WORKDIR}/bad.csv")
endif()
# sweep-merge --json: the merged points as sweep --json gives them from its
# rows (settings, metric columns), equal to the whole sweep's.
execute_process(COMMAND ${TESSERA} sweep-merge --json --out ${WORKDIR}/merged_json.csv ${WORKDIR}/part1.csv ${WORKDIR}/part0.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE merged_json)
execute_process(COMMAND ${TESSERA} ${common} --json --out ${WORKDIR}/whole_json.csv
                RESULT_VARIABLE rc2 OUTPUT_VARIABLE whole_json ERROR_QUIET)
string(JSON n ERROR_VARIABLE json_error LENGTH "${merged_json}" points)
string(JSON shards ERROR_VARIABLE json_error2 GET "${merged_json}" shards)
if(NOT rc EQUAL 0 OR NOT rc2 EQUAL 0 OR json_error OR json_error2 OR NOT n EQUAL 6 OR NOT shards EQUAL 2)
  message(FATAL_ERROR "sweep-merge --json (${rc}): ${err} ${json_error}\n${merged_json}")
endif()
foreach(i RANGE 5)
  foreach(key point iteration_time_s tokens_per_s peak_memory_bytes memory_capacity_bytes hfu ep virtual_stages)
    string(JSON m GET "${merged_json}" points ${i} ${key})
    string(JSON w GET "${whole_json}" points ${i} ${key})
    if(NOT m STREQUAL w)
      message(FATAL_ERROR "sweep-merge --json point ${i} ${key}: ${m}, the whole sweep's ${w}")
    endif()
  endforeach()
  string(JSON m GET "${merged_json}" points ${i} settings training.seq_len)
  string(JSON w GET "${whole_json}" points ${i} settings training.seq_len)
  if(NOT m STREQUAL w)
    message(FATAL_ERROR "sweep-merge --json point ${i} seq_len: ${m}, the whole sweep's ${w}")
  endif()
endforeach()
# A shard of an older tessera (other metric columns) is refused as such, by
# sweep-merge and as --out of the same shard (it would be read in the wrong
# places).
file(READ ${WORKDIR}/part0.csv p0)
string(REPLACE ",global_batch,ep,hfu,memory_capacity_bytes,virtual_stages,network_bytes,nvlink_bytes,fabric_bytes,training_tokens,training_days,gpu_hours,cost\n" ",global_batch\n" old "${p0}")
if(old STREQUAL p0)
  message(FATAL_ERROR "test setup: the metric columns were not found in part0.csv:\n${p0}")
endif()
file(WRITE ${WORKDIR}/old0.csv "${old}")
expect_merge_refused("an older shard should be refused as such" "old0.csv: its columns are not those this tessera writes \\(a shard of an older version's sweep\\? run it again\\)" ${WORKDIR}/old0.csv ${WORKDIR}/part1.csv)
execute_process(COMMAND ${TESSERA} ${common} --shard 0/2 --out ${WORKDIR}/old0.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--out [^\n]*old0.csv: the file holds this sweep's points in other columns than this tessera writes")
  message(FATAL_ERROR "resuming an older shard should say so: ${rc} ${err}")
endif()
# Each shard carries the sweep's chart notes (the merged chart has them:
# sweep-merge reads no scenario); shards whose notes differ are refused.
if(NOT p0 MATCHES "\n# chart note: Untested scale, every point: no multi-node run measured")
  message(FATAL_ERROR "shard 0 carries no chart notes:\n${p0}")
endif()
string(REPLACE "# chart note: Untested scale, every point" "# chart note: Untested scale, point 0" other "${p0}")
file(WRITE ${WORKDIR}/other0.csv "${other}")
expect_merge_refused("shards with other chart notes should be refused" "other0.csv: its chart notes differ from [^\n]*part1.csv's" ${WORKDIR}/part1.csv ${WORKDIR}/other0.csv)
# training.tokens and a price given by --set are in the shards' settings:
# the merged table has the whole sweep's days and cost columns (helper 58:
# the merge dropped them).
set(priced sweep ${SCENARIO} --set training.micro_batch=1,2 --set training.tokens=300B
    --set cluster.price_per_gpu_hour=2 --jobs 1)
execute_process(COMMAND ${TESSERA} ${priced} --out ${WORKDIR}/priced.csv OUTPUT_VARIABLE whole_priced RESULT_VARIABLE rc)
foreach(i 0 1)
  execute_process(COMMAND ${TESSERA} ${priced} --shard ${i}/2 --out ${WORKDIR}/priced${i}.csv
                  OUTPUT_QUIET RESULT_VARIABLE rc${i})
endforeach()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/priced-merged.csv ${WORKDIR}/priced0.csv
                        ${WORKDIR}/priced1.csv OUTPUT_VARIABLE merged_priced RESULT_VARIABLE rc2)
string(REGEX MATCH "point  settings[^\n]*days +cost\n[^\n]*\n[^\n]*\n" whole_table "${whole_priced}")
string(REGEX MATCH "point  settings[^\n]*days +cost\n[^\n]*\n[^\n]*\n" merged_table "${merged_priced}")
if(NOT rc EQUAL 0 OR NOT rc2 EQUAL 0 OR whole_table STREQUAL "" OR NOT whole_table STREQUAL merged_table)
  message(FATAL_ERROR "the merged table's days and cost are not the whole sweep's:\n${whole_priced}\n${merged_priced}")
endif()
# Both name the price as given (helper 74: worked back from the rounded
# cells it read 3.497 or "each point's" for one price).
set(priced_line "\ndays and cost: the whole training run [(]300B tokens[)] at each point's throughput, at 2 per GPU-hour [(]")
if(NOT whole_priced MATCHES "${priced_line}" OR NOT merged_priced MATCHES "${priced_line}")
  message(FATAL_ERROR "the days line's price:\n${whole_priced}\n${merged_priced}")
endif()
# training.tokens in the scenario file (no --set): each row's CSV has the
# run's tokens, days and GPU-hours in plain decimals (cost empty: no
# price), a point out of memory its tokens alone; the merged table and
# --json have them too (helpers 64 and 70: the CSV had no days; the merge
# showed them only for a swept training.tokens; helper 73: 2.30E+06 in a
# spreadsheet, and an out-of-memory row read as no tokens given).
file(READ ${SCENARIO} scenario_text)
string(REPLACE "\ntraining:\n" "\ntraining:\n  tokens: 300B\n" tokens_text "${scenario_text}")
if(tokens_text STREQUAL scenario_text)
  message(FATAL_ERROR "test setup: no training section in ${SCENARIO}")
endif()
file(WRITE ${WORKDIR}/tokens.yaml "${tokens_text}")
set(tokens sweep ${WORKDIR}/tokens.yaml --set training.micro_batch=1,256 --jobs 1)
execute_process(COMMAND ${TESSERA} ${tokens} --out ${WORKDIR}/tokens.csv OUTPUT_VARIABLE whole_tokens RESULT_VARIABLE rc)
file(STRINGS ${WORKDIR}/tokens.csv token_rows)
list(GET token_rows 0 token_header)
list(GET token_rows 1 token_fits)
list(GET token_rows 2 token_oom)
if(NOT rc EQUAL 0 OR NOT token_header MATCHES ",virtual_stages,network_bytes,nvlink_bytes,fabric_bytes,training_tokens,training_days,gpu_hours,cost$"
   OR NOT token_fits MATCHES ",0,[^\n]*,300000000000,[0-9][0-9][.][0-9]+,[0-9]+[.][0-9][0-9][0-9],$"
   OR NOT token_oom MATCHES ",1,[^\n]*,300000000000,,,$")
  message(FATAL_ERROR "the CSV's training run columns:\n${token_header}\n${token_fits}\n${token_oom}\n${whole_tokens}")
endif()
foreach(i 0 1)
  execute_process(COMMAND ${TESSERA} ${tokens} --shard ${i}/2 --out ${WORKDIR}/tokens${i}.csv OUTPUT_QUIET)
endforeach()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/tokens-merged.csv ${WORKDIR}/tokens0.csv
                        ${WORKDIR}/tokens1.csv OUTPUT_VARIABLE merged_tokens RESULT_VARIABLE rc)
string(REGEX MATCH "point  settings[^\n]*days\n[^\n]*\n[^\n]*\n" whole_table "${whole_tokens}")
string(REGEX MATCH "point  settings[^\n]*days\n[^\n]*\n[^\n]*\n" merged_table "${merged_tokens}")
if(NOT rc EQUAL 0 OR NOT whole_table MATCHES " +[0-9]+[.][0-9]\n[^\n]* +-  OOM\n$" OR NOT whole_table STREQUAL merged_table)
  message(FATAL_ERROR "the merged table's days are not the whole sweep's:\n${whole_tokens}\n${merged_tokens}")
endif()
# Both say what the days are (helper 73: neither the tokens nor "steady
# state"), and the merged table has the sweep's caveats (the shards' chart
# notes; helper 73: it had none).
set(days_line "\ndays: the whole training run [(]300B tokens[)] at each point's throughput [(]steady state only: ")
if(NOT whole_tokens MATCHES "${days_line}" OR NOT merged_tokens MATCHES "${days_line}"
   OR NOT merged_tokens MATCHES "\nnote: Untested scale, every point: no multi-node run measured")
  message(FATAL_ERROR "the days line, or the merged table's caveats:\n${whole_tokens}\n${merged_tokens}")
endif()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/tokens-merged.csv ${WORKDIR}/tokens0.csv
                        ${WORKDIR}/tokens1.csv --json OUTPUT_VARIABLE merged_json RESULT_VARIABLE rc)
string(JSON run_tokens ERROR_VARIABLE json_error GET "${merged_json}" points 0 training_run tokens)
string(JSON oom_run ERROR_VARIABLE oom_error GET "${merged_json}" points 1 training_run)
if(NOT rc EQUAL 0 OR NOT run_tokens STREQUAL "300000000000" OR oom_error STREQUAL "NOTFOUND")
  message(FATAL_ERROR "sweep-merge --json's training run (${json_error}; ${oom_error}):\n${merged_json}")
endif()
# A zipped sweep whose list repeats a value (global batch 256 at 8 and 32
# GPUs): its shards say --zip (# chart zipped), so the merged chart is the
# whole sweep's, one line through the three points (helper 139: merged, the
# rows alone read as two series, one per global batch).
set(zipped sweep ${SCENARIO} --set cluster.nodes=1,2,4 --set parallelism.dp=auto
    --set training.global_batch=256,512,256 --zip --jobs 1)
execute_process(COMMAND ${TESSERA} ${zipped} --out ${WORKDIR}/zip-whole.csv RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "zipped sweep failed: ${err}")
endif()
foreach(i 0 1)
  execute_process(COMMAND ${TESSERA} ${zipped} --shard ${i}/2 --out ${WORKDIR}/zip${i}.csv
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  file(READ ${WORKDIR}/zip${i}.csv zip_shard)
  if(NOT rc EQUAL 0 OR NOT zip_shard MATCHES "\n# chart zipped: --zip\n")
    message(FATAL_ERROR "zipped shard ${i} (${rc}): ${err}\n${zip_shard}")
  endif()
endforeach()
execute_process(COMMAND ${TESSERA} sweep-merge --out ${WORKDIR}/zip-merged.csv ${WORKDIR}/zip0.csv ${WORKDIR}/zip1.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
file(READ ${WORKDIR}/zip-whole.svg whole_svg)
file(READ ${WORKDIR}/zip-merged.svg merged_svg)
string(REGEX MATCHALL "<g class=\"series\"" zip_series "${whole_svg}")
list(LENGTH zip_series zip_series)
if(NOT rc EQUAL 0 OR NOT whole_svg STREQUAL merged_svg OR NOT zip_series EQUAL 3)
  message(FATAL_ERROR "the merged zipped chart should be the whole sweep's, 3 series (ideal, throughput, efficiency; got ${zip_series}) (${rc}): ${err}\n${whole_svg}\n---\n${merged_svg}")
endif()
