// RnnSequence: packs an ONNX LSTM's or GRU's weights for one projection
// matmul (oneDNN) and for the recurrence, a Highway kernel compiled for
// every x86 target Highway knows and picked at run time
// (hwy/foreach_target.h).
//
// Packed layouts, with G gates (LSTM 4: i, o, f, c; GRU 3: z, r, h),
// U = 2 vectors of the chosen target (32 floats on AVX-512) and Hp = H
// rounded up to U, NB = Hp / U hidden blocks:
// - projection weights [I, D*NB*G*U]: column ((d*NB + b)*G + g)*U + u is
//   gate g of hidden unit b*U + u, so XW's row for one step holds, per
//   direction and block, the G gates' U units together; the bias is laid
//   out alike (Wb + Rb, but only Wbh for a linear-before-reset GRU's
//   candidate, whose Rbh is kept apart: it goes inside the reset product);
//   padding units are zero.
// - recurrence weights per direction [NB][H][G][U]: for block b and input
//   unit k, the G*U weights the step kernel multiplies by h[k], contiguous.
// The step kernels keep a block's gates x 2 vectors in accumulators over
// the whole product (one pass; a GRU with linear_before_reset=0 needs two:
// z and r first, then the candidate's product with r * h), then apply the
// gate math in registers: no [N, G*H] gate buffer is written per step.
// Padding units stay zero in h (their pre-activations are all zero).
// 8-bit recurrent weights (an LSTM's, QuantizedRecurrence) keep the same
// [NB][H][G][U] layout as int8 (uint8 shifted by -128, its zero point
// too: exact), with per-column f32 scales and zero points [NB][G][U]; the
// step widens them to f32 in registers, sums h[k] * q over k, subtracts
// zp * sum(h) and multiplies by the scale once per column.
#include "backends/onednn/rnn_sequence.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/onednn/rnn_sequence.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef KILN_BACKENDS_ONEDNN_RNN_SEQUENCE_ONCE_
#define KILN_BACKENDS_ONEDNN_RNN_SEQUENCE_ONCE_
namespace kiln::onednn::rnn_sequence_internal {

// One direction's recurrence over the whole sequence.
struct StepArgs {
  SequenceCell cell = SequenceCell::kLstm;
  int64_t seq = 0, batch = 0, hidden = 0, hidden_padded = 0;
  int64_t dirs = 1, dir = 0;
  bool reverse = false;
  const float* xw = nullptr;  // row (t*N + n) at xw + (t*N + n)*xw_stride
  int64_t xw_stride = 0;      // this direction's columns start at xw
  const float* r = nullptr;   // [NB][H][G][U]
  const int8_t* rq = nullptr;     // LSTM, 8-bit: [NB][H][G][U] (r unused)
  const float* rq_scale = nullptr;  // [NB][G][U]
  const float* rq_zp = nullptr;     // [NB][G][U], or nullptr (all zero)
  const float* peep = nullptr;  // LSTM: [3][Hp] (i, o, f) or nullptr
  const float* rbh = nullptr;   // linear-before-reset GRU: Rbh [Hp]
  const float* h0 = nullptr;    // [N][H] or nullptr (zeros)
  const float* c0 = nullptr;    // LSTM
  float* y = nullptr;  // ONNX Y [T][D][N][H] or nullptr
  float* yh = nullptr;  // [N][H] or nullptr
  float* yc = nullptr;  // LSTM
  float* h_a = nullptr;  // scratch [N][Hp] x 4
  float* h_b = nullptr;
  float* c = nullptr;   // LSTM: the cell; GRU: z
  float* rh = nullptr;  // GRU (linear_before_reset=0): r * h
};

}  // namespace kiln::onednn::rnn_sequence_internal
#endif  // KILN_BACKENDS_ONEDNN_RNN_SEQUENCE_ONCE_

HWY_BEFORE_NAMESPACE();
namespace kiln::onednn::rnn_sequence_internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Vectors per gate in a block: with 4 LSTM gates, 8 independent FMA chains.
constexpr size_t kVecsPerGate = 2;

size_t BlockUnits() { return kVecsPerGate * hn::Lanes(DF()); }

const char* StepTarget() { return hwy::TargetName(HWY_TARGET); }

HWY_INLINE VF Sigmoid(DF d, VF x) {
  // exp(-x) for x below -88 would overflow float: sigmoid is 0 there.
  const VF e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, 88.0f)));
  const VF one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, e));
}

