# Fails when BINARY links against any ns-3 library.
# Usage: cmake -DBINARY=<path> -P CheckNoNs3.cmake
execute_process(COMMAND ldd "${BINARY}" OUTPUT_VARIABLE deps RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${BINARY} failed")
endif()
if(deps MATCHES "libns3")
  message(FATAL_ERROR "${BINARY} links ns-3:\n${deps}")
endif()
message(STATUS "${BINARY} links without ns-3")
