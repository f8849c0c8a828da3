//===- AbiEnumsTest.cpp - the X-macro lists of cleave_rt_enums.h ----------===//
//
// Every list numbers its entries 0, 1, ... in order (so tables indexed by
// value have no gaps) and its count and name function agree with it; the
// header is plain C (AbiEnumsC.c compiles it as C and reports what C
// sees); and a descriptor has the size the lowering emits.
//
//===----------------------------------------------------------------------===//

#include "cleave/Runtime/cleave_rt.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

extern "C" {
/// From AbiEnumsC.c: the counts and the ABI version as a C compiler sees
/// them.
int32_t cleave_test_c_num_dtypes(void);
int32_t cleave_test_c_num_unary_kinds(void);
int32_t cleave_test_c_num_param_roles(void);
int32_t cleave_test_c_abi_version(void);
const char *cleave_test_c_unary_name(int32_t op);
}

namespace {

struct Entry {
  const char *name;
  int64_t value;
  const char *mnemonic;
};

/// Whether `values` is 0, 1, ..., n-1.
template <size_t N> constexpr bool numberedInOrder(const int (&values)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (values[i] != int(i))
      return false;
  return true;
}

#define VALUE_OF(NAME, VALUE, MNEMONIC) VALUE,
#define DTYPE_VALUE_OF(NAME, VALUE, MNEMONIC, BYTES) VALUE,
#define ENTRY_OF(NAME, VALUE, MNEMONIC) Entry{#NAME, VALUE, MNEMONIC},
#define DTYPE_ENTRY_OF(NAME, VALUE, MNEMONIC, BYTES)                           \
  Entry{#NAME, VALUE, MNEMONIC},
// The enumerator CLEAVE_<NAME> has the list's value.
#define SAME_VALUE(NAME, VALUE, MNEMONIC)                                      \
  static_assert(CLEAVE_##NAME == VALUE, #NAME);
#define DTYPE_SAME_VALUE(NAME, VALUE, MNEMONIC, BYTES)                         \
  static_assert(CLEAVE_##NAME == VALUE, #NAME);

#define CHECK_LIST(LIST, COUNT)                                                \
  constexpr int LIST##_values[] = {LIST(VALUE_OF)};                            \
  static_assert(numberedInOrder(LIST##_values), #LIST " is not 0, 1, ...");    \
  static_assert(sizeof(LIST##_values) / sizeof(int) == COUNT, #COUNT);         \
  LIST(SAME_VALUE)

CHECK_LIST(CLEAVE_RT_UNARY_KINDS, CLEAVE_NUM_UNARY_KINDS)
CHECK_LIST(CLEAVE_RT_BINARY_KINDS, CLEAVE_NUM_BINARY_KINDS)
CHECK_LIST(CLEAVE_RT_COMPARE_DIRECTIONS, CLEAVE_NUM_COMPARE_DIRECTIONS)
CHECK_LIST(CLEAVE_RT_REDUCTION_KINDS, CLEAVE_NUM_REDUCTION_KINDS)
CHECK_LIST(CLEAVE_RT_ACTIVATIONS, CLEAVE_NUM_ACTIVATIONS)
CHECK_LIST(CLEAVE_RT_HYPERPARAMETERS, CLEAVE_NUM_HYPERPARAMETERS)
CHECK_LIST(CLEAVE_RT_PROGRAM_KINDS, CLEAVE_NUM_PROGRAM_KINDS)
CHECK_LIST(CLEAVE_RT_PARAM_ROLES, CLEAVE_NUM_PARAM_ROLES)

constexpr int dtypeValues[] = {CLEAVE_RT_DTYPES(DTYPE_VALUE_OF)};
static_assert(numberedInOrder(dtypeValues), "dtypes are not 0, 1, ...");
static_assert(sizeof(dtypeValues) / sizeof(int) == CLEAVE_NUM_DTYPES, "");
CLEAVE_RT_DTYPES(DTYPE_SAME_VALUE)

// A descriptor is the offset, the dtype and rank words and the shape: the
// ten i64 words -cleave-lower-to-runtime emits.
static_assert(sizeof(cleave_tensor) == (2 + CLEAVE_RT_MAX_RANK) * 8, "");

/// Each mnemonic of a list is set, unique, and what its name function
/// returns for the value; the function returns NULL past the list.
void expectNames(const std::vector<Entry> &entries,
                 const char *(*name)(int32_t), int32_t count) {
  ASSERT_EQ(entries.size(), size_t(count));
  std::set<std::string> seen;
  for (const Entry &e : entries) {
    ASSERT_NE(e.mnemonic, nullptr) << e.name;
    EXPECT_TRUE(seen.insert(e.mnemonic).second)
        << e.name << ": mnemonic '" << e.mnemonic << "' is used twice";
    ASSERT_NE(name(int32_t(e.value)), nullptr) << e.name;
    EXPECT_STREQ(name(int32_t(e.value)), e.mnemonic) << e.name;
  }
  EXPECT_EQ(name(count), nullptr);
  EXPECT_EQ(name(-1), nullptr);
}

TEST(AbiEnumsTest, NamesMatchTheLists) {
  expectNames({CLEAVE_RT_UNARY_KINDS(ENTRY_OF)}, cleave_unary_name,
              CLEAVE_NUM_UNARY_KINDS);
  expectNames({CLEAVE_RT_BINARY_KINDS(ENTRY_OF)}, cleave_binary_name,
              CLEAVE_NUM_BINARY_KINDS);
  expectNames({CLEAVE_RT_COMPARE_DIRECTIONS(ENTRY_OF)}, cleave_compare_name,
              CLEAVE_NUM_COMPARE_DIRECTIONS);
  expectNames({CLEAVE_RT_REDUCTION_KINDS(ENTRY_OF)}, cleave_reduction_name,
              CLEAVE_NUM_REDUCTION_KINDS);
  expectNames({CLEAVE_RT_ACTIVATIONS(ENTRY_OF)}, cleave_activation_name,
              CLEAVE_NUM_ACTIVATIONS);
  expectNames({CLEAVE_RT_PROGRAM_KINDS(ENTRY_OF)}, cleave_program_kind_name,
              CLEAVE_NUM_PROGRAM_KINDS);
  expectNames({CLEAVE_RT_PARAM_ROLES(ENTRY_OF)}, cleave_param_role_name,
              CLEAVE_NUM_PARAM_ROLES);
  expectNames({CLEAVE_RT_DTYPES(DTYPE_ENTRY_OF)}, cleave_dtype_name,
              CLEAVE_NUM_DTYPES);
}

TEST(AbiEnumsTest, DtypeSizes) {
  EXPECT_EQ(cleave_dtype_size(CLEAVE_F32), 4);
  EXPECT_EQ(cleave_dtype_size(CLEAVE_F16), 2);
  EXPECT_EQ(cleave_dtype_size(CLEAVE_BF16), 2);
  EXPECT_EQ(cleave_dtype_size(CLEAVE_I64), 8);
  EXPECT_EQ(cleave_dtype_size(CLEAVE_I32), 4);
  EXPECT_EQ(cleave_dtype_size(CLEAVE_I1), 1);
  EXPECT_EQ(cleave_dtype_size(CLEAVE_NUM_DTYPES), 0);
}

TEST(AbiEnumsTest, PlainC) {
  EXPECT_EQ(cleave_test_c_num_dtypes(), CLEAVE_NUM_DTYPES);
  EXPECT_EQ(cleave_test_c_num_unary_kinds(), CLEAVE_NUM_UNARY_KINDS);
  EXPECT_EQ(cleave_test_c_num_param_roles(), CLEAVE_NUM_PARAM_ROLES);
  EXPECT_EQ(cleave_test_c_abi_version(), CLEAVE_RT_ABI_VERSION);
  EXPECT_STREQ(cleave_test_c_unary_name(CLEAVE_GELU_TANH), "gelu_tanh");
}

} // namespace
