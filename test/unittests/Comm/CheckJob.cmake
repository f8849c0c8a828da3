#===- CheckJob.cmake - runs an mpirun job that must fail cleanly ----------===#
#
# cmake -DMPIEXEC=... -DNP=... -DPROGRAM=... -DMODE=... [-DTIMEOUT_S=2]
#       -DEXPECT="regex|||regex..." -DMAX_SECONDS=... -P CheckJob.cmake
#
# Runs PROGRAM MODE on NP ranks (CLEAVE_COMM_TIMEOUT_S=TIMEOUT_S when given)
# and fails unless the job exits non-zero within MAX_SECONDS with every
# EXPECT regex found in its output: the error paths of the communication
# engine end the whole job with a clear message, never hang it.
#
#===----------------------------------------------------------------------===#

set(env_args "")
set(forward "")
if(DEFINED TIMEOUT_S)
  set(env_args CLEAVE_COMM_TIMEOUT_S=${TIMEOUT_S})
  set(forward -x CLEAVE_COMM_TIMEOUT_S)
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
