/* The C host API from C11: runtime, devices, programs from a file and from
 * memory, sessions, inputs copied and bound, outputs, async runs, open
 * shapes, traces, explain, and the errors of bad calls.
 *
 *   c_api_test <fixture programs folder> <scratch folder>
 *
 * The programs are the frozen fixtures (tests/fixtures/README.md):
 * format_1_0.loom, main(x: f32[2, 3]) -> (y, r) with r = Relu(x + w),
 * y = Softmax(r, axis 1), w = {0.5, -1, 2, -3, 0, 1}, on the reference
 * kernels; format_1_4_native.loom, Relu over x: f32[?, 4, ?]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom.h"

static int failures = 0;

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                      \
    }                                                                  \
  } while (0)

/* `e` must be NULL (success); otherwise report and free it. */
#define OK(call)                                                                            \
  do {                                                                                      \
    loom_error_t* e_ = (call);                                                              \
    if (e_ != NULL) {                                                                       \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,              \
              loom_status_code_name(loom_error_code(e_)), loom_error_message(e_));          \
      loom_error_free(e_);                                                                  \
      ++failures;                                                                           \
    }                                                                                       \
  } while (0)

/* `call` must fail with `code` and a message containing `text`. */
static void expect_error(loom_error_t* e, loom_status_code_t code, const char* text, const char* what, int line) {
  if (e == NULL) {
    fprintf(stderr, "line %d: %s succeeded; expected %s\n", line, what, loom_status_code_name(code));
    ++failures;
    return;
  }
  if (loom_error_code(e) != code || strstr(loom_error_message(e), text) == NULL) {
    fprintf(stderr, "line %d: %s: got %s: %s; expected %s containing \"%s\"\n", line, what,
            loom_status_code_name(loom_error_code(e)), loom_error_message(e), loom_status_code_name(code), text);
    ++failures;
  }
  loom_error_free(e);
}
#define FAILS(call, code, text) expect_error((call), (code), (text), #call, __LINE__)

static const float kW[6] = {0.5f, -1.0f, 2.0f, -3.0f, 0.0f, 1.0f};

/* Checks y and r of format_1_0's main for input x. */
static void check_main_outputs(const loom_session_t* s, const float x[6]) {
  float r[6], y[6];
  for (int i = 0; i < 6; ++i) r[i] = x[i] + kW[i] > 0 ? x[i] + kW[i] : 0;
  for (int row = 0; row < 2; ++row) {
    float m = r[row * 3], sum = 0;
    for (int c = 1; c < 3; ++c) m = r[row * 3 + c] > m ? r[row * 3 + c] : m;
    for (int c = 0; c < 3; ++c) sum += expf(r[row * 3 + c] - m);
    for (int c = 0; c < 3; ++c) y[row * 3 + c] = expf(r[row * 3 + c] - m) / sum;
  }
  loom_tensor_view_t view;
  memset(&view, 0, sizeof view);
  view.struct_size = sizeof view;
  OK(loom_session_output(s, "y", &view));
  CHECK(view.dtype == LOOM_DTYPE_F32);
  CHECK(view.rank == 2 && view.shape[0] == 2 && view.shape[1] == 3);
  CHECK(view.byte_size == 6 * sizeof(float));
  CHECK(strcmp(view.name, "y") == 0);
  for (int i = 0; i < 6 && view.data != NULL; ++i) CHECK(fabsf(((const float*)view.data)[i] - y[i]) < 1e-6f);
  memset(&view, 0, sizeof view);
  view.struct_size = sizeof view;
  OK(loom_session_output_at(s, 1, &view));
  CHECK(strcmp(view.name, "r") == 0);
  for (int i = 0; i < 6 && view.data != NULL; ++i) CHECK(((const float*)view.data)[i] == r[i]);
}

static char* join(const char* folder, const char* name) {
  size_t n = strlen(folder) + strlen(name) + 2;
  char* p = malloc(n);
  if (p != NULL) snprintf(p, n, "%s/%s", folder, name);
  return p;
}