// acc[r][2*g + v] += sum_k h[r][k] * w[k*stride + g*U + v*L] for R batch
// rows and NG consecutive gates of one block: each weight vector loaded
// feeds every row's product (two rows halve the weight traffic).
template <size_t R, size_t NG>
HWY_INLINE void Accumulate(DF d, const float* w, size_t stride, const float* const (&h)[R],
                           int64_t H, size_t U, VF (&acc)[R][2 * NG]) {
  const size_t L = hn::Lanes(d);
  for (int64_t k = 0; k < H; ++k, w += stride) {
    VF a[R];
#pragma GCC unroll 2
    for (size_t r = 0; r < R; ++r) a[r] = hn::Set(d, h[r][k]);
#pragma GCC unroll 8
    for (size_t j = 0; j < 2 * NG; ++j) {
      const VF wv = hn::LoadU(d, w + (j / 2) * U + (j % 2) * L);
#pragma GCC unroll 2
      for (size_t r = 0; r < R; ++r) acc[r][j] = hn::MulAdd(a[r], wv, acc[r][j]);
    }
  }
}

// Accumulate for 8-bit weights: each 16-byte (on AVX-512) group of int8
// is widened to i32 and converted to f32 in registers.
template <size_t R, size_t NG>
HWY_INLINE void AccumulateS8(DF d, const int8_t* w, size_t stride,
                             const float* const (&h)[R], int64_t H, size_t U,
                             VF (&acc)[R][2 * NG]) {
  const size_t L = hn::Lanes(d);
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> d8;
  for (int64_t k = 0; k < H; ++k, w += stride) {
    VF a[R];
#pragma GCC unroll 2
    for (size_t r = 0; r < R; ++r) a[r] = hn::Set(d, h[r][k]);
#pragma GCC unroll 8
    for (size_t j = 0; j < 2 * NG; ++j) {
      const VF wv = hn::ConvertTo(
          d, hn::PromoteTo(di, hn::LoadU(d8, w + (j / 2) * U + (j % 2) * L)));
#pragma GCC unroll 2
      for (size_t r = 0; r < R; ++r) acc[r][j] = hn::MulAdd(a[r], wv, acc[r][j]);
    }
  }
}

// acc[r][2*g + v] = the projection's gates g < NG of block b, row n + r.
template <size_t NG, size_t R, size_t NA>
HWY_INLINE void LoadProjection(DF d, const StepArgs& a, int64_t t, int64_t n, size_t b,
                               size_t G, size_t U, VF (&acc)[R][NA]) {
  static_assert(2 * NG <= NA, "more gates than accumulators");
  const size_t L = hn::Lanes(d);
#pragma GCC unroll 2
  for (size_t r = 0; r < R; ++r) {
    const float* x = a.xw + (t * a.batch + n + static_cast<int64_t>(r)) * a.xw_stride + b * G * U;
#pragma GCC unroll 8
    for (size_t j = 0; j < 2 * NG; ++j) acc[r][j] = hn::LoadU(d, x + (j / 2) * U + (j % 2) * L);
  }
}

// f(std::integral_constant<size_t, R>, n) for the batch rows in pairs, then
// the odd one.
template <class F>
HWY_INLINE void ForRows(int64_t N, const F& f) {
  int64_t n = 0;
  for (; n + 1 < N; n += 2) f(std::integral_constant<size_t, 2>(), n);
  if (n < N) f(std::integral_constant<size_t, 1>(), n);
}

// The LSTM gate math for one vector of hidden units: a* are the
// pre-activations (projection + recurrence + bias) of gates i, o, f, c.
HWY_INLINE void Cell(DF d, VF ai, VF ao, VF af, VF ac, const float* peep, size_t off,
                     size_t hp, float* c, float* h) {
  const VF c_prev = hn::LoadU(d, c + off);
  if (peep != nullptr) {
    ai = hn::MulAdd(hn::LoadU(d, peep + off), c_prev, ai);
    af = hn::MulAdd(hn::LoadU(d, peep + 2 * hp + off), c_prev, af);
  }
  const VF i = Sigmoid(d, ai);
  const VF f = Sigmoid(d, af);
  const VF g = hn::Tanh(d, ac);
  const VF c_new = hn::MulAdd(f, c_prev, hn::Mul(i, g));
  if (peep != nullptr) ao = hn::MulAdd(hn::LoadU(d, peep + hp + off), c_new, ao);
  const VF o = Sigmoid(d, ao);
  hn::StoreU(c_new, d, c + off);
  hn::StoreU(hn::Mul(o, hn::Tanh(d, c_new)), d, h + off);
}

