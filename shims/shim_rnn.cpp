// Slim CPU recurrent layer: aoti_torch_cpu_mkldnn_rnn_layer, what Inductor
// emits for each layer and direction of an nn.LSTM on the CPU (the
// decomposition in torch/_decomp/decompositions.py, mkldnn_one_layer_lstm).
// Only LSTM exists on that path (mode 2); GRU and plain RNN layers are
// decomposed into GEMMs and generated kernels, which the slim shims already
// serve.
//
// One GEMM projects every time step's input at once (x @ W_ih^T + b_ih + b_hh);
// then each step adds h @ W_hh^T (one small GEMM) and applies the gates in
// PyTorch's order (input, forget, cell, output). OpenBLAS does the GEMMs:
// oneDNN's LSTM primitive would need its own weight layout and gate order,
// reordered per call, for no gain at the batch sizes of inference.
#include <cblas.h>

#include <cmath>
#include <string>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

constexpr int64_t kModeLstm = 2;  // ideep::rnn_kind::LSTM

inline void gemm_nt(int m, int n, int k, const float* a, const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, beta, c, n);
}
inline void gemm_nt(int m, int n, int k, const double* a, const double* b, double beta, double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, a, k, b, k, beta, c, n);
}

template <typename Acc>
Acc sigmoid(Acc x) {
  return Acc(1) / (Acc(1) + std::exp(-x));
}

// The elements of `t` (any strides) as a dense row-major Acc vector.
template <typename T, typename Acc>
std::vector<Acc> dense(const SlimTensor& t) {
  std::vector<Acc> out;
  out.reserve(static_cast<size_t>(t.numel()));
  const T* base = static_cast<const T*>(t.data_ptr());
  for_each_offset(
      t, [&](int64_t off) { out.push_back(static_cast<Acc>(Scalar<T>::load(base + off))); });
  return out;
}

template <typename T>
void store_dense(
    const SlimTensor& t,
    const std::vector<std::conditional_t<std::is_same_v<T, double>, double, float>>& values) {
  T* out = static_cast<T*>(t.data_ptr());  // a fresh contiguous tensor
  for (size_t i = 0; i < values.size(); ++i) Scalar<T>::store(out + i, values[i]);
}

struct LstmArgs {
  int64_t steps, batch, input_size, hidden;
  bool reverse, batch_first, has_biases;
};

template <typename T>
void lstm_layer(const SlimTensor& x, const SlimTensor& w_ih, const SlimTensor& w_hh,
                const SlimTensor& b_ih, const SlimTensor& b_hh, const SlimTensor& hx,
                const SlimTensor& cx, const LstmArgs& a, const SlimTensor& out,
                const SlimTensor& hy, const SlimTensor& cy) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t T_ = a.steps, B = a.batch, I = a.input_size, H = a.hidden, G = 4 * H;
  const std::vector<Acc> xs = dense<T, Acc>(x);  // [T, B, I] or [B, T, I]
  const std::vector<Acc> wi = dense<T, Acc>(w_ih), wh = dense<T, Acc>(w_hh);
  std::vector<Acc> bias(static_cast<size_t>(G), Acc(0));
  if (a.has_biases) {
    const std::vector<Acc> bi = dense<T, Acc>(b_ih), bh = dense<T, Acc>(b_hh);
    for (int64_t g = 0; g < G; ++g) bias[g] = bi[g] + bh[g];
  }
  std::vector<Acc> h = dense<T, Acc>(hx), c = dense<T, Acc>(cx);  // [1, B, H]
  // Input projection of every (step, batch) row at once: rows in x's order.
  std::vector<Acc> proj(static_cast<size_t>(T_ * B * G));
  blas_threads_for(2.0 * static_cast<double>(T_ * B) * static_cast<double>(G) *
                   static_cast<double>(I));
  if (T_ * B > 0 && I > 0) {
    gemm_nt(static_cast<int>(T_ * B), static_cast<int>(G), static_cast<int>(I), xs.data(),
            wi.data(), Acc(0), proj.data());
  }
  std::vector<Acc> gates(static_cast<size_t>(B * G));
  std::vector<Acc> ys(static_cast<size_t>(T_ * B * H));
  blas_threads_for(2.0 * static_cast<double>(B) * static_cast<double>(G) * static_cast<double>(H));
  for (int64_t s = 0; s < T_; ++s) {
    const int64_t t = a.reverse ? T_ - 1 - s : s;
    // Row of (t, b) in x's (and the output's) layout.
    auto row = [&](int64_t b) { return a.batch_first ? b * T_ + t : t * B + b; };
    if (H > 0) {
      gemm_nt(static_cast<int>(B), static_cast<int>(G), static_cast<int>(H), h.data(), wh.data(),
              Acc(0), gates.data());
    }
    for (int64_t b = 0; b < B; ++b) {
      const Acc* p = proj.data() + row(b) * G;
      Acc* g = gates.data() + b * G;
      for (int64_t j = 0; j < H; ++j) {
        const Acc in = sigmoid(g[j] + p[j] + bias[j]);
        const Acc forget = sigmoid(g[H + j] + p[H + j] + bias[H + j]);
        const Acc cell = std::tanh(g[2 * H + j] + p[2 * H + j] + bias[2 * H + j]);
        const Acc outg = sigmoid(g[3 * H + j] + p[3 * H + j] + bias[3 * H + j]);
        Acc& cj = c[b * H + j];
        cj = forget * cj + in * cell;
        const Acc hj = outg * std::tanh(cj);
        h[b * H + j] = hj;
        ys[row(b) * H + j] = hj;
      }
    }
  }
  store_dense<T>(out, ys);
  store_dense<T>(hy, h);
  store_dense<T>(cy, c);
}

