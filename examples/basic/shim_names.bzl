"""The shim functions examples/basic defines, unprefixed.

Tests compare this list with the built library's exports in both
directions (exact set), so it cannot drift from example_shims.cc unnoticed.
"""

EXAMPLE_SHIM_NAMES = [
    "aoti_torch_create_tensor_from_blob",
    "aoti_torch_delete_tensor_object",
    "aoti_torch_device_type_cpu",
    "aoti_torch_dtype_float32",
    "aoti_torch_get_data_ptr",
    "aoti_torch_get_dim",
    "aoti_torch_get_numel",
    "aoti_torch_get_sizes",
    "aoti_torch_get_strides",
    "aoti_torch_grad_mode_is_enabled",
    "aoti_torch_grad_mode_set_enabled",
]
