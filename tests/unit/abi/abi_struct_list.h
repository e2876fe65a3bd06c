/* Every struct of plugin.h that crosses the boundary, with its last field
 * and its size constant: LOOM_ABI_STRUCT(type, last_field, size_constant).
 * Included by both the C and the C++ side of the ABI test, so that a struct
 * added to plugin.h needs one line here to be checked in both languages. */
LOOM_ABI_STRUCT(loom_tensor_t, byte_size, LOOM_TENSOR_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_option_t, value, LOOM_OPTION_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_trace_event_t, timestamp_ns, LOOM_TRACE_EVENT_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_host_services_t, trace, LOOM_HOST_SERVICES_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_loader_key_t, format_version_max, LOOM_LOADER_KEY_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_plugin_info_t, capabilities, LOOM_PLUGIN_INFO_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_device_info_t, dtype_mask, LOOM_DEVICE_INFO_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_plugin_create_args_t, out_plugin, LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_executable_check_args_t, blob_size, LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_executable_load_args_t, out_executable, LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_execute_args_t, signal_fence, LOOM_EXECUTE_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_buffer_allocate_args_t, out_buffer, LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_buffer_import_args_t, out_buffer, LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_buffer_copy_args_t, size, LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_compile_supported_args_t, out_supported, LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_compile_args_t, out_format_version, LOOM_COMPILE_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_executable_estimate_args_t, out_time_ns, LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE)
LOOM_ABI_STRUCT(loom_plugin_api_t, executable_estimate, LOOM_PLUGIN_API_V1_1_SIZE)
LOOM_ABI_STRUCT(loom_plugin_query_t, out_api, LOOM_PLUGIN_QUERY_STRUCT_SIZE)
