// Slim CPU convolution through oneDNN, the library ATen uses on the CPU.
//
// - Activations stay in the layout the blob handed over: channels_last
//   (nhwc) goes straight through the primitive; contiguous (nchw) input is
//   reordered to oneDNN's blocked layout and back, as ATen/ideep does.
// - Weights are reordered into the primitive's blocked layout. Weights that
//   live in borrowed storage (the blob's constants) are reordered once and
//   cached for as long as that storage lives (a weak reference, checked on
//   every use); weights the blob computed (owned storage) are reordered on
//   every call, because their bytes may change between calls.
// - The bias is fused into the primitive.
// Primitives and streams are cached per thread; the weight cache is shared.
#include "shims/conv_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shimkit {
namespace {

using dnnl::memory;
using Dims = memory::dims;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// Per-thread scratch memory for primitives (user scratchpad mode keeps the
// primitives themselves free of hidden per-call allocations).
void* thread_scratch(size_t nbytes) {
  thread_local std::vector<unsigned char> scratch;
  if (scratch.size() < nbytes) scratch.resize(nbytes);
  return scratch.data();
}

// True if `t` is laid out densely with `canonical` strides (size-1 dims may
// have any stride: they never move the address).
bool dense_as(const SlimTensor& t, const std::vector<int64_t>& canonical) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] != 1 && t.strides()[d] != canonical[d]) return false;
  }
  return true;
}

Dims to_dims(const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); }

// The oneDNN view of the weight tensor [OC, IC/g, KH, KW] (grouped: 5-D).
memory::desc user_weight_desc(const SlimTensor& w, int64_t groups) {
  const auto& sz = w.sizes();
  const auto& st = w.strides();
  if (groups == 1) {
    return memory::desc({sz[0], sz[1], sz[2], sz[3]}, memory::data_type::f32,
                        Dims{st[0], st[1], st[2], st[3]});
  }
  return memory::desc({groups, sz[0] / groups, sz[1], sz[2], sz[3]}, memory::data_type::f32,
                      Dims{(sz[0] / groups) * st[0], st[0], st[1], st[2], st[3]});
}

// A primitive for one geometry, with the descriptors of the user-side tensors.
struct ConvPlan {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward conv;
  memory::desc src_user, dst_user, weight_user;
  bool reorder_src = false, reorder_dst = false;
};

ConvPlan make_plan(const ConvShape& s, const ConvParams& p, bool has_bias,
                   const memory::desc& weight_user) {
  const Dims src_dims{s.n, s.c, s.h, s.w};
  const Dims dst_dims{s.n, s.oc, s.oh, s.ow};
  const Dims src_strides = s.channels_last ? to_dims(channels_last_strides({s.n, s.c, s.h, s.w}))
                                           : to_dims(contiguous_strides({s.n, s.c, s.h, s.w}));
  const memory::desc src_user(src_dims, memory::data_type::f32, src_strides);
  const memory::desc dst_user(dst_dims, memory::data_type::f32, to_dims(s.out_strides));
  // channels_last runs in place; nchw lets oneDNN pick its blocked layout.
  const auto any = memory::format_tag::any;
  const memory::desc src_md =
      s.channels_last ? src_user : memory::desc(src_dims, memory::data_type::f32, any);
  const memory::desc dst_md =
      s.channels_last ? dst_user : memory::desc(dst_dims, memory::data_type::f32, any);
  Dims weight_dims = weight_user.dims();
  const memory::desc weight_md(weight_dims, memory::data_type::f32, any);
  const memory::desc bias_md =
      has_bias ? memory::desc({s.oc}, memory::data_type::f32, memory::format_tag::a)
               : memory::desc();
  // ideep's right padding: exactly what the floor-divided output size uses.
  const int64_t ekh = (s.kh - 1) * p.dilation[0] + 1, ekw = (s.kw - 1) * p.dilation[1] + 1;
  const Dims pad_l{p.padding[0], p.padding[1]};
  const Dims pad_r{(s.oh - 1) * p.stride[0] + ekh - s.h - p.padding[0],
                   (s.ow - 1) * p.stride[1] + ekw - s.w - p.padding[1]};
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, src_md, weight_md,
                                             bias_md, dst_md, {p.stride[0], p.stride[1]},
                                             {p.dilation[0] - 1, p.dilation[1] - 1}, pad_l, pad_r);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  ConvPlan plan{dnnl::convolution_forward::primitive_desc(desc, attr, cpu_engine()),
                {},
                src_user,
                dst_user,
                weight_user};
  plan.conv = dnnl::convolution_forward(plan.pd);
  plan.reorder_src = plan.pd.src_desc() != src_user;
  plan.reorder_dst = plan.pd.dst_desc() != dst_user;
  return plan;
}

// Plans of this thread, keyed by everything the primitive depends on; null
// when oneDNN has no implementation for the case.
ConvPlan* thread_plan(const ConvShape& s, const ConvParams& p, bool has_bias,
                      const memory::desc& weight_user, const SlimTensor& weight) {
  thread_local std::map<std::vector<int64_t>, ConvPlan> plans;
  std::vector<int64_t> key{
      s.n,          s.c,          s.h,           s.w,           s.oc,
      s.kh,         s.kw,         s.groups,      p.stride[0],   p.stride[1],
      p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], s.channels_last,
      has_bias};
  for (int64_t st : weight.strides()) key.push_back(st);
  auto it = plans.find(key);
  if (it == plans.end()) {
    // A bounded cache: dynamic shapes can make many geometries.
    if (plans.size() >= 256) plans.clear();
    try {
      it = plans.emplace(std::move(key), make_plan(s, p, has_bias, weight_user)).first;
    } catch (const dnnl::error&) {
      return nullptr;  // no implementation for this case
    }
  }
  return &it->second;
}

