// oneDNN (Debian's libdnnl 2.x), loaded at run time with dlopen.
//
// Why not a link-time dependency: libtorch_cpu.so carries its own, newer
// oneDNN, statically linked, and exports some of its vague-linkage symbols
// (std:: template instances, call_once thunks inside oneDNN's GEMM setup).
// When libtorch is in the global scope (the case shimkit exists for), a
// linked libdnnl binds those names to libtorch's copies and its primitives
// fail ("could not execute a primitive"); and torch could bind to libdnnl's.
// Opened RTLD_LOCAL | RTLD_DEEPBIND, libdnnl resolves its own symbols first
// and exports none to the process. A process that never convolves and
// multiplies no matrices of 1 MFLOP or more never loads it; the runtime keeps
// the GEMMs of a model that does not convolve on OpenBLAS (matmul_onednn.cpp),
// so a process whose models never convolve does not either. SHIMKIT_ONEDNN=0
// turns it off (convolutions then use im2col, GEMMs OpenBLAS).
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

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

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
  X(dnnl_memory_desc_init_submemory)              \
  X(dnnl_memory_create)                           \
  X(dnnl_memory_destroy)                          \
  X(dnnl_memory_get_data_handle)                  \
  X(dnnl_primitive_attr_create)                   \
  X(dnnl_primitive_attr_destroy)                  \
  X(dnnl_primitive_attr_set_scratchpad_mode)      \
  X(dnnl_dilated_convolution_forward_desc_init)   \
  X(dnnl_dilated_deconvolution_forward_desc_init) \
  X(dnnl_matmul_desc_init)                        \
  X(dnnl_primitive_desc_create)                   \
  X(dnnl_primitive_desc_destroy)                  \
  X(dnnl_primitive_desc_query)                    \
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

// What the oneDNN primitives (conv_onednn.cpp, matmul_onednn.cpp) share: owners
// of oneDNN handles, the engine, per-thread streams and scratch memory.

// unique_ptr deleters that call oneDNN's destroy functions.
template <typename H, auto Member>
struct OnednnDestroy {
  void operator()(H h) const { (onednn().*Member)(h); }
};
template <typename H, auto Member>
using OnednnOwned = std::unique_ptr<std::remove_pointer_t<H>, OnednnDestroy<H, Member>>;
using Memory = OnednnOwned<dnnl_memory_t, &OnednnApi::dnnl_memory_destroy>;
using Primitive = OnednnOwned<dnnl_primitive_t, &OnednnApi::dnnl_primitive_destroy>;
using PrimitiveDesc = OnednnOwned<dnnl_primitive_desc_t, &OnednnApi::dnnl_primitive_desc_destroy>;
using Attr = OnednnOwned<dnnl_primitive_attr_t, &OnednnApi::dnnl_primitive_attr_destroy>;
using Stream = OnednnOwned<dnnl_stream_t, &OnednnApi::dnnl_stream_destroy>;

// The process's CPU engine (every primitive refers to it; lives until exit).
dnnl_engine_t cpu_engine();
// This thread's stream.
dnnl_stream_t thread_stream();
// A float32 memory descriptor: `dims` with `strides` (in elements), or with a format tag.
dnnl_memory_desc_t strided_desc(const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& strides);
dnnl_memory_desc_t tag_desc(const std::vector<int64_t>& dims, dnnl_format_tag_t tag);
bool same(const dnnl_memory_desc_t& a, const dnnl_memory_desc_t& b);
// A memory object over `data` (not owned), or DNNL_MEMORY_ALLOCATE.
Memory memory_at(const dnnl_memory_desc_t& md, void* data);
Primitive make_primitive(const_dnnl_primitive_desc_t pd);
// Attributes of every primitive here: a user scratchpad (primitives keep no
// hidden per-call allocations and are safe to share; `execute` passes this
// thread's scratch memory).
Attr user_scratchpad();
// Runs `p` on this thread's stream with `args` plus a scratchpad of `scratch_md`.
void execute(dnnl_primitive_t p, std::vector<dnnl_exec_arg_t> args,
             const dnnl_memory_desc_t& scratch_md, const char* what);
// The implementation oneDNN picked for `pd` ("brg:avx512_core", "ref:any", ...).
std::string implementation(const_dnnl_primitive_desc_t pd);

}  // namespace shimkit

#endif  // SHIMKIT_HAVE_ONEDNN
#endif  // SHIMKIT_SHIMS_ONEDNN_API_H_
