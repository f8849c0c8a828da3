#===- runtime/CudaBackend.cmake - finds the CUDA toolkit and NCCL ----------===#
#
# Decides whether the CUDA runtime backend (cleave_rt_cuda) is built:
# CLEAVE_ENABLE_CUDA defaults to ON when nvcc, cuBLAS and NCCL are found
# (CLEAVE_CUDA_ROOT, /usr/local/cuda by default). Building needs no GPU, so
# CI compiles the backend on every run; its tests skip where no device is
# present. CLEAVE_CUDA_ARCHITECTURES picks the GPU architectures (default
# sm_80 and sm_90: A100 and H100/H200).
#
#===----------------------------------------------------------------------===#

set(CLEAVE_CUDA_ROOT "/usr/local/cuda" CACHE PATH
  "Where the CUDA toolkit (nvcc, cuBLAS) and NCCL are installed")
find_program(CLEAVE_NVCC nvcc HINTS "${CLEAVE_CUDA_ROOT}/bin" NO_DEFAULT_PATH)
find_path(CLEAVE_NCCL_INCLUDE_DIR nccl.h HINTS "${CLEAVE_CUDA_ROOT}/include")
find_library(CLEAVE_NCCL_LIBRARY nccl
  HINTS "${CLEAVE_CUDA_ROOT}/lib64" "${CLEAVE_CUDA_ROOT}/lib")
if(CLEAVE_NVCC AND CLEAVE_NCCL_INCLUDE_DIR AND CLEAVE_NCCL_LIBRARY)
  set(CLEAVE_CUDA_FOUND ON)
else()
  set(CLEAVE_CUDA_FOUND OFF)
endif()
option(CLEAVE_ENABLE_CUDA "Build the CUDA/NCCL runtime backend"
  ${CLEAVE_CUDA_FOUND})
set(CLEAVE_CUDA_ARCHITECTURES "80;90" CACHE STRING
  "GPU architectures of the CUDA backend (CMAKE_CUDA_ARCHITECTURES syntax)")

if(CLEAVE_ENABLE_CUDA)
  if(NOT CLEAVE_CUDA_FOUND)
    message(FATAL_ERROR "CLEAVE_ENABLE_CUDA is ON but nvcc, nccl.h or "
      "libnccl were not found under CLEAVE_CUDA_ROOT=${CLEAVE_CUDA_ROOT}")
  endif()
  set(CMAKE_CUDA_COMPILER "${CLEAVE_NVCC}")
  set(CMAKE_CUDA_ARCHITECTURES "${CLEAVE_CUDA_ARCHITECTURES}")
  # nvcc's host compiler is the C++ compiler of the rest of the build.
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
  enable_language(CUDA)
  set(CUDAToolkit_ROOT "${CLEAVE_CUDA_ROOT}")
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
    "architectures ${CMAKE_CUDA_ARCHITECTURES}, NCCL ${CLEAVE_NCCL_LIBRARY}")
else()
  message(STATUS "CUDA backend: off (nvcc or NCCL not found, or disabled)")
endif()
