//===- Stream.h - the CUDA backend's stream, for host-only code -*- C++ -*-===//
//
// The one declaration of CudaCommon.cuh that code compiled by the host
// compiler needs (the NCCL communication engine, runtime/lib/comm): the
// stream every kernel of the backend runs on, defined in Backend.cu.
// CudaCommon.cuh itself holds device code and needs nvcc.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_LIB_CUDA_STREAM_H
#define CLEAVE_RUNTIME_LIB_CUDA_STREAM_H

#include <cuda_runtime_api.h>

namespace cleave::rt::cuda {

/// The stream every kernel runs on, in call order (initializes the backend
/// on the current device when it is not yet).
cudaStream_t stream();

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_LIB_CUDA_STREAM_H
