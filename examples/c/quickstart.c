/* Loom from C: list the devices, load a program with a placement policy, run
 * it on zeros, and print where each delegate went and how long a run takes.
 *
 *   quickstart PROGRAM.loom [POLICY]     (POLICY default: policy:fastest)
 *
 * Inputs with an open dimension get size 1 there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/loom.h"

static int fail(loom_error_t* e) {
  fprintf(stderr, "%s: %s\n", loom_status_code_name(loom_error_code(e)), loom_error_message(e));
  loom_error_free(e);
  return 1;
}

static size_t dtype_size(loom_dtype_t t) {
  switch (t) {
    case LOOM_DTYPE_F64: case LOOM_DTYPE_I64: case LOOM_DTYPE_U64: return 8;
    case LOOM_DTYPE_F32: case LOOM_DTYPE_I32: case LOOM_DTYPE_U32: return 4;
    case LOOM_DTYPE_F16: case LOOM_DTYPE_BF16: case LOOM_DTYPE_I16: case LOOM_DTYPE_U16: return 2;
    default: return 1;
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: quickstart PROGRAM.loom [POLICY]\n");
    return 2;
  }
  loom_runtime_t* rt = NULL;
  loom_error_t* e = loom_runtime_create(NULL, &rt);
  if (e) return fail(e);
  size_t count = 0;
  if ((e = loom_runtime_device_count(rt, &count))) return fail(e);
  for (size_t i = 0; i < count; ++i) {
    loom_device_desc_t d = {.struct_size = sizeof d};
    if ((e = loom_runtime_device(rt, i, &d))) return fail(e);
    printf("device %-22s %-12s %s\n", d.uri, d.kind, d.name);
  }
  loom_load_options_t load = {.struct_size = sizeof load};
  load.device = argc > 2 ? argv[2] : "policy:fastest";
  loom_program_t* program = NULL;
  if ((e = loom_program_load_file(rt, argv[1], &load, &program))) return fail(e);
  char* explain = NULL;
  if ((e = loom_program_explain(program, &explain))) return fail(e);
  printf("%s", explain);
  loom_string_free(explain);
  loom_session_t* s = NULL;
  if ((e = loom_session_create(program, NULL, &s))) return fail(e);
  for (size_t i = 0; i < loom_session_input_count(s); ++i) {
    loom_value_desc_t in = {.struct_size = sizeof in};
    if ((e = loom_session_input(s, i, &in))) return fail(e);
    int64_t shape[16];
    size_t elements = 1;
    for (uint32_t d = 0; d < in.rank && d < 16; ++d) {
      shape[d] = in.shape[d] < 0 ? 1 : in.shape[d];
      elements *= (size_t)shape[d];
    }
    const size_t bytes = elements * dtype_size(in.dtype);
    void* zeros = calloc(bytes ? bytes : 1, 1);
    e = loom_session_set_input(s, in.name, in.dtype, shape, in.rank, zeros, bytes);
    free(zeros);
    if (e) return fail(e);
  }
  if ((e = loom_session_run(s))) return fail(e);
  const int runs = 20;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int r = 0; r < runs; ++r) {
    if ((e = loom_session_run(s))) return fail(e);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  for (size_t i = 0; i < loom_session_output_count(s); ++i) {
    loom_tensor_view_t v = {.struct_size = sizeof v};
    if ((e = loom_session_output_at(s, i, &v))) return fail(e);
    printf("output %s: %zu bytes, rank %u\n", v.name, v.byte_size, v.rank);
  }
  const double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / runs;
  printf("%.3f ms per run (%d runs)\n", ms, runs);
  loom_session_destroy(s);
  loom_program_release(program);
  loom_runtime_destroy(rt);
  return 0;
}
