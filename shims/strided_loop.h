// One loop over every position of a shape, in row-major order, tracking the
// element offset of that position in several tensors at once (each with its
// own strides). Kernels that accept any strides build on it.
#ifndef SHIMKIT_SHIMS_STRIDED_LOOP_H_
#define SHIMKIT_SHIMS_STRIDED_LOOP_H_

#include <array>
#include <cstdint>
#include <vector>

#include "shims/slim_tensor.h"

namespace shimkit {

// Calls fn(pos, offsets) for every position `pos` (a vector of coordinates) of
// `sizes`; offsets[k] = sum(pos[d] * strides[k][d]). Dimension `skip` (if
// in range) is held at 0: fn then sees one position per slice along it.
template <size_t N, typename F>
void for_each_position(const std::vector<int64_t>& sizes,
                       const std::array<const int64_t*, N>& strides, F&& fn, int64_t skip = -1) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  for (int64_t d = 0; d < nd; ++d) {
    if (d != skip && sizes[d] == 0) return;
  }
  std::vector<int64_t> pos(static_cast<size_t>(nd), 0);
  std::array<int64_t, N> off{};
  while (true) {
    fn(pos, off);
    int64_t d = nd - 1;
    for (; d >= 0; --d) {
      if (d == skip) continue;
      if (++pos[d] < sizes[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= (sizes[d] - 1) * strides[k][d];
      pos[d] = 0;
    }
    if (d < 0) return;
  }
}

// The same over one tensor's own sizes and strides.
template <typename F>
void for_each_offset(const SlimTensor& t, F&& fn) {
  for_each_position<1>(
      t.sizes().vec(), {t.strides().data()},
      [&](const std::vector<int64_t>&, const std::array<int64_t, 1>& off) { fn(off[0]); });
}

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_STRIDED_LOOP_H_
