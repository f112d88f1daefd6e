# A trace file says what produced it: its header's otherData names the
# scenario, model, GPUs and plan. -DTESSERA, -DSCENARIO, -DWORKDIR.
file(MAKE_DIRECTORY ${WORKDIR})
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set parallelism.dp=8 --set parallelism.pp=2
                        --trace ${WORKDIR}/header.json
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run --trace failed: ${rc}")
endif()
file(READ ${WORKDIR}/header.json head LIMIT 400)
if(NOT head MATCHES "\"otherData\":{\"generator\":\"tessera\",\"scenario\":\"[^\"]*default\\.yaml \\(default: gpt2-large on 16 x H100-SXM, dp=8 tp=1 pp=2, 1 micro-batch of 8\\)\",")
  message(FATAL_ERROR "trace header without the scenario:\n${head}")
endif()