static unsigned char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* bytes = malloc(n > 0 ? (size_t)n : 1);
  *size = bytes != NULL && n > 0 ? fread(bytes, 1, (size_t)n, f) : 0;
  fclose(f);
  return bytes;
}

static int log_lines = 0;
static void count_log(void* user, loom_log_level_t level, const char* message) {
  (void)level;
  (void)message;
  ++*(int*)user;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: c_api_test <fixture programs folder> <scratch folder>\n");
    return 2;
  }
  char* program_path = join(argv[1], "format_1_0.loom");
  char* open_path = join(argv[1], "format_1_4_native.loom");
  char* trace_path = join(argv[2], "c_api_trace.json");

  CHECK(loom_c_api_version() == ((LOOM_C_API_VERSION_MAJOR << 16) | LOOM_C_API_VERSION_MINOR));

  /* Options: a struct without its size and unknown flags are refused. */
  loom_runtime_t* rt = NULL;
  loom_runtime_options_t options;
  memset(&options, 0, sizeof options);
  FAILS(loom_runtime_create(&options, &rt), LOOM_STATUS_INVALID_ARGUMENT, "struct_size");
  CHECK(rt == NULL);
  options.struct_size = sizeof options;
  options.flags = 1u << 30;
  FAILS(loom_runtime_create(&options, &rt), LOOM_STATUS_INVALID_ARGUMENT, "unknown bits");
  options.flags = LOOM_RUNTIME_NO_USER_FOLDER;
  options.log = count_log;
  options.log_user_data = &log_lines;
  FAILS(loom_runtime_create(&options, NULL), LOOM_STATUS_INVALID_ARGUMENT, "out_runtime is NULL");
  OK(loom_runtime_create(&options, &rt));
  if (rt == NULL) return 1;

  /* Devices: the build's cpu-simd at least. */
  size_t count = 0;
  OK(loom_runtime_device_count(rt, &count));
  CHECK(count >= 1);
  int simd = 0;
  for (size_t i = 0; i < count; ++i) {
    loom_device_desc_t d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    OK(loom_runtime_device(rt, i, &d));
    if (d.uri != NULL && strcmp(d.uri, "cpu-simd://0") == 0) {
      simd = 1;
      CHECK(strcmp(d.plugin, "cpu-simd") == 0);
      CHECK(strcmp(d.kind, "cpu") == 0);
      CHECK((d.dtype_mask & LOOM_DTYPE_BIT(LOOM_DTYPE_F32)) != 0);
    }
  }
  CHECK(simd);
  loom_device_desc_t past;
  memset(&past, 0, sizeof past);
  past.struct_size = sizeof past;
  FAILS(loom_runtime_device(rt, count, &past), LOOM_STATUS_OUT_OF_RANGE, "past the");
  char* plugins = NULL;
  OK(loom_runtime_plugins(rt, &plugins));
  CHECK(plugins != NULL && strstr(plugins, "cpu-simd ") != NULL);
  loom_string_free(plugins);

  /* A program from a file, on the reference kernels. */
  loom_program_t* program = NULL;
  FAILS(loom_program_load_file(rt, "/no/such/program.loom", NULL, &program), LOOM_STATUS_NOT_FOUND,
        "/no/such/program.loom");
  CHECK(program == NULL);
  loom_load_options_t load;
  memset(&load, 0, sizeof load);
  load.struct_size = 8;
  FAILS(loom_program_load_file(rt, program_path, &load, &program), LOOM_STATUS_INVALID_ARGUMENT,
        "loom_load_options_t.struct_size is 8");
  load.struct_size = sizeof load;
  load.parameter_archive_count = 1;
  FAILS(loom_program_load_file(rt, program_path, &load, &program), LOOM_STATUS_INVALID_ARGUMENT,
        "parameter_archive_count is 1");
  load.parameter_archive_count = 0;
  OK(loom_program_load_file(rt, program_path, &load, &program));
  if (program == NULL) return 1;
  char* explain = NULL;
  OK(loom_program_explain(program, &explain));
  CHECK(explain != NULL);
  loom_string_free(explain);

  loom_session_t* s = NULL;
  FAILS(loom_session_create(program, "nosuch", &s), LOOM_STATUS_NOT_FOUND, "nosuch");
  OK(loom_session_create(program, NULL, &s));
  if (s == NULL) return 1;
  CHECK(loom_session_input_count(s) == 1);
  CHECK(loom_session_output_count(s) == 2);
  loom_value_desc_t in;
  memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  OK(loom_session_input(s, 0, &in));
  CHECK(strcmp(in.name, "x") == 0 && in.dtype == LOOM_DTYPE_F32 && in.rank == 2);
  CHECK(in.shape[0] == 2 && in.shape[1] == 3);
  FAILS(loom_session_input(s, 1, &in), LOOM_STATUS_OUT_OF_RANGE, "index 1 of 1 inputs");
  loom_value_desc_t out;
  memset(&out, 0, sizeof out);
  out.struct_size = sizeof out;
  OK(loom_session_output_desc(s, 0, &out));
  CHECK(strcmp(out.name, "y") == 0);

  const float x[6] = {1, 2, -3, 4, 0.5f, -6};
  const int64_t shape[2] = {2, 3};
  OK(loom_session_set_input(s, "x", LOOM_DTYPE_F32, shape, 2, x, sizeof x));
  OK(loom_session_run(s));
  check_main_outputs(s, x);

  /* Bad inputs are errors naming the input. */
  const int64_t wrong[2] = {3, 2};
  FAILS(loom_session_set_input(s, "x", LOOM_DTYPE_F32, wrong, 2, x, sizeof x), LOOM_STATUS_INVALID_ARGUMENT, "'x'");
  FAILS(loom_session_set_input(s, "x", LOOM_DTYPE_F32, shape, 2, x, 5), LOOM_STATUS_INVALID_ARGUMENT, "input 'x'");
  FAILS(loom_session_set_input(s, "x", (loom_dtype_t)99, shape, 2, x, sizeof x), LOOM_STATUS_INVALID_ARGUMENT,
        "dtype 99");
  FAILS(loom_session_set_input(s, "x", LOOM_DTYPE_F32, NULL, 2, x, sizeof x), LOOM_STATUS_INVALID_ARGUMENT,
        "shape is NULL");
  FAILS(loom_session_set_input(s, "nosuch", LOOM_DTYPE_F32, shape, 2, x, sizeof x), LOOM_STATUS_NOT_FOUND, "nosuch");
  FAILS(loom_session_bind_input(s, "nosuch", x, sizeof x), LOOM_STATUS_NOT_FOUND, "inputs: x");
  loom_tensor_view_t view;
  memset(&view, 0, sizeof view);
  view.struct_size = sizeof view;
  FAILS(loom_session_output(s, "nosuch", &view), LOOM_STATUS_NOT_FOUND, "results: y, r");
  FAILS(loom_session_output_at(s, 2, &view), LOOM_STATUS_OUT_OF_RANGE, "index 2 of 2 results");
  FAILS(loom_session_run(NULL), LOOM_STATUS_INVALID_ARGUMENT, "session is NULL");

  /* Caller memory bound without a copy, read at each run. */
  float bound[6] = {0, 0, 0, 0, 0, 0};
  OK(loom_session_bind_input(s, "x", bound, sizeof bound));
  bound[0] = 3;
  bound[5] = -1;
  OK(loom_session_run(s));
  check_main_outputs(s, bound);

  /* An asynchronous run, traced. */
  OK(loom_runtime_trace_start(rt));
  OK(loom_session_set_input(s, "x", LOOM_DTYPE_F32, shape, 2, x, sizeof x));
  loom_run_t* run = NULL;
  OK(loom_session_run_async(s, &run));
  if (run != NULL) {
    OK(loom_run_wait(run, -1));
    CHECK(loom_run_done(run) == 1);
    loom_run_release(run);
  }
  check_main_outputs(s, x);
  OK(loom_runtime_trace_stop(rt, trace_path));
  size_t trace_size = 0;
  unsigned char* trace = read_file(trace_path, &trace_size);
  CHECK(trace != NULL && trace_size > 0);
  if (trace != NULL) {
    trace[trace_size > 0 ? trace_size - 1 : 0] = 0;
    CHECK(strstr((const char*)trace, "traceEvents") != NULL);
  }
  free(trace);
  FAILS(loom_runtime_trace_stop(rt, trace_path), LOOM_STATUS_FAILED_PRECONDITION, "no trace");
  loom_session_destroy(s);

  /* The same program from memory; garbage is an error. */
  size_t size = 0;
  unsigned char* bytes = read_file(program_path, &size);
  CHECK(bytes != NULL && size > 0);
  loom_program_t* from_memory = NULL;
  OK(loom_program_load_memory(rt, bytes, size, NULL, &from_memory));
  memset(bytes, 0x5A, size > 64 ? 64 : size);
  loom_program_t* garbage = NULL;
  loom_error_t* e = loom_program_load_memory(rt, bytes, size, NULL, &garbage);
  CHECK(e != NULL && garbage == NULL && strlen(loom_error_message(e)) > 0);
  loom_error_free(e);
  free(bytes); /* the program keeps its own copy */
  if (from_memory != NULL) {
    OK(loom_session_create(from_memory, "main", &s));
    OK(loom_session_set_input(s, "x", LOOM_DTYPE_F32, shape, 2, x, sizeof x));
    OK(loom_session_run(s));
    check_main_outputs(s, x);
    loom_session_destroy(s);
    loom_program_release(from_memory);
  }

  /* An open-shape program at shapes of our choice. */
  loom_program_t* open = NULL;
  OK(loom_program_load_file(rt, open_path, NULL, &open));
  loom_program_release(program);
  /* The runtime goes first: programs and sessions keep what they need. */
  loom_runtime_destroy(rt);
  if (open != NULL) {
    OK(loom_session_create(open, NULL, &s));
    memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    OK(loom_session_input(s, 0, &in));
    CHECK(in.rank == 3 && in.shape[0] == -1 && in.shape[1] == 4 && in.shape[2] == -1);
    const int64_t shapes[2][3] = {{2, 4, 3}, {1, 4, 7}};
    for (int k = 0; k < 2; ++k) {
      float data[28];
      const size_t n = (size_t)(shapes[k][0] * shapes[k][1] * shapes[k][2]);
      for (size_t i = 0; i < n; ++i) data[i] = (float)i - (float)n / 2;
      OK(loom_session_set_input(s, "x", LOOM_DTYPE_F32, shapes[k], 3, data, n * sizeof(float)));
      OK(loom_session_run(s));
      memset(&view, 0, sizeof view);
      view.struct_size = sizeof view;
      OK(loom_session_output_at(s, 0, &view));
      CHECK(view.rank == 3 && view.shape[0] == shapes[k][0] && view.shape[2] == shapes[k][2]);
      CHECK(view.byte_size == n * sizeof(float));
      for (size_t i = 0; i < n && view.data != NULL; ++i) {
        CHECK(((const float*)view.data)[i] == (data[i] > 0 ? data[i] : 0));
      }
    }
    const int64_t bad[3] = {2, 5, 3};
    float zeros[30] = {0};
    FAILS(loom_session_set_input(s, "x", LOOM_DTYPE_F32, bad, 3, zeros, sizeof zeros), LOOM_STATUS_INVALID_ARGUMENT,
          "dimension 1");
    loom_session_destroy(s);
    loom_program_release(open);
  }

  free(program_path);
  free(open_path);
  free(trace_path);
  if (failures != 0) {
    fprintf(stderr, "c_api_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
