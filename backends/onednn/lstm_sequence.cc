// LstmSequence: packs an ONNX LSTM's weights for one projection matmul
// (oneDNN) and for the recurrence, a Highway kernel compiled for every x86
// target Highway knows and picked at run time (hwy/foreach_target.h).
//
// Packed layouts, with U = 2 vectors of the chosen target (32 floats on
// AVX-512) and Hp = H rounded up to U, NB = Hp / U hidden blocks:
// - projection weights [I, D*NB*4*U]: column ((d*NB + b)*4 + g)*U + u is
//   gate g (ONNX order i, o, f, c) of hidden unit b*U + u, so XW's row for
//   one step holds, per direction and block, the 4 gates' U units together;
//   the bias (Wb + Rb) is laid out alike; padding units are zero.
// - recurrence weights per direction [NB][H][4][U]: for block b and input
//   unit k, the 4*U weights the step kernel multiplies by h[k], contiguous.
// The step kernel keeps a block's 4 gates x 2 vectors in 8 accumulators over
// the whole product, then applies the gate math to them in registers: no
// [N, 4H] gate buffer is written per step.
#include "backends/onednn/lstm_sequence.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/onednn/lstm_sequence.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef KILN_BACKENDS_ONEDNN_LSTM_SEQUENCE_ONCE_
#define KILN_BACKENDS_ONEDNN_LSTM_SEQUENCE_ONCE_
namespace kiln::onednn::lstm_internal {

// One direction's recurrence over the whole sequence.
struct StepArgs {
  int64_t seq = 0, batch = 0, hidden = 0, hidden_padded = 0;
  int64_t dirs = 1, dir = 0;
  bool reverse = false;
  const float* xw = nullptr;  // row (t*N + n) at xw + (t*N + n)*xw_stride
  int64_t xw_stride = 0;      // this direction's columns start at xw
  const float* r = nullptr;   // [NB][H][4][U]
  const float* peep = nullptr;  // [3][Hp] (i, o, f) or nullptr
  const float* h0 = nullptr;    // [N][H] or nullptr (zeros)
  const float* c0 = nullptr;
  float* y = nullptr;  // ONNX Y [T][D][N][H] or nullptr
  float* yh = nullptr;  // [N][H] or nullptr
  float* yc = nullptr;
  float* h_a = nullptr;  // scratch [N][Hp] x 3
  float* h_b = nullptr;
  float* c = nullptr;
};

}  // namespace kiln::onednn::lstm_internal
#endif  // KILN_BACKENDS_ONEDNN_LSTM_SEQUENCE_ONCE_

HWY_BEFORE_NAMESPACE();
namespace kiln::onednn::lstm_internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Vectors per gate in a block: 4 gates x 2 = 8 independent FMA chains.
constexpr size_t kVecsPerGate = 2;

size_t BlockUnits() { return kVecsPerGate * hn::Lanes(DF()); }

const char* StepTarget() { return hwy::TargetName(HWY_TARGET); }

HWY_INLINE VF Sigmoid(DF d, VF x) {
  // exp(-x) for x below -88 would overflow float: sigmoid is 0 there.
  const VF e = hn::Exp(d, hn::Min(hn::Neg(x), hn::Set(d, 88.0f)));
  const VF one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, e));
}

// The gate math for one vector of hidden units: a* are the pre-activations
// (projection + recurrence + bias) of gates i, o, f, c.
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

// Two batch rows of one block: each weight vector loaded feeds both rows'
// products (16 accumulators), halving the recurrence's weight traffic.
HWY_INLINE void BlockPair(DF d, const float* x0, const float* x1, const float* w,
                          const float* h0, const float* h1, int64_t H, size_t U,
                          VF (&acc)[2][8]) {
  const size_t L = hn::Lanes(d);
#pragma GCC unroll 8
  for (size_t j = 0; j < 8; ++j) {
    acc[0][j] = hn::LoadU(d, x0 + (j / 2) * U + (j % 2) * L);
    acc[1][j] = hn::LoadU(d, x1 + (j / 2) * U + (j % 2) * L);
  }
  for (int64_t k = 0; k < H; ++k, w += 4 * U) {
    const VF a0 = hn::Set(d, h0[k]);
    const VF a1 = hn::Set(d, h1[k]);
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j) {
      const VF wv = hn::LoadU(d, w + (j / 2) * U + (j % 2) * L);
      acc[0][j] = hn::MulAdd(a0, wv, acc[0][j]);
      acc[1][j] = hn::MulAdd(a1, wv, acc[1][j]);
    }
  }
}

