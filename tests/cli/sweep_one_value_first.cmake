# A key given one value listed before the swept one (helper 73: the price
# first) is a setting: the chart's x axis is the GPU count the node key
# gives, and the table has the scaling column.
file(MAKE_DIRECTORY ${WORKDIR})
execute_process(COMMAND ${TESSERA} sweep ${SCENARIO} --set cluster.price_per_gpu_hour=3.5 --set cluster.nodes=2,4
                        --set parallelism.dp=auto --jobs 1 --out ${WORKDIR}/first.csv --svg ${WORKDIR}/first.svg
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
file(READ ${WORKDIR}/first.svg svg)
file(STRINGS ${WORKDIR}/first.csv header LIMIT_COUNT 1)
if(NOT rc EQUAL 0 OR NOT out MATCHES "tokens/s  scaling\n +0  cluster.nodes=2 [^\n]*100[.]0%\n +1  cluster.nodes=4 [^\n]*%\n"
   OR NOT svg MATCHES "swept: cluster.nodes [(]x axis: the GPU count it gives[)]" OR NOT svg MATCHES "GPUs [(]log scale[)]"
   OR NOT header MATCHES "^point,cluster.price_per_gpu_hour,cluster.nodes,parallelism.dp,")
  message(FATAL_ERROR "a one-value key listed first (${rc}):\n${out}\n${header}")
endif()
