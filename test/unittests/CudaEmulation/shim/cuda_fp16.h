// Shim: the CUDA header cuda_fp16.h, emulated (see ../FakeCuda.h).
#include "../FakeCuda.h"
