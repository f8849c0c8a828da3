/*===- AbiEnumsC.c - cleave_rt.h compiled as C ----------------------------===*
 *
 * The runtime ABI is a C header: this file includes it in a C translation
 * unit and reports what a C compiler makes of its lists, for
 * AbiEnumsTest.cpp to compare with C++'s.
 *
 *===----------------------------------------------------------------------===*/

#include "cleave/Runtime/cleave_rt.h"

int32_t cleave_test_c_num_dtypes(void) { return CLEAVE_NUM_DTYPES; }
int32_t cleave_test_c_num_unary_kinds(void) { return CLEAVE_NUM_UNARY_KINDS; }
int32_t cleave_test_c_num_param_roles(void) { return CLEAVE_NUM_PARAM_ROLES; }
int32_t cleave_test_c_abi_version(void) { return CLEAVE_RT_ABI_VERSION; }
const char *cleave_test_c_unary_name(int32_t op) {
  return cleave_unary_name(op);
}