void LstmSteps(const StepArgs& a) {
  const DF d;
  const size_t L = hn::Lanes(d);
  const size_t U = kVecsPerGate * L;
  const int64_t T = a.seq, N = a.batch, H = a.hidden;
  const size_t Hp = static_cast<size_t>(a.hidden_padded);
  const size_t NB = Hp / U;
  for (int64_t n = 0; n < N; ++n) {
    float* h = a.h_a + n * Hp;
    float* c = a.c + n * Hp;
    std::fill(h, h + Hp, 0.0f);
    std::fill(c, c + Hp, 0.0f);
    if (a.h0 != nullptr) std::memcpy(h, a.h0 + n * H, sizeof(float) * H);
    if (a.c0 != nullptr) std::memcpy(c, a.c0 + n * H, sizeof(float) * H);
  }
  float* h_prev = a.h_a;
  float* h_next = a.h_b;
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = a.reverse ? T - 1 - s : s;
    int64_t n = 0;
    for (; n + 1 < N; n += 2) {
      const float* xw = a.xw + (t * N + n) * a.xw_stride;
      const float* hp = h_prev + n * Hp;
      float* hn_row = h_next + n * Hp;
      float* c = a.c + n * Hp;
      for (size_t b = 0; b < NB; ++b) {
        VF acc[2][8];
        BlockPair(d, xw + b * 4 * U, xw + a.xw_stride + b * 4 * U, a.r + b * H * 4 * U, hp,
                  hp + Hp, H, U, acc);
        for (size_t r = 0; r < 2; ++r) {
          for (size_t v = 0; v < kVecsPerGate; ++v) {
            Cell(d, acc[r][v], acc[r][2 + v], acc[r][4 + v], acc[r][6 + v], a.peep,
                 b * U + v * L, Hp, c + r * Hp, hn_row + r * Hp);
          }
        }
      }
      if (a.y != nullptr) {
        for (int64_t r = 0; r < 2; ++r) {
          std::memcpy(a.y + ((t * a.dirs + a.dir) * N + n + r) * H, hn_row + r * Hp,
                      sizeof(float) * H);
        }
      }
    }
    for (; n < N; ++n) {
      const float* xw = a.xw + (t * N + n) * a.xw_stride;
      const float* hp = h_prev + n * Hp;
      float* hn_row = h_next + n * Hp;
      float* c = a.c + n * Hp;
      for (size_t b = 0; b < NB; ++b) {
        const float* x = xw + b * 4 * U;
        VF i0 = hn::LoadU(d, x), i1 = hn::LoadU(d, x + L);
        VF o0 = hn::LoadU(d, x + U), o1 = hn::LoadU(d, x + U + L);
        VF f0 = hn::LoadU(d, x + 2 * U), f1 = hn::LoadU(d, x + 2 * U + L);
        VF g0 = hn::LoadU(d, x + 3 * U), g1 = hn::LoadU(d, x + 3 * U + L);
        const float* w = a.r + b * H * 4 * U;
        for (int64_t k = 0; k < H; ++k, w += 4 * U) {
          const VF hk = hn::Set(d, hp[k]);
          i0 = hn::MulAdd(hk, hn::LoadU(d, w), i0);
          i1 = hn::MulAdd(hk, hn::LoadU(d, w + L), i1);
          o0 = hn::MulAdd(hk, hn::LoadU(d, w + U), o0);
          o1 = hn::MulAdd(hk, hn::LoadU(d, w + U + L), o1);
          f0 = hn::MulAdd(hk, hn::LoadU(d, w + 2 * U), f0);
          f1 = hn::MulAdd(hk, hn::LoadU(d, w + 2 * U + L), f1);
          g0 = hn::MulAdd(hk, hn::LoadU(d, w + 3 * U), g0);
          g1 = hn::MulAdd(hk, hn::LoadU(d, w + 3 * U + L), g1);
        }
        Cell(d, i0, o0, f0, g0, a.peep, b * U, Hp, c, hn_row);
        Cell(d, i1, o1, f1, g1, a.peep, b * U + L, Hp, c, hn_row);
      }
      if (a.y != nullptr) {
        std::memcpy(a.y + ((t * a.dirs + a.dir) * N + n) * H, hn_row, sizeof(float) * H);
      }
    }
    std::swap(h_prev, h_next);
  }
  for (int64_t n = 0; n < N; ++n) {
    if (a.yh != nullptr) std::memcpy(a.yh + n * H, h_prev + n * Hp, sizeof(float) * H);
    if (a.yc != nullptr) std::memcpy(a.yc + n * H, a.c + n * Hp, sizeof(float) * H);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::onednn::lstm_internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "absl/strings/str_cat.h"
#include "backends/onednn/engine.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn {
namespace lstm_internal {
HWY_EXPORT(BlockUnits);
HWY_EXPORT(StepTarget);
HWY_EXPORT(LstmSteps);
}  // namespace lstm_internal

namespace {

using dnnl::memory;
using lstm_internal::StepArgs;

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

}  // namespace

struct LstmSequence::Impl {
  std::string where, impl, weights_layout;
  LstmShape shape;
  int64_t units = 0;       // U
  int64_t hp = 0;          // H rounded up to U
  int64_t cols = 0;        // D * 4 * Hp: XW's row length
  int64_t packed_bytes = 0;
  dnnl::matmul projection;
  memory src, weights, bias, dst, scratchpad;
  std::vector<float> weights_plain, bias_plain;
  hwy::AlignedFreeUniquePtr<float[]> recurrence;  // D x [NB][H][4][U]
  hwy::AlignedFreeUniquePtr<float[]> peep;        // D x [3][Hp]
  hwy::AlignedFreeUniquePtr<float[]> xw;          // [T*N][cols]
  hwy::AlignedFreeUniquePtr<float[]> state;       // [N][Hp] x 3
  std::unordered_map<int, memory> args;
};

LstmSequence::LstmSequence(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LstmSequence::~LstmSequence() = default;

absl::StatusOr<std::unique_ptr<LstmSequence>> LstmSequence::Create(
    const LstmShape& shape, const float* w, const float* r, const float* b,
    const float* p, bool prepack, absl::string_view where) {
  const int64_t T = shape.seq, N = shape.batch, I = shape.input, H = shape.hidden,
                D = shape.dirs;
  if (T <= 0 || N <= 0 || I <= 0 || H <= 0 || (D != 1 && D != 2) || w == nullptr ||
      r == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": LSTM sequence of seq ", T, " batch ", N, " input ", I,
                     " hidden ", H, " dirs ", D, " (or no weights)"));
  }
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.where = std::string(where);
  m.shape = shape;
  const int64_t U = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(lstm_internal::BlockUnits)());
  m.units = U;
  m.hp = (H + U - 1) / U * U;
  const int64_t Hp = m.hp, NB = Hp / U;
  m.cols = D * 4 * Hp;

  // Projection weights [I][cols] and bias [cols]; gate g of hidden unit j
  // in direction dd at column ((dd*NB + j/U)*4 + g)*U + j%U.
  m.weights_plain.assign(I * m.cols, 0.0f);
  m.bias_plain.assign(m.cols, 0.0f);
  auto column = [&](int64_t dd, int64_t g, int64_t j) {
    return ((dd * NB + j / U) * 4 + g) * U + j % U;
  };
  for (int64_t dd = 0; dd < D; ++dd) {
    for (int64_t g = 0; g < 4; ++g) {
      for (int64_t j = 0; j < H; ++j) {
        const int64_t col = column(dd, g, j);
        const float* row = w + ((dd * 4 + g) * H + j) * I;
        for (int64_t k = 0; k < I; ++k) m.weights_plain[k * m.cols + col] = row[k];
        if (b != nullptr) {
          const float* bd = b + dd * 8 * H;
          m.bias_plain[col] = bd[g * H + j] + bd[4 * H + g * H + j];
        }
      }
    }
  }
  // Recurrence weights, per direction [NB][H][4][U].
  const int64_t r_per_dir = NB * H * 4 * U;
  m.recurrence = hwy::AllocateAligned<float>(D * r_per_dir);
  std::fill(m.recurrence.get(), m.recurrence.get() + D * r_per_dir, 0.0f);
  for (int64_t dd = 0; dd < D; ++dd) {
    float* dst = m.recurrence.get() + dd * r_per_dir;
    for (int64_t g = 0; g < 4; ++g) {
      for (int64_t j = 0; j < H; ++j) {
        const float* row = r + ((dd * 4 + g) * H + j) * H;
        for (int64_t k = 0; k < H; ++k) {
          dst[((j / U * H + k) * 4 + g) * U + j % U] = row[k];
        }
      }
    }
  }
  m.packed_bytes = static_cast<int64_t>(sizeof(float)) * (D * r_per_dir + m.cols);
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
  m.xw = hwy::AllocateAligned<float>(T * N * m.cols);
  m.state = hwy::AllocateAligned<float>(3 * N * Hp);

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
    m.impl = absl::StrCat("kiln:lstm_steps(", HWY_DYNAMIC_DISPATCH(lstm_internal::StepTarget)(),
                          ")+matmul(", pd.impl_info_str(), ")");
  } catch (const dnnl::error& e) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": oneDNN refuses the LSTM input projection: ", e.what()));
  }
  return std::unique_ptr<LstmSequence>(new LstmSequence(std::move(impl)));
}