// One LSTM step: h_next from h_prev (and the cell in place).
void LstmStep(DF d, const StepArgs& a, int64_t t, const float* h_prev, float* h_next) {
  const size_t L = hn::Lanes(d), U = kVecsPerGate * L;
  const size_t Hp = static_cast<size_t>(a.hidden_padded), NB = Hp / U;
  const int64_t H = a.hidden;
  ForRows(a.batch, [&](auto rows, int64_t n) {
    constexpr size_t R = decltype(rows)::value;
    const float* h[R];
    for (size_t r = 0; r < R; ++r) h[r] = h_prev + (n + r) * Hp;
    for (size_t b = 0; b < NB; ++b) {
      VF acc[R][8];
      LoadProjection<4>(d, a, t, n, b, 4, U, acc);
      Accumulate<R, 4>(d, a.r + b * H * 4 * U, 4 * U, h, H, U, acc);
      for (size_t r = 0; r < R; ++r) {
        for (size_t v = 0; v < kVecsPerGate; ++v) {
          Cell(d, acc[r][v], acc[r][2 + v], acc[r][4 + v], acc[r][6 + v], a.peep,
               b * U + v * L, Hp, a.c + (n + r) * Hp, h_next + (n + r) * Hp);
        }
      }
    }
  });
}

// One LSTM step over 8-bit recurrent weights: the integer-weighted sums
// first, then pre-activation = projection + scale * (sum - zp * sum(h)).
void LstmStepS8(DF d, const StepArgs& a, int64_t t, const float* h_prev, float* h_next) {
  const size_t L = hn::Lanes(d), U = kVecsPerGate * L;
  const size_t Hp = static_cast<size_t>(a.hidden_padded), NB = Hp / U;
  const int64_t H = a.hidden;
  ForRows(a.batch, [&](auto rows, int64_t n) {
    constexpr size_t R = decltype(rows)::value;
    const float* h[R];
    VF hsum[R];
    for (size_t r = 0; r < R; ++r) hsum[r] = hn::Zero(d);
    for (size_t r = 0; r < R; ++r) {
      h[r] = h_prev + (n + r) * Hp;
      if (a.rq_zp != nullptr) {
        float s = 0.0f;
        for (int64_t k = 0; k < H; ++k) s += h[r][k];
        hsum[r] = hn::Set(d, s);
      }
    }
    for (size_t b = 0; b < NB; ++b) {
      VF acc[R][8];
      for (size_t r = 0; r < R; ++r) {
        for (size_t j = 0; j < 8; ++j) acc[r][j] = hn::Zero(d);
      }
      AccumulateS8<R, 4>(d, a.rq + b * H * 4 * U, 4 * U, h, H, U, acc);
      VF proj[R][8];
      LoadProjection<4>(d, a, t, n, b, 4, U, proj);
      for (size_t j = 0; j < 8; ++j) {
        const size_t off = b * 4 * U + (j / 2) * U + (j % 2) * L;
        const VF scale = hn::LoadU(d, a.rq_scale + off);
        for (size_t r = 0; r < R; ++r) {
          if (a.rq_zp != nullptr) {
            acc[r][j] = hn::NegMulAdd(hn::LoadU(d, a.rq_zp + off), hsum[r], acc[r][j]);
          }
          acc[r][j] = hn::MulAdd(scale, acc[r][j], proj[r][j]);
        }
      }
      for (size_t r = 0; r < R; ++r) {
        for (size_t v = 0; v < kVecsPerGate; ++v) {
          Cell(d, acc[r][v], acc[r][2 + v], acc[r][4 + v], acc[r][6 + v], a.peep,
               b * U + v * L, Hp, a.c + (n + r) * Hp, h_next + (n + r) * Hp);
        }
      }
    }
  });
}

// h = (1 - z) * candidate + z * h_prev for one vector of hidden units.
HWY_INLINE void GruUpdate(DF d, VF z, VF candidate, const float* h_prev, float* h_next) {
  const VF hc = hn::Tanh(d, candidate);
  hn::StoreU(hn::MulAdd(z, hn::Sub(hn::LoadU(d, h_prev), hc), hc), d, h_next);
}

