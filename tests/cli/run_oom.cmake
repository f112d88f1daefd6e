# `tessera run` of a plan that does not fit in GPU memory: the report on
# stdout (with the OUT OF MEMORY stage and its memory breakdown), one line on
# stderr naming the stage and what would shrink its largest part (helper 80:
# it offered only --allow-oom), exit code 3; with --allow-oom the same report
# and exit code 0.
set(args run ${SCENARIO} --set training.micro_batch=64)
execute_process(COMMAND ${TESSERA} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 3)
  message(FATAL_ERROR "expected exit code 3, got ${rc}\nstderr: ${err}")
endif()
if(NOT out MATCHES "Memory stage 0 +[0-9.]+ GiB of 80.0 GiB  \\*\\* OUT OF MEMORY \\*\\*\n  weights [0-9.]+, gradients [0-9.]+ \\(fp32\\), optimizer [0-9.]+, activations [0-9.]+, workspace [0-9.]+ GiB")
  message(FATAL_ERROR "no OUT OF MEMORY stage with its breakdown on stdout:\n${out}")
endif()
string(REGEX REPLACE "\n$" "" line "${err}")
if(line MATCHES "\n" OR NOT line MATCHES "^tessera: out of memory: .*default.yaml: the plan does not fit in GPU memory: pipeline stage 0 needs [0-9.]+ GiB of 80.0 GiB \\(its largest part, activations, [0-9.]+ GiB: try parallelism.recompute: selective or full, a smaller training.micro_batch or more tensor or pipeline parallelism; tessera search finds plans that fit; --allow-oom to accept the forecast\\)$")
  message(FATAL_ERROR "unexpected stderr:\n${err}")
endif()
execute_process(COMMAND ${TESSERA} ${args} --allow-oom --json OUTPUT_VARIABLE out2 ERROR_VARIABLE err2 RESULT_VARIABLE rc2)
if(NOT rc2 EQUAL 0 OR NOT err2 STREQUAL "")
  message(FATAL_ERROR "--allow-oom: expected exit code 0 and no stderr, got ${rc2}: ${err2}")
endif()
if(NOT out2 MATCHES "\"oom\": true, \"memory_per_stage\"")
  message(FATAL_ERROR "--allow-oom --json: no \"oom\": true in\n${out2}")
endif()
# Optimizer states the largest part, without ZeRO: the distributed optimizer
# is named first.
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set model.preset=llama3-70b --set training.micro_batch=1
                        --set parallelism.recompute=full
                OUTPUT_VARIABLE out3 ERROR_VARIABLE err3 RESULT_VARIABLE rc3)
if(NOT rc3 EQUAL 3 OR NOT err3 MATCHES "\\(its largest part, optimizer states, [0-9.]+ GiB: try parallelism.zero_stage: 1 or more tensor or pipeline parallelism; tessera search")
  message(FATAL_ERROR "optimizer states: expected exit code 3 and the ZeRO hint, got ${rc3}: ${err3}")
endif()
# Gradients the largest part under ZeRO-1: stage 2 shards them (helper 82:
# stage 1 was named, which does not).
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set model.preset=llama3-70b --set training.micro_batch=1
                        --set parallelism.recompute=full --set parallelism.zero_stage=1
                OUTPUT_VARIABLE out4 ERROR_VARIABLE err4 RESULT_VARIABLE rc4)
if(NOT rc4 EQUAL 3 OR NOT err4 MATCHES "\\(its largest part, gradients, [0-9.]+ GiB: try parallelism.zero_stage: 2 or more")
  message(FATAL_ERROR "gradients: expected exit code 3 and ZeRO-2, got ${rc4}: ${err4}")
endif()
# With FlashAttention selective recomputation saves nothing: full alone
# (helper 83).
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set training.micro_batch=64 --set training.flash_attention=true
                OUTPUT_VARIABLE out5 ERROR_VARIABLE err5 RESULT_VARIABLE rc5)
if(NOT rc5 EQUAL 3 OR NOT err5 MATCHES "\\(its largest part, activations, [0-9.]+ GiB: try parallelism.recompute: full, a smaller")
  message(FATAL_ERROR "flash attention: expected exit code 3 and full recomputation, got ${rc5}: ${err5}")
