// Shim: the CUDA header cuda_runtime_api.h, emulated (see ../FakeCuda.h).
#include "../FakeCuda.h"