// One GRU step with linear_before_reset=1: the candidate is
// tanh(xWh + Wbh + r * (h Rh^T + Rbh)), so all three products take h and
// run in one pass.
void LbrGruStep(DF d, const StepArgs& a, int64_t t, const float* h_prev, float* h_next) {
  const size_t L = hn::Lanes(d), U = kVecsPerGate * L;
  const size_t Hp = static_cast<size_t>(a.hidden_padded), NB = Hp / U;
  const int64_t H = a.hidden;
  ForRows(a.batch, [&](auto rows, int64_t n) {
    constexpr size_t R = decltype(rows)::value;
    const float* h[R];
    for (size_t r = 0; r < R; ++r) h[r] = h_prev + (n + r) * Hp;
    for (size_t b = 0; b < NB; ++b) {
      VF acc[R][6];
      LoadProjection<2>(d, a, t, n, b, 3, U, acc);
      for (size_t r = 0; r < R; ++r) {
        for (size_t v = 0; v < kVecsPerGate; ++v) {
          acc[r][4 + v] = hn::LoadU(d, a.rbh + b * U + v * L);
        }
      }
      Accumulate<R, 3>(d, a.r + b * H * 3 * U, 3 * U, h, H, U, acc);
      for (size_t r = 0; r < R; ++r) {
        const float* xh = a.xw + (t * a.batch + n + r) * a.xw_stride + (b * 3 + 2) * U;
        for (size_t v = 0; v < kVecsPerGate; ++v) {
          const size_t off = b * U + v * L;
          const VF z = Sigmoid(d, acc[r][v]);
          const VF reset = Sigmoid(d, acc[r][2 + v]);
          GruUpdate(d, z, hn::MulAdd(reset, acc[r][4 + v], hn::LoadU(d, xh + v * L)),
                    h[r] + off, h_next + (n + r) * Hp + off);
        }
      }
    }
  });
}

// One GRU step with linear_before_reset=0: the candidate is
// tanh(xWh + Wbh + Rbh + (r * h) Rh^T), so z and r come first (kept in
// a.c and, as r * h, in a.rh), then the candidate's product.
void GruStep(DF d, const StepArgs& a, int64_t t, const float* h_prev, float* h_next) {
  const size_t L = hn::Lanes(d), U = kVecsPerGate * L;
  const size_t Hp = static_cast<size_t>(a.hidden_padded), NB = Hp / U;
  const int64_t H = a.hidden;
  ForRows(a.batch, [&](auto rows, int64_t n) {
    constexpr size_t R = decltype(rows)::value;
    const float* h[R];
    for (size_t r = 0; r < R; ++r) h[r] = h_prev + (n + r) * Hp;
    for (size_t b = 0; b < NB; ++b) {
      VF acc[R][4];
      LoadProjection<2>(d, a, t, n, b, 3, U, acc);
      Accumulate<R, 2>(d, a.r + b * H * 3 * U, 3 * U, h, H, U, acc);
      for (size_t r = 0; r < R; ++r) {
        for (size_t v = 0; v < kVecsPerGate; ++v) {
          const size_t off = (n + r) * Hp + b * U + v * L;
          hn::StoreU(Sigmoid(d, acc[r][v]), d, a.c + off);
          const VF reset = Sigmoid(d, acc[r][2 + v]);
          hn::StoreU(hn::Mul(reset, hn::LoadU(d, h_prev + off)), d, a.rh + off);
        }
      }
    }
  });
  ForRows(a.batch, [&](auto rows, int64_t n) {
    constexpr size_t R = decltype(rows)::value;
    const float* rh[R];
    for (size_t r = 0; r < R; ++r) rh[r] = a.rh + (n + r) * Hp;
    for (size_t b = 0; b < NB; ++b) {
      VF acc[R][2];
      for (size_t r = 0; r < R; ++r) {
        const float* xh = a.xw + (t * a.batch + n + r) * a.xw_stride + (b * 3 + 2) * U;
        for (size_t v = 0; v < kVecsPerGate; ++v) acc[r][v] = hn::LoadU(d, xh + v * L);
      }
      Accumulate<R, 1>(d, a.r + b * H * 3 * U + 2 * U, 3 * U, rh, H, U, acc);
      for (size_t r = 0; r < R; ++r) {
        for (size_t v = 0; v < kVecsPerGate; ++v) {
          const size_t off = (n + r) * Hp + b * U + v * L;
          GruUpdate(d, hn::LoadU(d, a.c + off), acc[r][v], h_prev + off, h_next + off);
        }
      }
    }
  });
}