endif()
# The stage furthest over is named (helper 84: the first over was: stage 0
# of 111.6 GiB where stage 3 needs 113.0; 113.3 since the LM head's and
# the final norm's inputs count, 2026-12-06), and a ZeRO stage the plan's
# framework refuses is not offered (DeepSpeed: no ZeRO-2 with pipelines).
get_filename_component(dir ${SCENARIO} DIRECTORY)
execute_process(COMMAND ${TESSERA} run ${dir}/llama3-70b.yaml --set parallelism.tp=1 --set parallelism.dp=128
                        --set parallelism.recompute=full --set training.framework=megatron-deepspeed
                OUTPUT_VARIABLE out6 ERROR_VARIABLE err6 RESULT_VARIABLE rc6)
if(NOT rc6 EQUAL 3 OR NOT err6 MATCHES "pipeline stage 3 needs 113.3 GiB of 80.0 GiB \\(its largest part, gradients, [0-9.]+ GiB: try more tensor or pipeline parallelism;")
  message(FATAL_ERROR "megatron-deepspeed pipeline: expected stage 3 and no ZeRO-2, got ${rc6}: ${err6}")
endif()
# A mixture of experts: twice the expert parallelism, where the plan runs
# with it, is named first for its weights, gradients and optimizer states
# (helper 99: ep was never suggested).
execute_process(COMMAND ${TESSERA} run ${dir}/mixtral-ep.yaml --set parallelism.ep=2 --set parallelism.recompute=full
                        --set parallelism.pp=1 --set parallelism.dp=32
                OUTPUT_VARIABLE out7 ERROR_VARIABLE err7 RESULT_VARIABLE rc7)
if(NOT rc7 EQUAL 3 OR NOT err7 MATCHES "\\(its largest part, gradients, [0-9.]+ GiB: try parallelism.ep: 4 \\(half the experts per GPU\\), parallelism.zero_stage: 2 or more tensor")
  message(FATAL_ERROR "mixture of experts: expected exit code 3 and ep 4, got ${rc7}: ${err7}")
endif()
# At the most expert parallelism there is (ep = experts) it is not offered.
execute_process(COMMAND ${TESSERA} run ${dir}/mixtral-ep.yaml --set parallelism.ep=8 --set parallelism.recompute=full
                        --set parallelism.pp=1 --set parallelism.dp=32 --set parallelism.zero_stage=0
                OUTPUT_VARIABLE out8 ERROR_VARIABLE err8 RESULT_VARIABLE rc8)
if(NOT rc8 EQUAL 3 OR NOT err8 MATCHES "\\(its largest part, optimizer states, [0-9.]+ GiB: try parallelism.zero_stage: 1 or more tensor")
  message(FATAL_ERROR "ep 8 of 8 experts: no wider expert parallelism exists, yet: ${err8}")
endif()
# Activations the largest part under GPipe with micro-batches: the schedule
# is named first, and no more pipeline stages (helper 106: under GPipe they
# add micro-batches per pipeline and grew the stage).
execute_process(COMMAND ${TESSERA} run ${SCENARIO} --set training.micro_batch=16 --set training.global_batch=512
                        --set parallelism.schedule=gpipe
                OUTPUT_VARIABLE out8 ERROR_VARIABLE err8 RESULT_VARIABLE rc8)
if(NOT rc8 EQUAL 3 OR NOT err8 MATCHES "\\(its largest part, activations, [0-9.]+ GiB: try parallelism.schedule: 1f1b \\(GPipe holds every micro-batch's activations, 1F1B at most pp\\), parallelism.recompute: selective or full, a smaller training.micro_batch or more tensor parallelism; tessera search")
  message(FATAL_ERROR "gpipe: expected exit code 3 and the schedule first, got ${rc8}: ${err8}")
endif()
# FP8 training under ZeRO-3: Transformer Engine's cached FP8 weights and
# transposes, which no ZeRO stage shards, fill the stage (127.5 GiB of
# 150.3 at tp 1, pp 1): they are named, with no ZeRO stage (helper 167:
# the hint named the activations, 14.2 GiB, as the largest part).
execute_process(COMMAND ${TESSERA} run ${dir}/llama3-70b-fp8.yaml --set parallelism.tp=1 --set parallelism.pp=1
                        --set parallelism.dp=512 --set parallelism.zero_stage=3 --set parallelism.recompute=full
                        --set parallelism.sequence_parallel=false --set training.global_batch=512
                OUTPUT_VARIABLE out9 ERROR_VARIABLE err9 RESULT_VARIABLE rc9)
if(NOT rc9 EQUAL 3 OR NOT out9 MATCHES "\n  weights [0-9.]+, fp8 weights 127.5, "
   OR NOT err9 MATCHES "\\(its largest part, fp8 weights, 127.5 GiB: try more tensor or pipeline parallelism; tessera search")
  message(FATAL_ERROR "fp8 weights: expected exit code 3 and them named, got ${rc9}: ${err9}")
endif()