void check_shape(const SlimTensor& t, std::initializer_list<int64_t> sizes, const char* what) {
  bool ok = t.dim() == static_cast<int64_t>(sizes.size());
  int64_t d = 0;
  for (int64_t s : sizes) ok = ok && t.sizes()[d++] == s;
  if (!ok) throw ShimError(std::string("mkldnn_rnn_layer: ") + what + " has the wrong shape");
}

}  // namespace
}  // namespace shimkit

extern "C" AOTITorchError aoti_torch_cpu_mkldnn_rnn_layer(
    AtenTensorHandle input, AtenTensorHandle weight0, AtenTensorHandle weight1,
    AtenTensorHandle weight2, AtenTensorHandle weight3, AtenTensorHandle hx_, AtenTensorHandle cx_,
    int32_t reverse, const int64_t* batch_sizes, int64_t batch_sizes_len_, int64_t mode,
    int64_t hidden_size, int64_t num_layers, int32_t has_biases, int32_t bidirectional,
    int32_t batch_first, int32_t train, AtenTensorHandle* ret0, AtenTensorHandle* ret1,
    AtenTensorHandle* ret2, AtenTensorHandle* ret3) {
  (void)batch_sizes;
  (void)bidirectional;  // one direction per call; `reverse` says which
  // Not SHIMKIT_GUARD: the body's braced lists have commas a macro would split.
  return shimkit::guard(__func__, [&]() {
    using shimkit::ShimError;
    using shimkit::SlimTensor;
    for (AtenTensorHandle* r : {ret0, ret1, ret2, ret3}) shimkit::check_out(r);
    if (mode != shimkit::kModeLstm) {
      throw ShimError("mkldnn_rnn_layer: mode " + std::to_string(mode) + " is not LSTM (2)");
    }
    if (batch_sizes_len_ != 0) throw ShimError("mkldnn_rnn_layer: packed sequences unsupported");
    if (num_layers != 1) throw ShimError("mkldnn_rnn_layer: computes one layer per call");
    if (train != 0) throw ShimError("mkldnn_rnn_layer: training is not supported");
    const SlimTensor& x = shimkit::as_tensor(input);
    if (x.dim() != 3) throw ShimError("mkldnn_rnn_layer: input must be 3-D");
    shimkit::LstmArgs a{};
    a.batch_first = batch_first != 0;
    a.steps = x.sizes()[a.batch_first ? 1 : 0];
    a.batch = x.sizes()[a.batch_first ? 0 : 1];
    a.input_size = x.sizes()[2];
    a.hidden = hidden_size;
    a.reverse = reverse != 0;
    a.has_biases = has_biases != 0;
    const SlimTensor& w_ih = shimkit::as_tensor(weight0);
    const SlimTensor& w_hh = shimkit::as_tensor(weight1);
    const SlimTensor& b_ih = shimkit::as_tensor(weight2);
    const SlimTensor& b_hh = shimkit::as_tensor(weight3);
    const SlimTensor& hx = shimkit::as_tensor(hx_);
    const SlimTensor& cx = shimkit::as_tensor(cx_);
    const int64_t G = 4 * a.hidden;
    shimkit::check_shape(w_ih, {G, a.input_size}, "weight0 (W_ih)");
    shimkit::check_shape(w_hh, {G, a.hidden}, "weight1 (W_hh)");
    if (a.has_biases) {
      shimkit::check_shape(b_ih, {G}, "weight2 (b_ih)");
      shimkit::check_shape(b_hh, {G}, "weight3 (b_hh)");
    }
    shimkit::check_shape(hx, {1, a.batch, a.hidden}, "hx");
    shimkit::check_shape(cx, {1, a.batch, a.hidden}, "cx");
    for (const SlimTensor* t : {&w_ih, &w_hh, &hx, &cx}) {
      if (t->dtype() != x.dtype()) throw ShimError("mkldnn_rnn_layer: dtypes differ");
    }
    if (a.has_biases && (b_ih.dtype() != x.dtype() || b_hh.dtype() != x.dtype())) {
      throw ShimError("mkldnn_rnn_layer: dtypes differ");
    }
    const int64_t out_sizes[3] = {a.batch_first ? a.batch : a.steps,
                                  a.batch_first ? a.steps : a.batch, a.hidden};
    SlimTensor out =
        SlimTensor::empty(out_sizes, nullptr, 3, x.dtype(), x.device_type(), x.device_index());
    SlimTensor hy = SlimTensor::empty(hx.sizes().data(), nullptr, 3, x.dtype(), x.device_type(),
                                      x.device_index());
    SlimTensor cy = SlimTensor::empty(cx.sizes().data(), nullptr, 3, x.dtype(), x.device_type(),
                                      x.device_index());
    shimkit::dispatch_floating(x.dtype(), "mkldnn_rnn_layer", [&](auto tag) {
      shimkit::lstm_layer<decltype(tag)>(x, w_ih, w_hh, b_ih, b_hh, hx, cx, a, out, hy, cy);
    });
    // The workspace is for training; inference returns an empty one (the meta
    // function's uint8 [0]).
    const int64_t zero = 0;
    SlimTensor workspace = SlimTensor::empty(&zero, nullptr, 1, shimkit::dtype::kUInt8,
                                             x.device_type(), x.device_index());
    *ret0 = shimkit::to_handle(std::move(out));
    *ret1 = shimkit::to_handle(std::move(hy));
    *ret2 = shimkit::to_handle(std::move(cy));
    *ret3 = shimkit::to_handle(std::move(workspace));
  });
}