// One direction over the whole sequence: states in, a step per time, Y
// rows as they come, the final states out.
void Steps(const StepArgs& a) {
  const DF d;
  const int64_t T = a.seq, N = a.batch, H = a.hidden, Hp = a.hidden_padded;
  const bool lstm = a.cell == SequenceCell::kLstm;
  for (int64_t n = 0; n < N; ++n) {
    float* h = a.h_a + n * Hp;
    std::fill(h, h + Hp, 0.0f);
    if (a.h0 != nullptr) std::memcpy(h, a.h0 + n * H, sizeof(float) * H);
    if (lstm) {
      float* c = a.c + n * Hp;
      std::fill(c, c + Hp, 0.0f);
      if (a.c0 != nullptr) std::memcpy(c, a.c0 + n * H, sizeof(float) * H);
    }
  }
  float* h_prev = a.h_a;
  float* h_next = a.h_b;
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = a.reverse ? T - 1 - s : s;
    switch (a.cell) {
      case SequenceCell::kLstm:
        if (a.rq != nullptr) {
          LstmStepS8(d, a, t, h_prev, h_next);
        } else {
          LstmStep(d, a, t, h_prev, h_next);
        }
        break;
      case SequenceCell::kGru: GruStep(d, a, t, h_prev, h_next); break;
      case SequenceCell::kLbrGru: LbrGruStep(d, a, t, h_prev, h_next); break;
    }
    if (a.y != nullptr) {
      for (int64_t n = 0; n < N; ++n) {
        std::memcpy(a.y + ((t * a.dirs + a.dir) * N + n) * H, h_next + n * Hp,
                    sizeof(float) * H);
      }
    }
    std::swap(h_prev, h_next);
  }
  for (int64_t n = 0; n < N; ++n) {
    if (a.yh != nullptr) std::memcpy(a.yh + n * H, h_prev + n * Hp, sizeof(float) * H);
    if (lstm && a.yc != nullptr) std::memcpy(a.yc + n * H, a.c + n * Hp, sizeof(float) * H);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::onednn::rnn_sequence_internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "absl/strings/str_cat.h"
#include "backends/onednn/engine.h"
#include "backends/onednn/threads.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn {
namespace rnn_sequence_internal {
HWY_EXPORT(BlockUnits);
HWY_EXPORT(StepTarget);
HWY_EXPORT(Steps);
}  // namespace rnn_sequence_internal

namespace {

using dnnl::memory;
using rnn_sequence_internal::StepArgs;

// "ab", "BA16a64b": outer dims by decreasing stride, then the inner blocks.
std::string Layout2d(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims != 2) return "opaque";
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  const bool a_outer = b.strides[0] >= b.strides[1];
  bool blocked[2] = {false, false};
  for (int i = 0; i < b.inner_nblks; ++i) blocked[b.inner_idxs[i]] = true;
  auto letter = [&](int i) { return static_cast<char>((blocked[i] ? 'A' : 'a') + i); };
  std::string s;
  s.push_back(letter(a_outer ? 0 : 1));
  s.push_back(letter(a_outer ? 1 : 0));
  for (int i = 0; i < b.inner_nblks; ++i) {
    absl::StrAppend(&s, b.inner_blks[i]);
    s.push_back(static_cast<char>('a' + b.inner_idxs[i]));
  }
  return s;
}

const char* CellName(SequenceCell cell) {
  return cell == SequenceCell::kLstm ? "LSTM" : "GRU";
}

}  // namespace

struct RnnSequence::Impl {
  std::string where, impl, weights_layout;
  RnnSequenceShape shape;
  int64_t gates = 0;       // G
  int64_t units = 0;       // U
  int64_t hp = 0;          // H rounded up to U
  int64_t cols = 0;        // D * G * Hp: XW's row length
  int64_t packed_bytes = 0;
  dnnl::matmul projection;
  memory src, weights, bias, dst, scratchpad;
  std::vector<float> weights_plain, bias_plain;
  hwy::AlignedFreeUniquePtr<float[]> recurrence;  // D x [NB][H][G][U]
  hwy::AlignedFreeUniquePtr<int8_t[]> recurrence_s8;  // 8-bit: D x [NB][H][G][U]
  hwy::AlignedFreeUniquePtr<float[]> rq_scale;        // 8-bit: D x [NB][G][U]
  hwy::AlignedFreeUniquePtr<float[]> rq_zp;           // or null: all zero
  hwy::AlignedFreeUniquePtr<float[]> peep;        // LSTM: D x [3][Hp]
  hwy::AlignedFreeUniquePtr<float[]> rbh;         // LBR GRU: D x [Hp]
  hwy::AlignedFreeUniquePtr<float[]> xw;          // [T*N][cols]
  hwy::AlignedFreeUniquePtr<float[]> state;       // [N][Hp] x 4 per direction
  std::unordered_map<int, memory> args;
};

