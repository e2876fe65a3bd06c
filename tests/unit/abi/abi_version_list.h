/* Every per-version size constant of plugin.h with the last field of that
 * version: LOOM_ABI_VERSION_SIZE(type, last_field, constant). Included by the
 * C and the C++ side of the ABI test. A minor version that grows a struct
 * adds a line here (its new constant and new last field); no line is ever
 * changed or removed, because an older version's size never changes. */
LOOM_ABI_VERSION_SIZE(loom_tensor_t, byte_size, LOOM_TENSOR_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_option_t, value, LOOM_OPTION_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_trace_event_t, timestamp_ns, LOOM_TRACE_EVENT_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_host_services_t, trace, LOOM_HOST_SERVICES_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_loader_key_t, format_version_max, LOOM_LOADER_KEY_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_plugin_info_t, loader_keys, LOOM_PLUGIN_INFO_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_plugin_info_t, capabilities, LOOM_PLUGIN_INFO_V1_2_SIZE)
LOOM_ABI_VERSION_SIZE(loom_device_info_t, dtype_mask, LOOM_DEVICE_INFO_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_plugin_create_args_t, out_plugin, LOOM_PLUGIN_CREATE_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_executable_check_args_t, blob_size, LOOM_EXECUTABLE_CHECK_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_executable_load_args_t, out_executable, LOOM_EXECUTABLE_LOAD_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_execute_args_t, signal_fence, LOOM_EXECUTE_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_buffer_allocate_args_t, out_buffer, LOOM_BUFFER_ALLOCATE_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_buffer_import_args_t, out_buffer, LOOM_BUFFER_IMPORT_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_buffer_copy_args_t, size, LOOM_BUFFER_COPY_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_compile_supported_args_t, out_supported, LOOM_COMPILE_SUPPORTED_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_compile_args_t, out_format_version, LOOM_COMPILE_ARGS_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_executable_estimate_args_t, out_time_ns, LOOM_EXECUTABLE_ESTIMATE_ARGS_V1_1_SIZE)
LOOM_ABI_VERSION_SIZE(loom_plugin_api_t, compile, LOOM_PLUGIN_API_V1_0_SIZE)
LOOM_ABI_VERSION_SIZE(loom_plugin_api_t, executable_estimate, LOOM_PLUGIN_API_V1_1_SIZE)
LOOM_ABI_VERSION_SIZE(loom_plugin_api_t, executable_estimate, LOOM_PLUGIN_API_V1_2_SIZE)
LOOM_ABI_VERSION_SIZE(loom_plugin_query_t, out_api, LOOM_PLUGIN_QUERY_V1_0_SIZE)
