// Slim CPU convolution (and transposed convolution: oneDNN's deconvolution)
// through oneDNN (onednn_api.h), the library ATen uses on the CPU.
//
// - 1-D (lifted to 2-D), 2-D and 3-D convolutions.
// - Activations stay in the layout the blob handed over: channels_last
//   (nhwc, ndhwc) goes straight through the primitive; contiguous input is
//   reordered to oneDNN's blocked layout and back, as ATen/ideep does.
// - Weights are reordered into the primitive's blocked layout. Weights that
//   live in borrowed storage (the blob's constants) are reordered once and
//   cached for as long as that storage lives (a weak reference, checked on
//   every use); weights the blob computed (owned storage) are reordered on
//   every call, because their bytes may change between calls.
// - Where the runtime allows it (Storage::allow_stand_in), a constant's
//   packed copy stands in for its plain bytes, whose pages go back to the
//   system (Storage::give_back): one copy of the weights stays resident, not
//   two. If a shim reads the constant again, its bytes are rebuilt from the
//   packed copy first.
// - The bias is fused into the primitive.
// Plans (primitives and their reorders) and streams are cached per thread;
// the weight cache is shared.
#include "shims/conv_onednn.h"

#include <sys/mman.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shims/onednn_api.h"

#if SHIMKIT_HAVE_ONEDNN
namespace shimkit {
namespace {

// A reorder from `from` to `to`.
Primitive make_reorder(const dnnl_memory_desc_t& from, const dnnl_memory_desc_t& to,
                       dnnl_memory_desc_t* scratch) {
  const Attr attr = user_scratchpad();
  dnnl_primitive_desc_t pd_raw = nullptr;
  onednn_check(onednn().dnnl_reorder_primitive_desc_create(&pd_raw, &from, cpu_engine(), &to,
                                                           cpu_engine(), attr.get()),
               "reorder");
  PrimitiveDesc pd(pd_raw);
  *scratch = *onednn().dnnl_primitive_desc_query_md(pd.get(), dnnl_query_scratchpad_md, 0);
  return make_primitive(pd.get());
}

// One reorder step: a primitive and its scratchpad's descriptor.
struct Reorder {
  Primitive primitive;
  dnnl_memory_desc_t scratch{};

