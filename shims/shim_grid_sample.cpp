// Slim CPU volumetric grid sampling: grid_sampler_3d (F.grid_sample on 5-D
// input), which Inductor leaves to a fallback (its 2-D form it generates
// itself). input [N, C, D, H, W] is sampled at grid [N, D', H', W', 3]
// (x, y, z in [-1, 1], x along W) into a contiguous [N, C, D', H', W'].
// Trilinear (mode 0) or nearest (mode 1) interpolation, zeros (0), border
// (1) or reflection (2) padding, align_corners: the arithmetic of ATen's CPU
// kernel, step for step (its corner weights and their order of summation),
// so results agree to the last bit in float32 and float64.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "shims/shim_internal.h"

namespace shimkit {
namespace {

enum Interpolation : int64_t { kTrilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

template <typename T>
T unnormalize(T coord, int64_t size, bool align_corners) {
  // [-1, 1] onto the centres of the corner voxels, or onto their outer edges.
  return align_corners ? ((coord + 1) / 2) * static_cast<T>(size - 1)
                       : ((coord + 1) * static_cast<T>(size) - 1) / 2;
}

template <typename T>
T clip(T coord, int64_t size) {
  return std::min(static_cast<T>(size - 1), std::max(coord, static_cast<T>(0)));
}

// Reflects `coord` into [twice_low / 2, twice_high / 2] (ATen's reflect_coordinates).
template <typename T>
T reflect(T coord, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return static_cast<T>(0);
  const T low = static_cast<T>(twice_low) / 2;
  const T span = static_cast<T>(twice_high - twice_low) / 2;
  coord = std::fabs(coord - low);
  const T extra = std::fmod(coord, span);
  const int flips = static_cast<int>(std::floor(coord / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

// The voxel coordinate a grid value samples along a dim of `size` voxels.
template <typename T>
T source_index(T coord, int64_t size, int64_t padding, bool align_corners) {
  coord = unnormalize(coord, size, align_corners);
  if (padding == kBorder) {
    coord = clip(coord, size);
  } else if (padding == kReflection) {
    coord = align_corners ? reflect(coord, 0, 2 * (size - 1)) : reflect(coord, -1, 2 * size - 1);
    coord = clip(coord, size);
  }
  // Out of int range or not finite: a coordinate no voxel has (ATen's
  // safe_downgrade_to_int_range), so the sample reads nothing.
  if (coord > static_cast<T>(INT_MAX - 1) || coord < static_cast<T>(INT_MIN) ||
      !std::isfinite(static_cast<double>(coord))) {
    return static_cast<T>(-100);
  }
  return coord;
}

template <typename T>
void sample(const SlimTensor& input, const SlimTensor& grid, int64_t mode, int64_t padding,
            bool align_corners, SlimTensor& out) {
  const int64_t n_batch = input.sizes()[0], channels = input.sizes()[1];
  const int64_t in_d = input.sizes()[2], in_h = input.sizes()[3], in_w = input.sizes()[4];
  const int64_t out_d = grid.sizes()[1], out_h = grid.sizes()[2], out_w = grid.sizes()[3];
  const int64_t* is = input.strides().data();
  const int64_t* gs = grid.strides().data();
  const int64_t* os = out.strides().data();
  const T* in = static_cast<const T*>(input.data_ptr());
  const T* g = static_cast<const T*>(grid.data_ptr());
  T* o = static_cast<T*>(out.data_ptr());
  auto inside = [&](int64_t z, int64_t y, int64_t x) {
    return z >= 0 && z < in_d && y >= 0 && y < in_h && x >= 0 && x < in_w;
  };
  for (int64_t n = 0; n < n_batch; ++n) {
    const T* in_n = in + n * is[0];
    for (int64_t d = 0; d < out_d; ++d) {
      for (int64_t h = 0; h < out_h; ++h) {
        for (int64_t w = 0; w < out_w; ++w) {
          const T* at = g + n * gs[0] + d * gs[1] + h * gs[2] + w * gs[3];
          const T ix = source_index(at[0], in_w, padding, align_corners);
          const T iy = source_index(at[gs[4]], in_h, padding, align_corners);
          const T iz = source_index(at[2 * gs[4]], in_d, padding, align_corners);
          T* out_at = o + n * os[0] + d * os[2] + h * os[3] + w * os[4];
          if (mode == kNearest) {
            const auto x = static_cast<int64_t>(std::nearbyint(ix));
            const auto y = static_cast<int64_t>(std::nearbyint(iy));
            const auto z = static_cast<int64_t>(std::nearbyint(iz));
            const bool hit = inside(z, y, x);
            for (int64_t c = 0; c < channels; ++c) {
              out_at[c * os[1]] = hit ? in_n[c * is[1] + z * is[2] + y * is[3] + x * is[4]] : T(0);
            }
            continue;
          }
          // The eight corners around (ix, iy, iz): top/bottom along z,
          // north/south along y, west/east along x, each weighted by the
          // volume of the box opposite it.
          const auto x0 = static_cast<int64_t>(std::floor(ix));
          const auto y0 = static_cast<int64_t>(std::floor(iy));
          const auto z0 = static_cast<int64_t>(std::floor(iz));
          const int64_t x1 = x0 + 1, y1 = y0 + 1, z1 = z0 + 1;
          const int64_t corner[8][3] = {{z0, y0, x0}, {z0, y0, x1}, {z0, y1, x0}, {z0, y1, x1},
                                        {z1, y0, x0}, {z1, y0, x1}, {z1, y1, x0}, {z1, y1, x1}};
          const T weight[8] = {
              (x1 - ix) * (y1 - iy) * (z1 - iz), (ix - x0) * (y1 - iy) * (z1 - iz),
              (x1 - ix) * (iy - y0) * (z1 - iz), (ix - x0) * (iy - y0) * (z1 - iz),
              (x1 - ix) * (y1 - iy) * (iz - z0), (ix - x0) * (y1 - iy) * (iz - z0),
              (x1 - ix) * (iy - y0) * (iz - z0), (ix - x0) * (iy - y0) * (iz - z0)};
          for (int64_t c = 0; c < channels; ++c) {
            const T* in_c = in_n + c * is[1];
            T acc = 0;
            for (int k = 0; k < 8; ++k) {
              const int64_t z = corner[k][0], y = corner[k][1], x = corner[k][2];
              if (inside(z, y, x)) acc += in_c[z * is[2] + y * is[3] + x * is[4]] * weight[k];
            }
            out_at[c * os[1]] = acc;
          }
        }
      }
    }
  }
}

SlimTensor run_grid_sampler_3d(const SlimTensor& input, const SlimTensor& grid, int64_t mode,
                               int64_t padding, bool align_corners) {
  if (input.dim() != 5 || grid.dim() != 5) {
    throw ShimError("grid_sampler_3d: expected 5-D input and grid, got " +
                    std::to_string(input.dim()) + "-D and " + std::to_string(grid.dim()) + "-D");
  }
  if (grid.sizes()[4] != 3) {
    throw ShimError("grid_sampler_3d: the grid's last dim must be 3 (x, y, z), got " +
                    std::to_string(grid.sizes()[4]));
  }
  if (grid.sizes()[0] != input.sizes()[0]) {
    throw ShimError("grid_sampler_3d: input and grid batch sizes differ");
  }
  if (input.dtype() != grid.dtype() ||
      (input.dtype() != dtype::kFloat32 && input.dtype() != dtype::kFloat64)) {
    throw ShimError("grid_sampler_3d: input and grid must both be float32 or both float64");
  }
  for (int d = 2; d < 5; ++d) {
    if (input.sizes()[d] <= 0) throw ShimError("grid_sampler_3d: empty spatial input");
  }
  if (mode == kBicubic) {
    throw ShimError("grid_sampler_3d: bicubic interpolation only supports 4-D input");
  }
  if (mode != kTrilinear && mode != kNearest) {
    throw ShimError("grid_sampler_3d: unknown interpolation mode " + std::to_string(mode));
  }
  if (padding != kZeros && padding != kBorder && padding != kReflection) {
    throw ShimError("grid_sampler_3d: unknown padding mode " + std::to_string(padding));
  }
  const int64_t sizes[5] = {input.sizes()[0], input.sizes()[1], grid.sizes()[1], grid.sizes()[2],
                            grid.sizes()[3]};
  SlimTensor out = SlimTensor::empty(sizes, nullptr, 5, input.dtype(), input.device_type(),
                                     input.device_index());
  if (input.dtype() == dtype::kFloat32) {
    sample<float>(input, grid, mode, padding, align_corners, out);
  } else {
    sample<double>(input, grid, mode, padding, align_corners, out);
  }
  return out;
}

}  // namespace
}  // namespace shimkit

extern "C" {

AOTITorchError aoti_torch_cpu_grid_sampler_3d(AtenTensorHandle input, AtenTensorHandle grid,
                                              int64_t interpolation_mode, int64_t padding_mode,
                                              int32_t align_corners, AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(
        shimkit::run_grid_sampler_3d(shimkit::as_tensor(input), shimkit::as_tensor(grid),
                                     interpolation_mode, padding_mode, align_corners != 0));
  });
}

}  // extern "C"