RnnSequence::RnnSequence(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RnnSequence::~RnnSequence() = default;

absl::StatusOr<std::unique_ptr<RnnSequence>> RnnSequence::Create(
    const RnnSequenceShape& shape, const float* w, const float* r, const float* b,
    const float* p, bool prepack, absl::string_view where) {
  return CreateImpl(shape, w, r, nullptr, b, p, prepack, where);
}

absl::StatusOr<std::unique_ptr<RnnSequence>> RnnSequence::Create(
    const RnnSequenceShape& shape, const float* w, const QuantizedRecurrence& r,
    const float* b, const float* p, bool prepack, absl::string_view where) {
  if (shape.cell != SequenceCell::kLstm || r.q == nullptr || r.scale == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": 8-bit recurrent weights need an LSTM, the weights and their "
                     "scales (got a ", CellName(shape.cell), ")"));
  }
  return CreateImpl(shape, w, nullptr, &r, b, p, prepack, where);
}

absl::StatusOr<std::unique_ptr<RnnSequence>> RnnSequence::CreateImpl(
    const RnnSequenceShape& shape, const float* w, const float* r,
    const QuantizedRecurrence* rq, const float* b, const float* p, bool prepack,
    absl::string_view where) {
  const int64_t T = shape.seq, N = shape.batch, I = shape.input, H = shape.hidden,
                D = shape.dirs;
  const bool lstm = shape.cell == SequenceCell::kLstm;
  const bool lbr = shape.cell == SequenceCell::kLbrGru;
  if (T <= 0 || N <= 0 || I <= 0 || H <= 0 || (D != 1 && D != 2) || w == nullptr ||
      (r == nullptr && rq == nullptr) || (!lstm && p != nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", CellName(shape.cell), " sequence of seq ", T, " batch ", N,
                     " input ", I, " hidden ", H, " dirs ", D,
                     " (or no weights, or peepholes for a GRU)"));
  }
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.where = std::string(where);
  m.shape = shape;
  const int64_t G = lstm ? 4 : 3;
  m.gates = G;
  const int64_t U =
      static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(rnn_sequence_internal::BlockUnits)());
  m.units = U;
  m.hp = (H + U - 1) / U * U;
  const int64_t Hp = m.hp, NB = Hp / U;
  m.cols = D * G * Hp;

  // Projection weights [I][cols] and bias [cols]; gate g of hidden unit j
  // in direction dd at column ((dd*NB + j/U)*G + g)*U + j%U.
  m.weights_plain.assign(I * m.cols, 0.0f);
  m.bias_plain.assign(m.cols, 0.0f);
  for (int64_t dd = 0; dd < D; ++dd) {
    for (int64_t g = 0; g < G; ++g) {
      // A linear-before-reset candidate's Rbh goes inside the reset product.
      const bool rb_apart = lbr && g == 2;
      for (int64_t j = 0; j < H; ++j) {
        const int64_t col = ((dd * NB + j / U) * G + g) * U + j % U;
        const float* row = w + ((dd * G + g) * H + j) * I;
        for (int64_t k = 0; k < I; ++k) m.weights_plain[k * m.cols + col] = row[k];
        if (b != nullptr) {
          const float* bd = b + dd * 2 * G * H;
          m.bias_plain[col] = bd[g * H + j] + (rb_apart ? 0.0f : bd[G * H + g * H + j]);
        }
      }
    }
  }
  // Recurrence weights, per direction [NB][H][G][U].
  const int64_t r_per_dir = NB * H * G * U;
  if (rq != nullptr) {
    // int8 as is; uint8 minus 128 (and its zero point too): the
    // differences q - zp, all the step uses, are unchanged.
    const int64_t shift = rq->is_uint8 ? 128 : 0;
    auto q_at = [&](int64_t i) -> int64_t {
      return rq->is_uint8 ? static_cast<const uint8_t*>(rq->q)[i]
                          : static_cast<const int8_t*>(rq->q)[i];
    };
    auto zp_at = [&](int64_t i) -> int64_t {
      if (rq->zero_point == nullptr) return 0;
      return rq->is_uint8 ? static_cast<const uint8_t*>(rq->zero_point)[i]
                          : static_cast<const int8_t*>(rq->zero_point)[i];
    };
    m.recurrence_s8 = hwy::AllocateAligned<int8_t>(D * r_per_dir);
    std::fill(m.recurrence_s8.get(), m.recurrence_s8.get() + D * r_per_dir, int8_t{0});
    m.rq_scale = hwy::AllocateAligned<float>(D * G * Hp);
    m.rq_zp = hwy::AllocateAligned<float>(D * G * Hp);
    std::fill(m.rq_scale.get(), m.rq_scale.get() + D * G * Hp, 0.0f);
    std::fill(m.rq_zp.get(), m.rq_zp.get() + D * G * Hp, 0.0f);
    bool any_zp = false;
    for (int64_t dd = 0; dd < D; ++dd) {
      int8_t* dst = m.recurrence_s8.get() + dd * r_per_dir;
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t j = 0; j < H; ++j) {
          const int64_t col = dd * G * H + g * H + j;
          const int64_t param = rq->per_column ? col : dd;
          const int64_t packed = dd * G * Hp + (j / U * G + g) * U + j % U;
          m.rq_scale[packed] = rq->scale[param];
          const int64_t zp = zp_at(param) - shift;
          m.rq_zp[packed] = static_cast<float>(zp);
          any_zp = any_zp || zp != 0;
          for (int64_t k = 0; k < H; ++k) {
            dst[((j / U * H + k) * G + g) * U + j % U] =
                static_cast<int8_t>(q_at(col * H + k) - shift);
          }
        }
      }
    }
    if (!any_zp) m.rq_zp.reset();
    m.packed_bytes =
        static_cast<int64_t>(D * r_per_dir) +
        static_cast<int64_t>(sizeof(float)) * (m.cols + (any_zp ? 2 : 1) * D * G * Hp);
  } else {
    m.recurrence = hwy::AllocateAligned<float>(D * r_per_dir);
    std::fill(m.recurrence.get(), m.recurrence.get() + D * r_per_dir, 0.0f);
    for (int64_t dd = 0; dd < D; ++dd) {
      float* dst = m.recurrence.get() + dd * r_per_dir;
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t j = 0; j < H; ++j) {
          const float* row = r + ((dd * G + g) * H + j) * H;
          for (int64_t k = 0; k < H; ++k) {
            dst[((j / U * H + k) * G + g) * U + j % U] = row[k];
          }
        }
      }
    }
    m.packed_bytes = static_cast<int64_t>(sizeof(float)) * (D * r_per_dir + m.cols);
  }
  if (p != nullptr) {
    m.peep = hwy::AllocateAligned<float>(D * 3 * Hp);
    std::fill(m.peep.get(), m.peep.get() + D * 3 * Hp, 0.0f);
    for (int64_t dd = 0; dd < D; ++dd) {
      for (int64_t g = 0; g < 3; ++g) {
        std::memcpy(m.peep.get() + (dd * 3 + g) * Hp, p + (dd * 3 + g) * H,
                    sizeof(float) * H);
      }
    }
    m.packed_bytes += static_cast<int64_t>(sizeof(float)) * D * 3 * Hp;
  }
  if (lbr) {
    m.rbh = hwy::AllocateAligned<float>(D * Hp);
    std::fill(m.rbh.get(), m.rbh.get() + D * Hp, 0.0f);
    if (b != nullptr) {
      for (int64_t dd = 0; dd < D; ++dd) {
        std::memcpy(m.rbh.get() + dd * Hp, b + dd * 2 * G * H + (G + 2) * H,
                    sizeof(float) * H);
      }
    }
    m.packed_bytes += static_cast<int64_t>(sizeof(float)) * D * Hp;
  }
  m.xw = hwy::AllocateAligned<float>(T * N * m.cols);
  m.state = hwy::AllocateAligned<float>(4 * N * Hp * D);

  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const memory::dim M = T * N, C = m.cols;
  const memory::desc src_md({M, I}, f32, tag::ab);
  const memory::desc w_plain_md({I, C}, f32, tag::ab);
  const memory::desc w_md = prepack ? memory::desc({I, C}, f32, tag::any) : w_plain_md;
  const memory::desc bias_md({1, C}, f32, tag::ab);
  const memory::desc dst_md({M, C}, f32, tag::ab);
  try {
    dnnl::engine& eng = CpuEngine();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, w_md, bias_md, dst_md),
                                    attr, eng);
    m.projection = dnnl::matmul(pd);
    memory plain(w_plain_md, eng, m.weights_plain.data());
    if (pd.weights_desc() != w_plain_md) {
      m.weights = memory(pd.weights_desc(), eng);
      dnnl::stream& s = CpuStream();
      dnnl::reorder(plain, m.weights).execute(s, plain, m.weights);
      s.wait();
      std::vector<float>().swap(m.weights_plain);
      m.packed_bytes += static_cast<int64_t>(pd.weights_desc().get_size());
    } else {
      m.weights = plain;
      m.packed_bytes += static_cast<int64_t>(sizeof(float)) * I * C;
    }
    m.weights_layout = Layout2d(pd.weights_desc());
    m.bias = memory(bias_md, eng, m.bias_plain.data());
    m.src = memory(src_md, eng, nullptr);
    m.dst = memory(dst_md, eng, m.xw.get());
    m.scratchpad = memory(pd.scratchpad_desc(), eng);
    m.args = {{DNNL_ARG_SRC, m.src},
              {DNNL_ARG_WEIGHTS, m.weights},
              {DNNL_ARG_BIAS, m.bias},
              {DNNL_ARG_DST, m.dst},
              {DNNL_ARG_SCRATCHPAD, m.scratchpad}};
    m.impl = absl::StrCat("kiln:", lstm ? "lstm" : "gru", "_steps",
                          rq != nullptr ? "_s8r(" : "(",
                          HWY_DYNAMIC_DISPATCH(rnn_sequence_internal::StepTarget)(),
                          ")+matmul(", pd.impl_info_str(), ")");
  } catch (const dnnl::error& e) {
    return absl::UnimplementedError(absl::StrCat(where, ": oneDNN refuses the ",
                                                 CellName(shape.cell),
                                                 " input projection: ", e.what()));
  }
  return std::unique_ptr<RnnSequence>(new RnnSequence(std::move(impl)));
}