  void run(dnnl_memory_t from, dnnl_memory_t to, const char* what) const {
    execute(primitive.get(), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, scratch, what);
  }
};

Reorder reorder(const dnnl_memory_desc_t& from, const dnnl_memory_desc_t& to) {
  Reorder r;
  r.primitive = make_reorder(from, to, &r.scratch);
  return r;
}

// The oneDNN view of the weight tensor: [OC, IC/g, *kernel] (grouped: one
// dim more, the group first); a transposed convolution's [IC, OC/g, *kernel]
// seen with its first two dims swapped, which is how oneDNN's deconvolution
// takes it.
dnnl_memory_desc_t user_weight_desc(const SlimTensor& w, int64_t groups, bool transposed) {
  const auto& sz = w.sizes();
  const auto& st = w.strides();
  const int64_t out_dim = transposed ? 1 : 0, in_dim = transposed ? 0 : 1;
  const int64_t oc_per_group = transposed ? sz[1] : sz[0] / groups;
  const int64_t ic_per_group = transposed ? sz[0] / groups : sz[1];
  std::vector<int64_t> dims{oc_per_group, ic_per_group}, strides{st[out_dim], st[in_dim]};
  for (int64_t d = 2; d < w.dim(); ++d) {
    dims.push_back(sz[d]);
    strides.push_back(st[d]);
  }
  if (groups > 1) {
    // Group g's slice starts g * (per-group count along the grouped dim) rows in.
    dims.insert(dims.begin(), groups);
    strides.insert(strides.begin(), transposed ? ic_per_group * st[0] : oc_per_group * st[0]);
  }
  return strided_desc(dims, strides);
}

// A primitive for one geometry, its layouts, and the reorders around it.
struct ConvPlan {
  PrimitiveDesc pd;
  Primitive conv;
  dnnl_memory_desc_t src_user{}, dst_user{}, weight_user{};
  dnnl_memory_desc_t src{}, dst{}, weight{}, bias{}, scratch{};
  bool reorder_src = false, reorder_dst = false, reorder_weight = false;
  Reorder src_in, dst_out, weight_in;
  // A transposed convolution whose output padding exceeds its padding: the
  // primitive writes the first `reach` elements of each spatial dim (depth,
  // height, width), the ones any input reaches; the rest hold the bias alone.
  bool has_tail = false;
  int64_t reach[kConvDims] = {};
};

std::unique_ptr<ConvPlan> make_plan(const ConvShape& s, const ConvParams& p, bool has_bias,
                                    const dnnl_memory_desc_t& weight_user,
                                    const ConvTranspose* transpose) {
  auto plan = std::make_unique<ConvPlan>();
  const std::vector<int64_t> src_dims = s.input_sizes();
  // ATen's right padding of a transposed convolution is its padding less the
  // output padding; oneDNN 2 refuses it negative. The output elements past
  // that padding are reached by no input: the primitive runs with no right
  // padding into the output's leading part (a view of the same memory), and
  // the caller writes the rest (fill_tail).
  std::copy(s.out, s.out + kConvDims, plan->reach);
  if (transpose != nullptr) {
    for (int d = 0; d < kConvDims; ++d) {
      const int64_t beyond = transpose->output_padding[d] - p.padding[d];
      if (beyond > 0) {
        plan->reach[d] -= beyond;
        plan->has_tail = true;
      }
    }
  }
  const std::vector<int64_t> dst_dims = s.output_sizes_within(plan->reach);
  plan->src_user = strided_desc(src_dims, s.dense_strides(src_dims));
  plan->dst_user = strided_desc(dst_dims, s.out_strides);
  plan->weight_user = weight_user;
  // channels_last runs in place; nchw lets oneDNN pick its blocked layout.
  const dnnl_memory_desc_t src_md =
      s.channels_last ? plan->src_user : tag_desc(src_dims, dnnl_format_tag_any);
  const dnnl_memory_desc_t dst_md =
      s.channels_last ? plan->dst_user : tag_desc(dst_dims, dnnl_format_tag_any);
  std::vector<int64_t> weight_dims(weight_user.dims, weight_user.dims + weight_user.ndims);
  const dnnl_memory_desc_t weight_md = tag_desc(weight_dims, dnnl_format_tag_any);
  const dnnl_memory_desc_t bias_md = tag_desc({s.oc}, dnnl_a);
  // oneDNN's spatial parameters: dilation counts the gaps (ATen's minus one);
  // right padding is ideep's for a convolution (exactly what the
  // floor-divided output size uses) and ATen's for a transposed one (the
  // padding less output_padding, at least 0: see `reach` above).
  dnnl_dims_t strides{}, dilates{}, pad_l{}, pad_r{};
  for (int i = 0; i < s.spatial; ++i) {
    const int d = first_used_dim(s.spatial) + i;
    strides[i] = p.stride[d];
    dilates[i] = p.dilation[d] - 1;
    pad_l[i] = p.padding[d];
    const int64_t extent = (s.kernel[d] - 1) * p.dilation[d] + 1;
    pad_r[i] = transpose == nullptr
                   ? (s.out[d] - 1) * p.stride[d] + extent - s.in[d] - p.padding[d]
                   : std::max<int64_t>(p.padding[d] - transpose->output_padding[d], 0);
  }
  const dnnl_memory_desc_t* bias_arg = has_bias ? &bias_md : nullptr;
  dnnl_convolution_desc_t desc;
  if (transpose == nullptr) {
    onednn_check(onednn().dnnl_dilated_convolution_forward_desc_init(
                     &desc, dnnl_forward_inference, dnnl_convolution_direct, &src_md, &weight_md,
                     bias_arg, &dst_md, strides, dilates, pad_l, pad_r),
                 "convolution descriptor");
  } else {
    onednn_check(onednn().dnnl_dilated_deconvolution_forward_desc_init(
                     &desc, dnnl_forward_inference, dnnl_deconvolution_direct, &src_md, &weight_md,
                     bias_arg, &dst_md, strides, dilates, pad_l, pad_r),
                 "transposed convolution descriptor");
  }
  const Attr attr = user_scratchpad();
  dnnl_primitive_desc_t pd = nullptr;
  const dnnl_status_t status =
      onednn().dnnl_primitive_desc_create(&pd, &desc, attr.get(), cpu_engine(), nullptr);
  if (status == dnnl_unimplemented) return nullptr;
  onednn_check(status, "convolution");
  plan->pd.reset(pd);
  auto md = [&](dnnl_query_t what) { return *onednn().dnnl_primitive_desc_query_md(pd, what, 0); };
  plan->src = md(dnnl_query_src_md);
  plan->dst = md(dnnl_query_dst_md);
  plan->weight = md(dnnl_query_weights_md);
  plan->bias = bias_md;
  plan->scratch = md(dnnl_query_scratchpad_md);
  plan->conv = make_primitive(pd);
  plan->reorder_src = !same(plan->src, plan->src_user);
  plan->reorder_dst = !same(plan->dst, plan->dst_user);
  plan->reorder_weight = !same(plan->weight, plan->weight_user);
  if (plan->reorder_src) plan->src_in = reorder(plan->src_user, plan->src);
  if (plan->reorder_dst) plan->dst_out = reorder(plan->dst, plan->dst_user);
  if (plan->reorder_weight) plan->weight_in = reorder(plan->weight_user, plan->weight);
  return plan;
}

// Plans of this thread, keyed by everything a plan depends on; null when
// oneDNN has no implementation for the case.
ConvPlan* thread_plan(const ConvShape& s, const ConvParams& p, bool has_bias,
                      const SlimTensor& weight, const ConvTranspose* transpose) {
  thread_local std::map<std::vector<int64_t>, std::unique_ptr<ConvPlan>> plans;
  std::vector<int64_t> key{s.n, s.c, s.oc, s.groups, s.spatial, s.channels_last, has_bias};
  for (const int64_t* values : {s.in, s.kernel, p.stride, p.padding, p.dilation}) {
    key.insert(key.end(), values, values + kConvDims);
  }
  for (int64_t st : weight.strides()) key.push_back(st);
  key.push_back(transpose != nullptr);
  if (transpose != nullptr) {
    key.insert(key.end(), transpose->output_padding, transpose->output_padding + kConvDims);
  }
  auto it = plans.find(key);
  if (it == plans.end()) {
    // A bounded cache: dynamic shapes can make many geometries.
    if (plans.size() >= 256) plans.clear();
    it =
        plans
            .emplace(std::move(key),
                     make_plan(s, p, has_bias,
                               user_weight_desc(weight, s.groups, transpose != nullptr), transpose))
            .first;
  }
  return it->second.get();
}

using SharedMemory = std::shared_ptr<std::remove_pointer_t<dnnl_memory_t>>;

// A weight reordered into a primitive's layout. Its storage holds the packed
// copy (Storage::keep_derived): the copy goes when the storage does.
struct PackedWeight {
  std::weak_ptr<Storage> storage;
  int64_t storage_offset;
  std::vector<int64_t> sizes, strides;
  dnnl_memory_desc_t desc;
  std::weak_ptr<std::remove_pointer_t<dnnl_memory_t>> packed;
};

class WeightCache {
 public:
  // The packed copy of `w` in `desc`, made by `pack` on a miss.
  template <typename Pack>
  SharedMemory get(const SlimTensor& w, const dnnl_memory_desc_t& desc, Pack&& pack) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto range = entries_.equal_range(w.storage().get());
    for (auto it = range.first; it != range.second; ++it) {
      const PackedWeight& e = it->second;
      if (e.storage.lock() == w.storage() && e.storage_offset == w.storage_offset() &&
          e.sizes == w.sizes().vec() && e.strides == w.strides().vec() && same(e.desc, desc)) {
        if (SharedMemory packed = e.packed.lock()) return packed;
      }
    }
    sweep();
    SharedMemory packed = pack();
    w.storage()->keep_derived(packed);
    entries_.emplace(w.storage().get(),
                     PackedWeight{w.storage(), w.storage_offset(), w.sizes().vec(),
                                  w.strides().vec(), desc, packed});
    return packed;
  }

