// Shim: the CUDA header cublas_v2.h, emulated (see ../FakeCuda.h).
#include "../FakeCuda.h"