// Weights reordered once, for borrowed (constant) storages.
struct PackedWeight {
  std::weak_ptr<Storage> storage;
  int64_t storage_offset;
  std::vector<int64_t> sizes, strides;
  memory::desc desc;
  memory packed;
};

class WeightCache {
 public:
  // The packed copy of `w` in `desc`, made with `pack` on a miss.
  template <typename Pack>
  memory get(const SlimTensor& w, const memory::desc& desc, Pack&& pack) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto range = entries_.equal_range(w.storage().get());
    for (auto it = range.first; it != range.second; ++it) {
      const PackedWeight& e = it->second;
      if (e.storage.lock() == w.storage() && e.storage_offset == w.storage_offset() &&
          e.sizes == w.sizes().vec() && e.strides == w.strides().vec() && e.desc == desc) {
        return e.packed;
      }
    }
    sweep();
    PackedWeight e{w.storage(), w.storage_offset(), w.sizes().vec(), w.strides().vec(), desc,
                   pack()};
    memory packed = e.packed;
    entries_.emplace(w.storage().get(), std::move(e));
    return packed;
  }

 private:
  // Drops entries whose storage died (a closed model's constants); a new
  // storage at the same address must never see their bytes.
  void sweep() {
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.storage.expired() ? entries_.erase(it) : std::next(it);
    }
  }
  std::mutex mutex_;
  std::unordered_multimap<const Storage*, PackedWeight> entries_;
};

WeightCache& weight_cache() {
  static WeightCache* cache = new WeightCache();  // never destroyed: used until exit
  return *cache;
}

memory reorder_into(const memory& src, const memory::desc& desc) {
  memory out(desc, cpu_engine());
  dnnl::reorder(src, out).execute(thread_stream(), const_cast<memory&>(src), out);
  return out;
}

}  // namespace

bool onednn_convolution(const SlimTensor& input_in, const SlimTensor& weight,
                        const SlimTensor* bias, const ConvParams& p, const ConvShape& s,
                        const SlimTensor& out) {
  if (input_in.dtype() != dtype::kFloat32 || weight.dtype() != dtype::kFloat32) return false;
  const std::vector<int64_t> in_sizes{s.n, s.c, s.h, s.w};
  const std::vector<int64_t> want =
      s.channels_last ? channels_last_strides(in_sizes) : contiguous_strides(in_sizes);
  // Inputs that are neither dense nhwc nor dense nchw are copied into the
  // output's format first.
  SlimTensor input = input_in;
  if (!dense_as(input_in, want)) {
    input = SlimTensor::empty(in_sizes.data(), want.data(), 4, dtype::kFloat32, device::kCPU, -1);
    copy_elements(input, input_in);
  }
  const memory::desc weight_user = user_weight_desc(weight, s.groups);
  ConvPlan* found = thread_plan(s, p, bias != nullptr, weight_user, weight);
  if (found == nullptr) return false;
  ConvPlan& plan = *found;
  const dnnl::engine& engine = cpu_engine();
  dnnl::stream& stream = thread_stream();

  memory weight_mem(plan.weight_user, engine, weight.data_ptr());
  const memory::desc weight_desc = plan.pd.weights_desc();
  if (weight_desc != plan.weight_user) {
    if (weight.storage() && !weight.storage()->owns()) {
      weight_mem = weight_cache().get(weight, weight_desc,
                                      [&]() { return reorder_into(weight_mem, weight_desc); });
    } else {
      weight_mem = reorder_into(weight_mem, weight_desc);
    }
  }
  memory src_mem(plan.src_user, engine, input.data_ptr());
  if (plan.reorder_src) src_mem = reorder_into(src_mem, plan.pd.src_desc());
  memory dst_user(plan.dst_user, engine, out.data_ptr());
  memory dst_mem = plan.reorder_dst ? memory(plan.pd.dst_desc(), engine) : dst_user;

  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, weight_mem}, {DNNL_ARG_DST, dst_mem}};
  SlimTensor bias_dense;
  if (bias != nullptr) {
    check_conv_bias(*bias, s.oc);
    bias_dense = *bias;
    if (bias->strides()[0] != 1 && s.oc > 1) {
      bias_dense = SlimTensor::empty(&s.oc, nullptr, 1, dtype::kFloat32, device::kCPU, -1);
      copy_elements(bias_dense, *bias);
    }
    args.emplace(DNNL_ARG_BIAS, memory(plan.pd.bias_desc(), engine, bias_dense.data_ptr()));
  }
  const memory::desc scratch_desc = plan.pd.scratchpad_desc();
  args.emplace(DNNL_ARG_SCRATCHPAD,
               memory(scratch_desc, engine, thread_scratch(scratch_desc.get_size())));
  plan.conv.execute(stream, args);
  if (plan.reorder_dst) dnnl::reorder(dst_mem, dst_user).execute(stream, dst_mem, dst_user);
  stream.wait();
  return true;
}

}  // namespace shimkit
