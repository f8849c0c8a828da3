// Shim: the CUDA header cuda_bf16.h, emulated (see ../FakeCuda.h).
#include "../FakeCuda.h"
