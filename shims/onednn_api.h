// oneDNN (Debian's libdnnl 2.x), loaded at run time with dlopen.
//
// Why not a link-time dependency: libtorch_cpu.so carries its own, newer
// oneDNN, statically linked, and exports some of its vague-linkage symbols
// (std:: template instances, call_once thunks inside oneDNN's GEMM setup).
// When libtorch is in the global scope (the case shimkit exists for), a
// linked libdnnl binds those names to libtorch's copies and its primitives
// fail ("could not execute a primitive"); and torch could bind to libdnnl's.
// Opened RTLD_LOCAL | RTLD_DEEPBIND, libdnnl resolves its own symbols first
// and exports none to the process. A process that never convolves never
// loads it. SHIMKIT_ONEDNN=0 turns it off (convolutions then use im2col).
//
// The function types come from oneDNN's own header (decltype), so a
// mismatch with the installed library's API cannot compile. Built where that
// header is oneDNN 2.x (SHIMKIT_HAVE_ONEDNN 1); without it, or against oneDNN
// 3.x (another C API: no *_desc_init, another soname), the shims build without
// oneDNN and convolve another way (conv_onednn.h).
#ifndef SHIMKIT_SHIMS_ONEDNN_API_H_
#define SHIMKIT_SHIMS_ONEDNN_API_H_

#if __has_include(<oneapi/dnnl/dnnl_version.h>)
#include <oneapi/dnnl/dnnl_version.h>
#endif
#if defined(DNNL_VERSION_MAJOR) && DNNL_VERSION_MAJOR == 2
#define SHIMKIT_HAVE_ONEDNN 1
#else
#define SHIMKIT_HAVE_ONEDNN 0
#endif

#if SHIMKIT_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>

#include <string>

namespace shimkit {

struct OnednnApi {
  bool ok = false;
  std::string error;  // why not ok
#define SHIMKIT_ONEDNN_FUNCTIONS(X)               \
  X(dnnl_engine_create)                           \
  X(dnnl_engine_destroy)                          \
  X(dnnl_stream_create)                           \
  X(dnnl_stream_destroy)                          \
  X(dnnl_stream_wait)                             \
  X(dnnl_memory_desc_init_by_strides)             \
  X(dnnl_memory_desc_init_by_tag)                 \
  X(dnnl_memory_desc_equal)                       \
  X(dnnl_memory_desc_get_size)                    \
  X(dnnl_memory_create)                           \
  X(dnnl_memory_destroy)                          \
  X(dnnl_primitive_attr_create)                   \
  X(dnnl_primitive_attr_destroy)                  \
  X(dnnl_primitive_attr_set_scratchpad_mode)      \
  X(dnnl_dilated_convolution_forward_desc_init)   \
  X(dnnl_dilated_deconvolution_forward_desc_init) \
  X(dnnl_primitive_desc_create)                   \
  X(dnnl_primitive_desc_destroy)                  \
  X(dnnl_primitive_desc_query_md)                 \
  X(dnnl_reorder_primitive_desc_create)           \
  X(dnnl_primitive_create)                        \
  X(dnnl_primitive_destroy)                       \
  X(dnnl_primitive_execute)
#define SHIMKIT_ONEDNN_MEMBER(name) decltype(&::name) name = nullptr;
  SHIMKIT_ONEDNN_FUNCTIONS(SHIMKIT_ONEDNN_MEMBER)
#undef SHIMKIT_ONEDNN_MEMBER
};

// The process's oneDNN, opened on first use (thread-safe); check `ok`.
const OnednnApi& onednn();

// Throws ShimError("<what>: <oneDNN status>") unless `status` is success.
void onednn_check(dnnl_status_t status, const char* what);

}  // namespace shimkit

#endif  // SHIMKIT_HAVE_ONEDNN
#endif  // SHIMKIT_SHIMS_ONEDNN_API_H_