 private:
  // Drops entries whose storage died (a closed model's constants): a new
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

// A new oneDNN-allocated memory in `md`.
Memory allocated(const dnnl_memory_desc_t& md) { return memory_at(md, DNNL_MEMORY_ALLOCATE); }

// New memory in `md` for a packed weight, held until the model closes: pages
// of its own (mmap), not the heap's. In the heap each packed weight would pin
// the space around it, and the first run's freed activations, packed in among
// them, would leave holes the next runs' activations do not fit.
SharedMemory packed_weight_memory(const dnnl_memory_desc_t& md) {
  const size_t nbytes = onednn().dnnl_memory_desc_get_size(&md);
  void* pages = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) throw std::bad_alloc();
  Memory memory;
  try {
    memory = memory_at(md, pages);
  } catch (...) {
    munmap(pages, nbytes);
    throw;
  }
  return SharedMemory(memory.release(), [pages, nbytes](dnnl_memory_t m) {
    onednn().dnnl_memory_destroy(m);
    munmap(pages, nbytes);
  });
}

// A constant weight's packed copy standing in for its plain bytes: a reorder
// back writes them again if anything reads the constant after it was given
// back.
class PackedWeightStandIn : public Storage::StandIn {
 public:
  PackedWeightStandIn(SharedMemory packed, const dnnl_memory_desc_t& packed_desc,
                      const dnnl_memory_desc_t& plain_desc)
      : packed_(std::move(packed)), packed_desc_(packed_desc), plain_desc_(plain_desc) {}

