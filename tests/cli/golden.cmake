# Runs `tessera run SCENARIO [--json]` and compares stdout with GOLDEN
# byte for byte. With TESSERA_UPDATE_GOLDEN=1 in the environment, rewrites
# GOLDEN instead.
set(args run ${SCENARIO})
if(FORMAT STREQUAL "json")
  list(APPEND args --json)
endif()
execute_process(COMMAND ${TESSERA} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tessera ${args} failed (${rc}): ${err}")
endif()
# A shipped scenario is an example users copy: the tool must not warn about
# its configuration (scaling, shared-hcas and small-ns3 once ran PyTorch DDP
# with bf16 under megatron, which Megatron-LM refuses). A warning about a
# plan's memory (mixtral-ep fills 95% of its GPUs) is about the plan, and
# allowed.
if(err MATCHES "warning: [^\n]*: (cluster|model|training|parallelism|collectives|calibration|ns3|backend|jobs)[.:]")
  message(FATAL_ERROR "tessera ${args} warns about the shipped scenario's configuration:\n${err}")
endif()
if(DEFINED ENV{TESSERA_UPDATE_GOLDEN} AND NOT "$ENV{TESSERA_UPDATE_GOLDEN}" STREQUAL "0")
  file(WRITE ${GOLDEN} "${out}")
  message(STATUS "updated ${GOLDEN}")
  return()
endif()
if(NOT EXISTS ${GOLDEN})
  message(FATAL_ERROR "no golden file ${GOLDEN}; create it with TESSERA_UPDATE_GOLDEN=1 ctest -R golden")
endif()
file(READ ${GOLDEN} expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "output of tessera ${args} differs from ${GOLDEN}\n--- expected\n${expected}\n--- got\n${out}\n"
                      "If the change is intended: TESSERA_UPDATE_GOLDEN=1 ctest -R golden")
endif()
