# Fails unless FILE exists and its text matches REGEX (for outputs another
# test wrote: a chart, a CSV).
if(NOT EXISTS "${FILE}")
  message(FATAL_ERROR "${FILE} was not written")
endif()
file(READ "${FILE}" text)
if(NOT text MATCHES "${REGEX}")
  message(FATAL_ERROR "${FILE} does not match '${REGEX}':\n${text}")
endif()
