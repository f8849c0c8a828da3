#===- CheckJob.cmake - runs an mpirun job that must fail cleanly ----------===#
#
# cmake -DMPIEXEC=... -DNP=... -DPROGRAM=... -DMODE=...
#       [-DJOB_ENV=NAME=VALUE,...] -DEXPECT="regex|||regex..."
#       -DMAX_SECONDS=... -P CheckJob.cmake
#
# Runs PROGRAM MODE on NP ranks (with JOB_ENV set on every rank)
# and fails unless the job exits non-zero within MAX_SECONDS with every
# EXPECT regex found in its output: the error paths of the communication
# engine end the whole job with a clear message, never hang it.
#
#===----------------------------------------------------------------------===#

set(env_args "")
set(forward "")
if(DEFINED JOB_ENV AND NOT JOB_ENV STREQUAL "")
  string(REPLACE "," ";" JOB_ENV "${JOB_ENV}")
  foreach(setting IN LISTS JOB_ENV)
    string(REGEX REPLACE "=.*" "" variable "${setting}")
    list(APPEND env_args ${setting})
    list(APPEND forward -x ${variable})
  endforeach()
endif()
string(TIMESTAMP start "%s")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env ${env_args}
          ${MPIEXEC} --allow-run-as-root --oversubscribe -np ${NP} ${forward}
          ${PROGRAM} ${MODE}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out
  TIMEOUT ${MAX_SECONDS})
string(TIMESTAMP stop "%s")
math(EXPR elapsed "${stop} - ${start}")
message("${out}")
message("-- exit status '${rc}' after ${elapsed} s")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the job exited with status 0; expected a failure")
endif()
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end by itself within ${MAX_SECONDS} "
    "s: ${rc}")
endif()
string(REPLACE "|||" ";" EXPECT "${EXPECT}")
foreach(regex IN LISTS EXPECT)
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "the output lacks '${regex}'")
  endif()
endforeach()
