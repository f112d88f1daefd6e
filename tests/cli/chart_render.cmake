# Every kind of chart renders: a node sweep (log GPU axis, ideal scaling,
# efficiency), a two-key sweep (one line per pp), a sweep that keeps the
# GPUs (micro-batch), a merged sharded sweep and compare-schedules, each
# drawn to PNG by rsvg-convert (librsvg), which must succeed and write a PNG.
# Keep the PNGs in WORKDIR to look at them.
file(REMOVE_RECURSE ${WORKDIR})
file(MAKE_DIRECTORY ${WORKDIR})
function(run_ok)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()
run_ok(${TESSERA} sweep ${SCENARIOS}/scaling.yaml --set cluster.nodes=1,2,4,8 --jobs 2
       --out ${WORKDIR}/nodes.csv --svg ${WORKDIR}/nodes.svg)
run_ok(${TESSERA} sweep ${SCENARIOS}/scaling.yaml --set cluster.nodes=1,2,4 --set parallelism.pp=1,2 --jobs 2
       --out ${WORKDIR}/two_keys.csv --svg ${WORKDIR}/two_keys.svg)
run_ok(${TESSERA} sweep ${SCENARIOS}/default.yaml --set training.micro_batch=1,2,4,8 --jobs 2
       --out ${WORKDIR}/micro_batch.csv --svg ${WORKDIR}/micro_batch.svg)
foreach(i 0 1)
  run_ok(${TESSERA} sweep ${SCENARIOS}/scaling.yaml --set cluster.nodes=1,2,4,8 --shard ${i}/2 --jobs 2
         --out ${WORKDIR}/shard${i}.csv)
endforeach()
run_ok(${TESSERA} sweep-merge --out ${WORKDIR}/merged.csv --svg ${WORKDIR}/merged.svg
       ${WORKDIR}/shard0.csv ${WORKDIR}/shard1.csv)
run_ok(${TESSERA} compare-schedules ${SCENARIOS}/schedules.yaml --svg ${WORKDIR}/schedules.svg)
# WORKDIR/CHART.svg has a text element matching `regex` (what: for the message).
function(expect_chart_text chart regex what)
  file(READ ${WORKDIR}/${chart}.svg svg)
  if(NOT svg MATCHES ">${regex}<")
    message(FATAL_ERROR "${chart}.svg: no ${what}")
  endif()
endfunction()
# The compare-schedules chart says what it compares: model, GPUs, plan, and
# with which models (helper 121: an ns-3 chart looked like a flow one).
expect_chart_text(schedules "gpt3-xl on 32 x A100-80GB, dp=2 tp=2 pp=8, 16 micro-batches of 2 sequences"
                  "subtitle naming the model, GPUs and plan")
expect_chart_text(schedules "Models: tile-mlp node model, flow network backend" "models line")
if(NS3)
  run_ok(${TESSERA} compare-schedules ${SCENARIOS}/small-ns3.yaml --schedules 1f1b --backend ns3
         --svg ${WORKDIR}/schedules_ns3.svg)
  expect_chart_text(schedules_ns3 "Models: tile-mlp node model, ns3 network backend"
                    "models line naming the ns3 backend")
endif()
# A sweep's chart names its models too.
expect_chart_text(micro_batch "Models: tile-mlp node model, flow network backend" "models line")
# The merged sweep draws the same chart as the unsharded one, its title
# too (helper 136: it was "tessera sweep-merge").
file(READ ${WORKDIR}/nodes.svg nodes)
file(READ ${WORKDIR}/merged.svg merged)
if(NOT nodes STREQUAL merged)
  message(FATAL_ERROR "sweep-merge draws another chart than the unsharded sweep")
endif()
foreach(chart nodes two_keys micro_batch merged schedules)
  run_ok(${RSVG} -b white ${WORKDIR}/${chart}.svg -o ${WORKDIR}/${chart}.png)
  file(READ ${WORKDIR}/${chart}.png magic LIMIT 8 HEX)
  if(NOT magic STREQUAL "89504e470d0a1a0a")
    message(FATAL_ERROR "${chart}.png is not a PNG (starts with ${magic})")
  endif()
endforeach()
message(STATUS "rendered nodes, two_keys, micro_batch, merged and schedules to PNG in ${WORKDIR}")