  void write_plain(void* data) const override {
    Memory plain = memory_at(plain_desc_, data);
    reorder(packed_desc_, plain_desc_).run(packed_.get(), plain.get(), "weight rebuild");
    onednn_check(onednn().dnnl_stream_wait(thread_stream()), "stream wait");
  }

 private:
  SharedMemory packed_;
  dnnl_memory_desc_t packed_desc_, plain_desc_;
};

// True if `t` views every byte of its storage once (offset 0, no gaps): then
// its packed copy can stand in for the whole storage.
bool covers_storage(const SlimTensor& t) {
  const int64_t span = checked_span_elements(t.sizes().data(), t.strides().data(), t.dim());
  return t.storage_offset() == 0 && span == t.numel() &&
         static_cast<size_t>(span) * t.itemsize() == t.storage()->nbytes();
}

// Plain bytes reordered per step when a weight is packed slice by slice.
constexpr int64_t kPackStepBytes = int64_t{1} << 20;

// Dim 0's inner block in a blocked layout (1 if dim 0 is not blocked).
int64_t dim0_block(const dnnl_memory_desc_t& md) {
  int64_t block = 1;
  const dnnl_blocking_desc_t& blocking = md.format_desc.blocking;
  for (int i = 0; i < blocking.inner_nblks; ++i) {
    if (blocking.inner_idxs[i] == 0) block *= blocking.inner_blks[i];
  }
  return block;
}

// How many rows of dim 0 are packed per step so that the plain pages behind
// each step can go back before the next one (1 MiB or the next whole block
// of `packed` along dim 0), or 0 if these layouts cannot be packed that way:
// the plain rows must be dim 0's outermost, dense, and the packed layout
// unpadded (a slice then writes exactly its own part of the packed copy).
int64_t pack_step_rows(const dnnl_memory_desc_t& plain, const dnnl_memory_desc_t& packed) {
  if (plain.format_kind != dnnl_blocked || packed.format_kind != dnnl_blocked) return 0;
  if (plain.format_desc.blocking.inner_nblks != 0 || plain.offset0 != 0 || packed.offset0 != 0) {
    return 0;
  }
  int64_t row = 1;  // elements per row of dim 0
  for (int d = 1; d < plain.ndims; ++d) row *= plain.dims[d];
  if (plain.format_desc.blocking.strides[0] != row) return 0;
  for (int d = 0; d < packed.ndims; ++d) {
    if (packed.padded_dims[d] != packed.dims[d] || packed.padded_offsets[d] != 0) return 0;
  }
  const int64_t block = dim0_block(packed);
  const int64_t row_bytes = row * static_cast<int64_t>(sizeof(float));
  return std::max<int64_t>(1, kPackStepBytes / row_bytes / block) * block;
}

// The first `rows` rows of dim 0 of `md`.
dnnl_memory_desc_t leading_rows(const dnnl_memory_desc_t& md, int64_t rows) {
  dnnl_dims_t dims, offsets{};
  std::copy(md.dims, md.dims + md.ndims, dims);
  dims[0] = rows;
  dnnl_memory_desc_t sub;
  onednn_check(onednn().dnnl_memory_desc_init_submemory(&sub, &md, dims, offsets), "weight slice");
  return sub;
}

// Reorders the weight at `plain` (plan.weight_user) into `packed`
// (plan.weight), slice by slice along dim 0 where the layouts allow it
// (pack_step_rows), telling `done` after each slice how many plain bytes it
// has read for the last time.
void pack_weight(const ConvPlan& plan, void* plain, dnnl_memory_t packed,
                 const Storage::DoneUpTo& done) {
  const dnnl_memory_desc_t& from = plan.weight_user;
  const dnnl_memory_desc_t& to = plan.weight;
  const int64_t rows = from.dims[0];
  const int64_t step = pack_step_rows(from, to);
  if (step == 0 || step >= rows) {
    Memory user = memory_at(from, plain);
    plan.weight_in.run(user.get(), packed, "weight reorder");
    onednn_check(onednn().dnnl_stream_wait(thread_stream()), "stream wait");
    return;
  }
  // Every slice but the last has `step` rows: one reorder serves them all,
  // each at its own addresses. Both are made before the first page goes back.
  struct Slice {
    dnnl_memory_desc_t from, to;
    Reorder reorder;
  };
  auto slice_of = [&](int64_t n) {
    Slice slice{leading_rows(from, n), leading_rows(to, n), {}};
    slice.reorder = reorder(slice.from, slice.to);
    return slice;
  };
  const Slice full = slice_of(step);
  const Slice tail = slice_of(rows % step == 0 ? step : rows % step);
  void* packed_base = nullptr;
  onednn_check(onednn().dnnl_memory_get_data_handle(packed, &packed_base), "packed weight");
  const int64_t plain_row = from.format_desc.blocking.strides[0];
  const int64_t block = dim0_block(to);
  for (int64_t r = 0; r < rows; r += step) {
    const int64_t n = std::min(step, rows - r);
    const Slice& slice = n == step ? full : tail;
    // Row r (a whole block in) starts r / block outer blocks into the packed copy.
    Memory from_rows = memory_at(slice.from, static_cast<float*>(plain) + r * plain_row);
    Memory to_rows = memory_at(slice.to, static_cast<float*>(packed_base) +
                                             r / block * to.format_desc.blocking.strides[0]);
    slice.reorder.run(from_rows.get(), to_rows.get(), "weight reorder");
    onednn_check(onednn().dnnl_stream_wait(thread_stream()), "stream wait");
    done(static_cast<size_t>((r + n) * plain_row) * sizeof(float));
  }
}

// `weight` (borrowed storage) packed into the plan's layout. A constant's
// packed copy then stands in for its plain bytes, which go back to the
// system slice by slice as they are packed: the model keeps one copy of its
// convolution weights, not two, even while it packs them.
SharedMemory pack_borrowed(const ConvPlan& plan, const SlimTensor& weight) {
  void* plain = weight.data_ptr();
  SharedMemory packed = packed_weight_memory(plan.weight);
  auto make = [&](const Storage::DoneUpTo& done) { pack_weight(plan, plain, packed.get(), done); };
  const bool stood_in =
      covers_storage(weight) &&
      weight.storage()->give_back(
          std::make_shared<PackedWeightStandIn>(packed, plan.weight, plan.weight_user), make);
  if (!stood_in) make([](size_t) {});
  return packed;
}

// True if `t` is laid out densely with `canonical` strides (size-1 dims may
// have any stride: they never move the address).
bool dense_as(const SlimTensor& t, const std::vector<int64_t>& canonical) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] != 1 && t.strides()[d] != canonical[d]) return false;
  }
  return true;
}

