/* The seam between the fake plugin's two halves.
 *
 * fake_plugin.cpp, fake_memory.cpp and fake_compile.cpp build the plugin on
 * loom/plugin.hpp. fake_abi_variants.cpp holds, in C style, what plugin.hpp
 * deliberately cannot express because it validates or builds exactly what the
 * fake must get wrong: the exported query (with $LOOM_FAKE_MISBEHAVE and the
 * ABI-level broken variants), the function table patched per variant, the
 * plugin_info structs of the large variant, and the wrappers that break the
 * helper's compile and device_info results on purpose. Internal to the
 * plugin (hidden visibility); nothing here is exported. */
#ifndef FAKE_RAW_H_
#define FAKE_RAW_H_

#include <stddef.h>
#include <stdint.h>

#include "loom/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fake_plugin.cpp: the function table plugin.hpp makes for `version` (1.0 or
 * 1.1). */
const loom_plugin_api_t* fake_sdk_api(uint32_t version);
/* fake_plugin.cpp: the fake.compile_fault option of a plugin instance ("" when
 * unset), and its host services. */
const char* fake_compile_fault(loom_plugin_t* plugin);
const loom_host_services_t* fake_host(loom_plugin_t* plugin);
/* fake_plugin.cpp: a copy of `size` bytes made with new[], kept by the plugin
 * until plugin_destroy (fake.compile_fault=new_blob). */
void* fake_keep_blob_copy(loom_plugin_t* plugin, const void* bytes, size_t size);
/* fake_plugin.cpp: a status object of the helper's kind. */
loom_status_t* fake_make_status(loom_status_code_t code, const char* message);

/* fake_abi_variants.cpp: plugin_info (the large variant's structs are larger
 * than ABI 1.0). */
const loom_plugin_info_t* fake_plugin_info(void);
/* fake_abi_variants.cpp: does what `what` says when it is "<stage>_<deed>":
 * kills the process with SIGSEGV, aborts, exits with code 0 or never
 * returns. */
void fake_misbehave(const char* what, const char* stage);

#ifdef __cplusplus
}
#endif

#endif /* FAKE_RAW_H_ */
