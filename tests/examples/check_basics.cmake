execute_process(COMMAND ${EXE} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "basics exited with ${rc}: ${err}")
endif()
foreach(expected
    "basic example: loss = [0-9.]+, by hand = [0-9.]+ \\(agree\\)"
    "dloss/db = 2-element Tensor{Float32} on CPU:"
    "d = Dense\\(10 => 5, σ\\) +# 55 parameters"
    "d\\(x\\) has shape \\(5\\)"
    "m = Chain\\(\n  Dense\\(10 => 5, σ\\), +# 55 parameters\n  Dense\\(5 => 2\\), +# 12 parameters\n  softmax,\n\\) +# Total: 4 arrays, 67 parameters, 268 bytes."
    "m\\(x\\) = 2-element Tensor{Float32} on CPU:"
    "ActorCritic.actor on CPU, critic on CPU"
    "cu: .*CUDA backend is not available")
  if(NOT out MATCHES "${expected}")
    message(FATAL_ERROR "basics output lacks /${expected}/")
  endif()
endforeach()
if(NOT err MATCHES "Warning: flx: gpu\\(\\) found no functional GPU")
  message(FATAL_ERROR "gpu() fell back to the CPU without its warning: ${err}")
endif()
