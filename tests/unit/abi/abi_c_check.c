/* plugin.h compiled as strict C11 (-Wpedantic -Werror): a plugin written in C
 * must be able to use it. The sizes the C compiler sees are handed to the C++
 * test, which compares them with its own. */
#include <stddef.h>

#include "loom/plugin.h"

#define LOOM_ABI_STRUCT(type, last, constant)                                   \
  _Static_assert((constant) == offsetof(type, last) + sizeof(((type*)0)->last), \
                 #constant " ends at " #type "." #last);                        \
  _Static_assert(offsetof(type, struct_size) == 0, #type " starts with struct_size");
#include "abi_struct_list.h"
#undef LOOM_ABI_STRUCT

/* The per-version constants, too: each ends at its version's last field. */
#define LOOM_ABI_VERSION_SIZE(type, last, constant)                             \
  _Static_assert((constant) == offsetof(type, last) + sizeof(((type*)0)->last), \
                 #constant " ends at " #type "." #last);
#include "abi_version_list.h"
#undef LOOM_ABI_VERSION_SIZE

/* Fills out[i] with {size constant, sizeof} of each struct in list order;
 * returns how many structs there are. */
size_t loom_abi_test_c_sizes(size_t (*out)[2], size_t capacity);

size_t loom_abi_test_c_sizes(size_t (*out)[2], size_t capacity) {
  size_t n = 0;
#define LOOM_ABI_STRUCT(type, last, constant) \
  if (n < capacity) {                         \
    out[n][0] = (constant);                   \
    out[n][1] = sizeof(type);                 \
  }                                           \
  ++n;
#include "abi_struct_list.h"
#undef LOOM_ABI_STRUCT
  return n;
}

/* A C plugin's entry point type-checks against the typedef. */
static loom_status_code_t c_query(loom_plugin_query_t* query) {
  return query == NULL ? LOOM_STATUS_INVALID_ARGUMENT : LOOM_STATUS_INCOMPATIBLE;
}
loom_plugin_query_fn_t loom_abi_test_c_query(void);
loom_plugin_query_fn_t loom_abi_test_c_query(void) { return c_query; }