absl::Status RnnSequence::Run(const float* x, const float* h0, const float* c0, float* y,
                              float* y_h, float* y_c) {
  Impl& m = *impl_;
  const RnnSequenceShape& sh = m.shape;
  const bool lstm = sh.cell == SequenceCell::kLstm;
  const int64_t N = sh.batch, H = sh.hidden, Hp = m.hp, G = m.gates;
  try {
    m.src.set_data_handle(const_cast<float*>(x));
    dnnl::stream& s = CpuStream();
    m.projection.execute(s, m.args);
    s.wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat(m.where, ": ", CellName(sh.cell),
                                            " input projection failed: ", e.what()));
  }
  // The directions of a bidirectional sequence are independent: each runs
  // on its own thread when there are two, with its own states (the
  // recurrence streams its weights from memory once per step, so two
  // threads stream twice as fast). The results are the same either way.
  auto direction = [&](int64_t dd) {
    float* state = m.state.get() + dd * 4 * N * Hp;
    StepArgs a;
    a.cell = sh.cell;
    a.seq = sh.seq;
    a.batch = N;
    a.hidden = H;
    a.hidden_padded = Hp;
    a.dirs = sh.dirs;
    a.dir = dd;
    a.reverse = sh.dirs == 2 ? dd == 1 : sh.reverse;
    a.xw = m.xw.get() + dd * G * Hp;
    a.xw_stride = m.cols;
    const int64_t r_per_dir = (Hp / m.units) * H * G * m.units;
    if (m.recurrence_s8) {
      a.rq = m.recurrence_s8.get() + dd * r_per_dir;
      a.rq_scale = m.rq_scale.get() + dd * G * Hp;
      a.rq_zp = m.rq_zp ? m.rq_zp.get() + dd * G * Hp : nullptr;
    } else {
      a.r = m.recurrence.get() + dd * r_per_dir;
    }
    a.peep = m.peep ? m.peep.get() + dd * 3 * Hp : nullptr;
    a.rbh = m.rbh ? m.rbh.get() + dd * Hp : nullptr;
    a.h0 = h0 != nullptr ? h0 + dd * N * H : nullptr;
    a.c0 = lstm && c0 != nullptr ? c0 + dd * N * H : nullptr;
    a.y = y;
    a.yh = y_h != nullptr ? y_h + dd * N * H : nullptr;
    a.yc = lstm && y_c != nullptr ? y_c + dd * N * H : nullptr;
    a.h_a = state;
    a.h_b = state + N * Hp;
    a.c = state + 2 * N * Hp;
    a.rh = state + 3 * N * Hp;
    HWY_DYNAMIC_DISPATCH(rnn_sequence_internal::Steps)(a);
  };
  ParallelFor(sh.dirs, direction);
  return absl::OkStatus();
}

const std::string& RnnSequence::impl() const { return impl_->impl; }
const std::string& RnnSequence::weights_layout() const { return impl_->weights_layout; }
int64_t RnnSequence::packed_bytes() const { return impl_->packed_bytes; }

}  // namespace kiln::onednn
#endif  // HWY_ONCE
