// Shim: the CUDA header cuda_runtime.h, emulated (see ../FakeCuda.h).
#include "../FakeCuda.h"
