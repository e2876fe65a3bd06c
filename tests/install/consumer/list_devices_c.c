/* An installed C application: lists the devices through the C host API
 * (loom/loom.h), built with the C compiler from pkg-config's loom flags. */
#include <stdio.h>
#include <string.h>

#include "loom/loom.h"

int main(void) {
  loom_runtime_t* runtime = NULL;
  loom_error_t* e = loom_runtime_create(NULL, &runtime);
  size_t count = 0;
  if (e == NULL) e = loom_runtime_device_count(runtime, &count);
  for (size_t i = 0; e == NULL && i < count; ++i) {
    loom_device_desc_t d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    e = loom_runtime_device(runtime, i, &d);
    if (e == NULL) printf("device %s\n", d.uri);
  }
  if (e != NULL) {
    fprintf(stderr, "%s: %s\n", loom_status_code_name(loom_error_code(e)), loom_error_message(e));
    loom_error_free(e);
    loom_runtime_destroy(runtime);
    return 1;
  }
  loom_runtime_destroy(runtime);
  return 0;
}
