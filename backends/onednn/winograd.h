// File: backends/onednn/winograd.h — an f32 3x3 stride-1 convolution by
// Winograd's minimal filtering F(2x2, 3x3) on channel-blocked activations
// (nChw8c / nChw16c) or channels-last ones, for CPUs where oneDNN 2.6 has no Winograd kernel
// (its are AVX-512 only).
//
// The conv becomes three steps per call:
//   1. input transform (Highway): every 4x4 input tile d, per channel,
//      becomes V = B^T d B, written as 16 matrices [tiles][IC];
//   2. one batched oneDNN matmul: M[k] = V[k] x U[k] for the 16 positions k,
//      with U = G g G^T, the weights transformed and prepacked once;
//   3. output transform (Highway): Y = A^T M A gives each 2x2 output tile,
//      written in the dst's channel-blocked layout.
// 2.25x fewer multiply-adds than the direct conv; the transforms' entries
// are 0, +-1 and 1/2, so rounding stays near the direct kernel's.
//
//   KILN_ASSIGN_OR_RETURN(auto conv, WinogradConv::Create(shape, weights));
//   conv->Run(src, dst);  // dst = conv(src) without bias
//
// Bias and post-ops are not applied here: OneDnnCall applies them with a
// oneDNN binary primitive (docs/decisions/0080).
#ifndef KILN_BACKENDS_ONEDNN_WINOGRAD_H_
#define KILN_BACKENDS_ONEDNN_WINOGRAD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kiln::onednn {

struct WinogradShape {
  int64_t batch = 1;
  int64_t in_channels = 0;   // a multiple of `block`
  int64_t out_channels = 0;  // a multiple of `block`
  int64_t in_h = 0, in_w = 0;
  int64_t out_h = 0, out_w = 0;  // in + pads - 2, each at least 1
  int64_t pad_top = 0, pad_left = 0;  // 0, 1 or 2
  // Activation layout: channels_last (NHWC) or channel-blocked by `block`,
  // 8 (nChw8c) or 16 (nChw16c). Channels-last works on `block` channels at
  // a time, so both channel counts must be multiples of it either way.
  bool channels_last = false;
  int64_t block = 8;
};

// Why a class: the transformed, prepacked weights and the matmul primitive
// are built once and live as long as the compiled model. Run uses a scratch
// buffer per calling thread, so distinct objects may run concurrently on
// distinct threads; one object must not.
class WinogradConv {
 public:
  // `weights`: [out_channels, in_channels, 3, 3] f32, read only here.
  // InvalidArgument for a shape outside WinogradShape's comments.
  static absl::StatusOr<std::unique_ptr<WinogradConv>> Create(const WinogradShape& shape,
                                                              const float* weights);
  ~WinogradConv();
  WinogradConv(const WinogradConv&) = delete;
  WinogradConv& operator=(const WinogradConv&) = delete;

  // src: [batch][in_channels / block][in_h][in_w][block] (channels_last:
  // [batch][in_h][in_w][in_channels]); dst likewise, overwritten with the
  // convolution (no bias). Throws dnnl::error if the matmul fails.
  void Run(const float* src, float* dst);

  const WinogradShape& shape() const;
  // Bytes of the transformed, prepacked weights.
  int64_t weights_bytes() const;
  // Bytes of the per-thread scratch one Run needs (V and M).
  int64_t scratch_bytes() const;
  // The matmul's oneDNN implementation, e.g. "gemm:jit".
  const std::string& matmul_impl() const;

 private:
  struct Impl;
  explicit WinogradConv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::onednn

#endif  // KILN_BACKENDS_ONEDNN_WINOGRAD_H_