// Writes the bias (or 0) to the output elements past `reach` in any spatial
// dim: those no input of a transposed convolution reaches.
void fill_tail(const SlimTensor& out, const ConvShape& s, const int64_t reach[kConvDims],
               const SlimTensor* bias) {
  float* o = static_cast<float*>(out.data_ptr());
  const auto& st = out.strides();
  int64_t at[kConvDims] = {0, 0, 0};  // spatial strides, depth first (0 for 4-D depth)
  for (int i = 0; i < s.spatial; ++i) at[first_used_dim(s.spatial) + i] = st[2 + i];
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t c = 0; c < s.oc; ++c) {
      const float value = bias != nullptr ? static_cast<const float*>(bias->data_ptr())[c] : 0.0f;
      float* plane = o + n * st[0] + c * st[1];
      for (int64_t z = 0; z < s.out[0]; ++z) {
        for (int64_t y = 0; y < s.out[1]; ++y) {
          for (int64_t x = 0; x < s.out[2]; ++x) {
            if (z >= reach[0] || y >= reach[1] || x >= reach[2]) {
              plane[z * at[0] + y * at[1] + x * at[2]] = value;
            }
          }
        }
      }
    }
  }
}

}  // namespace

bool onednn_convolution(const SlimTensor& input_in, const SlimTensor& weight,
                        const SlimTensor* bias, const ConvParams& p, const ConvShape& s,
                        const SlimTensor& out, const ConvTranspose* transpose) {
  if (!onednn().ok) return false;
  if (input_in.dtype() != dtype::kFloat32 || weight.dtype() != dtype::kFloat32) return false;
  ConvPlan* plan = thread_plan(s, p, bias != nullptr, weight, transpose);
  if (plan == nullptr) return false;
  const std::vector<int64_t> in_sizes = s.input_sizes();
  const std::vector<int64_t> want = s.dense_strides(in_sizes);
  // Inputs that are neither dense channels-last nor dense contiguous are
  // copied into the output's format first.
  SlimTensor input = input_in;
  if (!dense_as(input_in, want)) {
    input = SlimTensor::empty(in_sizes.data(), want.data(), s.spatial + 2, dtype::kFloat32,
                              device::kCPU, -1);
    copy_elements(input, input_in);
  }

  // A cached packed weight is used without reading the plain bytes: they
  // may have gone back to the system (pack_borrowed).
  SharedMemory weight_packed;
  Memory weight_user, weight_temp;
  dnnl_memory_t weight_mem = nullptr;
  if (plan->reorder_weight && weight.storage() && !weight.storage()->owns()) {
    weight_packed =
        weight_cache().get(weight, plan->weight, [&]() { return pack_borrowed(*plan, weight); });
    weight_mem = weight_packed.get();
  } else {
    weight_user = memory_at(plan->weight_user, weight.data_ptr());
    weight_mem = weight_user.get();
    if (plan->reorder_weight) {
      weight_temp = allocated(plan->weight);
      plan->weight_in.run(weight_user.get(), weight_temp.get(), "weight reorder");
      weight_mem = weight_temp.get();
    }
  }
  Memory src_user = memory_at(plan->src_user, input.data_ptr());
  Memory src_temp;
  dnnl_memory_t src_mem = src_user.get();
  if (plan->reorder_src) {
    src_temp = allocated(plan->src);
    plan->src_in.run(src_user.get(), src_temp.get(), "input reorder");
    src_mem = src_temp.get();
  }
  Memory dst_user = memory_at(plan->dst_user, out.data_ptr());
  Memory dst_temp = plan->reorder_dst ? allocated(plan->dst) : Memory();
  dnnl_memory_t dst_mem = plan->reorder_dst ? dst_temp.get() : dst_user.get();

  std::vector<dnnl_exec_arg_t> args{
      {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, weight_mem}, {DNNL_ARG_DST, dst_mem}};
  SlimTensor bias_dense;
  Memory bias_mem;
  if (bias != nullptr) {
    check_conv_bias(*bias, s.oc);
    bias_dense = *bias;
    if (bias->strides()[0] != 1 && s.oc > 1) {
      bias_dense = SlimTensor::empty(&s.oc, nullptr, 1, dtype::kFloat32, device::kCPU, -1);
      copy_elements(bias_dense, *bias);
    }
    bias_mem = memory_at(plan->bias, bias_dense.data_ptr());
    args.push_back({DNNL_ARG_BIAS, bias_mem.get()});
  }
  execute(plan->conv.get(), args, plan->scratch, "convolution");
  if (plan->reorder_dst) plan->dst_out.run(dst_mem, dst_user.get(), "output reorder");
  onednn_check(onednn().dnnl_stream_wait(thread_stream()), "stream wait");
  if (plan->has_tail) fill_tail(out, s, plan->reach, bias != nullptr ? &bias_dense : nullptr);
  return true;
}

}  // namespace shimkit

#else  // built without oneDNN 2.x headers (onednn_api.h): the caller convolves another way

namespace shimkit {

bool onednn_convolution(const SlimTensor&, const SlimTensor&, const SlimTensor*, const ConvParams&,
                        const ConvShape&, const SlimTensor&, const ConvTranspose*) {
  return false;
}

}  // namespace shimkit

#endif  // SHIMKIT_HAVE_ONEDNN
