#include "shims/onednn_api.h"

#if SHIMKIT_HAVE_ONEDNN
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shims/slim_tensor.h"

namespace shimkit {
namespace {

// Debian's soname (libdnnl-dev / libdnnl2).
constexpr const char* kLibrary = "libdnnl.so.2";

OnednnApi open_onednn() {
  OnednnApi api;
  const char* switch_value = std::getenv("SHIMKIT_ONEDNN");
  if (switch_value != nullptr && std::strcmp(switch_value, "0") == 0) {
    api.error = "turned off by SHIMKIT_ONEDNN=0";
    return api;
  }
  int flags = RTLD_NOW | RTLD_LOCAL;
#if !defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer refuses RTLD_DEEPBIND; its builds never share a process
  // with libtorch in the tests.
  flags |= RTLD_DEEPBIND;
#endif
  void* handle = dlopen(kLibrary, flags);
  if (handle == nullptr) {
    const char* why = dlerror();
    api.error = std::string(kLibrary) + ": " + (why != nullptr ? why : "cannot be opened");
    return api;
  }
  // Kept open for the life of the process: primitives hold its JIT code.
#define SHIMKIT_ONEDNN_LOAD(name)                                                    \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));             \
  if (api.name == nullptr) {                                                         \
    api.error = std::string(kLibrary) + ": has no " #name " (oneDNN 2.x is needed)"; \
    return api;                                                                      \
  }
  SHIMKIT_ONEDNN_FUNCTIONS(SHIMKIT_ONEDNN_LOAD)
#undef SHIMKIT_ONEDNN_LOAD
  api.ok = true;
  return api;
}

const char* status_name(dnnl_status_t status) {
  switch (status) {
    case dnnl_out_of_memory:
      return "out of memory";
    case dnnl_invalid_arguments:
      return "invalid arguments";
    case dnnl_unimplemented:
      return "unimplemented";
    case dnnl_runtime_error:
      return "runtime error";
    default:
      return "error";
  }
}

}  // namespace

const OnednnApi& onednn() {
  static const OnednnApi api = open_onednn();
  return api;
}

void onednn_check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success) {
    throw ShimError(std::string(what) + ": oneDNN " + status_name(status) + " (status " +
                    std::to_string(static_cast<int>(status)) + ")");
  }
}

dnnl_engine_t cpu_engine() {
  static dnnl_engine_t engine = []() {
    dnnl_engine_t e = nullptr;  // lives until exit: every primitive refers to it
    onednn_check(onednn().dnnl_engine_create(&e, dnnl_cpu, 0), "oneDNN CPU engine");
    return e;
  }();
  return engine;
}

dnnl_stream_t thread_stream() {
  thread_local Stream stream = []() {
    dnnl_stream_t s = nullptr;
    onednn_check(onednn().dnnl_stream_create(&s, cpu_engine(), dnnl_stream_default_flags),
                 "oneDNN stream");
    return Stream(s);
  }();
  return stream.get();
}

namespace {

// Per-thread scratch memory for primitives (see user_scratchpad).
void* thread_scratch(size_t nbytes) {
  thread_local std::vector<unsigned char> scratch;
  if (scratch.size() < nbytes) scratch.resize(nbytes);
  return scratch.data();
}

}  // namespace

dnnl_memory_desc_t strided_desc(const std::vector<int64_t>& dims,
                                const std::vector<int64_t>& strides) {
  dnnl_memory_desc_t md;
  onednn_check(onednn().dnnl_memory_desc_init_by_strides(&md, static_cast<int>(dims.size()),
                                                         dims.data(), dnnl_f32, strides.data()),
               "memory descriptor");
  return md;
}

dnnl_memory_desc_t tag_desc(const std::vector<int64_t>& dims, dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  onednn_check(onednn().dnnl_memory_desc_init_by_tag(&md, static_cast<int>(dims.size()),
                                                     dims.data(), dnnl_f32, tag),
               "memory descriptor");
  return md;
}

bool same(const dnnl_memory_desc_t& a, const dnnl_memory_desc_t& b) {
  return onednn().dnnl_memory_desc_equal(&a, &b) != 0;
}

Memory memory_at(const dnnl_memory_desc_t& md, void* data) {
  dnnl_memory_t m = nullptr;
  onednn_check(onednn().dnnl_memory_create(&m, &md, cpu_engine(), data), "memory object");
  return Memory(m);
}

Primitive make_primitive(const_dnnl_primitive_desc_t pd) {
  dnnl_primitive_t p = nullptr;
  onednn_check(onednn().dnnl_primitive_create(&p, pd), "primitive");
  return Primitive(p);
}

Attr user_scratchpad() {
  dnnl_primitive_attr_t attr = nullptr;
  onednn_check(onednn().dnnl_primitive_attr_create(&attr), "attributes");
  Attr owned(attr);
  onednn_check(onednn().dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user),
               "scratchpad mode");
  return owned;
}

void execute(dnnl_primitive_t p, std::vector<dnnl_exec_arg_t> args,
             const dnnl_memory_desc_t& scratch_md, const char* what) {
  Memory scratch =
      memory_at(scratch_md, thread_scratch(onednn().dnnl_memory_desc_get_size(&scratch_md)));
  args.push_back({DNNL_ARG_SCRATCHPAD, scratch.get()});
  onednn_check(onednn().dnnl_primitive_execute(p, thread_stream(), static_cast<int>(args.size()),
                                               args.data()),
               what);
}

std::string implementation(const_dnnl_primitive_desc_t pd) {
  const char* info = nullptr;
  onednn_check(onednn().dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info),
               "implementation name");
  return info != nullptr ? info : "";
}

}  // namespace shimkit

#endif  // SHIMKIT_HAVE_ONEDNN