absl::Status LstmSequence::Run(const float* x, const float* h0, const float* c0, float* y,
                               float* y_h, float* y_c) {
  Impl& m = *impl_;
  const LstmShape& sh = m.shape;
  const int64_t N = sh.batch, H = sh.hidden, Hp = m.hp;
  try {
    m.src.set_data_handle(const_cast<float*>(x));
    dnnl::stream& s = CpuStream();
    m.projection.execute(s, m.args);
    s.wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(
        absl::StrCat(m.where, ": LSTM input projection failed: ", e.what()));
  }
  for (int64_t dd = 0; dd < sh.dirs; ++dd) {
    StepArgs a;
    a.seq = sh.seq;
    a.batch = N;
    a.hidden = H;
    a.hidden_padded = Hp;
    a.dirs = sh.dirs;
    a.dir = dd;
    a.reverse = sh.dirs == 2 ? dd == 1 : sh.reverse;
    a.xw = m.xw.get() + dd * 4 * Hp;
    a.xw_stride = m.cols;
    a.r = m.recurrence.get() + dd * (Hp / m.units) * H * 4 * m.units;
    a.peep = m.peep ? m.peep.get() + dd * 3 * Hp : nullptr;
    a.h0 = h0 != nullptr ? h0 + dd * N * H : nullptr;
    a.c0 = c0 != nullptr ? c0 + dd * N * H : nullptr;
    a.y = y;
    a.yh = y_h != nullptr ? y_h + dd * N * H : nullptr;
    a.yc = y_c != nullptr ? y_c + dd * N * H : nullptr;
    a.h_a = m.state.get();
    a.h_b = m.state.get() + N * Hp;
    a.c = m.state.get() + 2 * N * Hp;
    HWY_DYNAMIC_DISPATCH(lstm_internal::LstmSteps)(a);
  }
  return absl::OkStatus();
}

const std::string& LstmSequence::impl() const { return impl_->impl; }
const std::string& LstmSequence::weights_layout() const { return impl_->weights_layout; }
int64_t LstmSequence::packed_bytes() const { return impl_->packed_bytes; }

}  // namespace kiln::onednn
#endif  // HWY_ONCE
