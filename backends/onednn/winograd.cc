// File: backends/onednn/winograd.cc — F(2x2, 3x3) Winograd conv: Highway
// input/output transforms around one batched oneDNN matmul. The transforms
// are compiled for every Highway target and chosen at run time
// (hwy/foreach_target.h).
#include "backends/onednn/winograd.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/onednn/engine.h"
#include "backends/onednn/threads.h"
#include "oneapi/dnnl/dnnl.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/onednn/winograd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"

#ifndef KILN_BACKENDS_ONEDNN_WINOGRAD_ARGS_
#define KILN_BACKENDS_ONEDNN_WINOGRAD_ARGS_
namespace kiln::onednn {
namespace winograd_internal {

// Element strides of an activation viewed as [N][C/B][H][W][B].
struct Strides {
  int64_t n = 0, cb = 0, y = 0, x = 0;
};

// One call's buffers and extents, shared by the per-target transforms.
struct Args {
  const float* src = nullptr;
  float* v = nullptr;        // [16][T][IC]
  const float* m = nullptr;  // [16][T][OC]
  float* dst = nullptr;
  Strides src_strides, dst_strides;
  int64_t ic = 0, oc = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t pad_top = 0, pad_left = 0, block = 8;
  int64_t tiles_h = 0, tiles_w = 0;
  // The chunk of tile rows (indexed n * tiles_h + ty) this call works on:
  // rows [row0, row0 + rows); V and M hold its rows * tiles_w tiles.
  int64_t row0 = 0, rows = 0;
};

}  // namespace winograd_internal
}  // namespace kiln::onednn
#endif  // KILN_BACKENDS_ONEDNN_WINOGRAD_ARGS_

HWY_BEFORE_NAMESPACE();
namespace kiln::onednn::winograd_internal {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// V = B^T d B for every 4x4 input tile d of the chunk, with
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
void InputChunk(const Args& a) {
  const hn::CappedTag<float, 8> d;
  using VF = hn::Vec<decltype(d)>;
  const int64_t blocks = a.ic / a.block;
  const int64_t k_stride = a.rows * a.tiles_w * a.ic;
  const Strides& st = a.src_strides;
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t n = (a.row0 + r) / a.tiles_h, ty = (a.row0 + r) % a.tiles_h;
    const int64_t y0 = 2 * ty - a.pad_top;
    for (int64_t cb = 0; cb < blocks; ++cb) {
      const float* plane = a.src + n * st.n + cb * st.cb;
      for (int64_t tx = 0; tx < a.tiles_w; ++tx) {
        const int64_t x0 = 2 * tx - a.pad_left;
        float* out = a.v + (r * a.tiles_w + tx) * a.ic + cb * a.block;
        for (int64_t l = 0; l < a.block; l += static_cast<int64_t>(hn::Lanes(d))) {
          VF x[4][4];
          for (int i = 0; i < 4; ++i) {
            const int64_t y = y0 + i;
            for (int j = 0; j < 4; ++j) {
              const int64_t xx = x0 + j;
              x[i][j] = (y >= 0 && y < a.h && xx >= 0 && xx < a.w)
                            ? hn::LoadU(d, plane + y * st.y + xx * st.x + l)
                            : hn::Zero(d);
            }
          }
          VF t4[4][4];
          for (int j = 0; j < 4; ++j) {
            t4[0][j] = hn::Sub(x[0][j], x[2][j]);
            t4[1][j] = hn::Add(x[1][j], x[2][j]);
            t4[2][j] = hn::Sub(x[2][j], x[1][j]);
            t4[3][j] = hn::Sub(x[1][j], x[3][j]);
          }
          for (int i = 0; i < 4; ++i) {
            float* o = out + (4 * i) * k_stride + l;
            hn::StoreU(hn::Sub(t4[i][0], t4[i][2]), d, o);
            hn::StoreU(hn::Add(t4[i][1], t4[i][2]), d, o + k_stride);
            hn::StoreU(hn::Sub(t4[i][2], t4[i][1]), d, o + 2 * k_stride);
            hn::StoreU(hn::Sub(t4[i][1], t4[i][3]), d, o + 3 * k_stride);
          }
        }
      }
    }
  }
}

// Y = A^T M A for every 2x2 output tile of the chunk, with
//   A^T = [1 1 1 0; 0 1 -1 -1].
void OutputChunk(const Args& a) {
  const hn::CappedTag<float, 8> d;
  using VF = hn::Vec<decltype(d)>;
  const int64_t blocks = a.oc / a.block;
  const int64_t k_stride = a.rows * a.tiles_w * a.oc;
  const Strides& st = a.dst_strides;
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t n = (a.row0 + r) / a.tiles_h, ty = (a.row0 + r) % a.tiles_h;
    const bool two_rows = 2 * ty + 1 < a.oh;
    for (int64_t ob = 0; ob < blocks; ++ob) {
      float* plane = a.dst + n * st.n + ob * st.cb;
      for (int64_t tx = 0; tx < a.tiles_w; ++tx) {
        const float* in = a.m + (r * a.tiles_w + tx) * a.oc + ob * a.block;
        const bool two_cols = 2 * tx + 1 < a.ow;
        for (int64_t l = 0; l < a.block; l += static_cast<int64_t>(hn::Lanes(d))) {
          VF s[2][4];
          for (int j = 0; j < 4; ++j) {
            const VF m0 = hn::LoadU(d, in + (0 + j) * k_stride + l);
            const VF m1 = hn::LoadU(d, in + (4 + j) * k_stride + l);
            const VF m2 = hn::LoadU(d, in + (8 + j) * k_stride + l);
            const VF m3 = hn::LoadU(d, in + (12 + j) * k_stride + l);
            s[0][j] = hn::Add(hn::Add(m0, m1), m2);
            s[1][j] = hn::Sub(hn::Sub(m1, m2), m3);
          }
          for (int q = 0; q < (two_rows ? 2 : 1); ++q) {
            float* o = plane + (2 * ty + q) * st.y + 2 * tx * st.x + l;
            hn::StoreU(hn::Add(hn::Add(s[q][0], s[q][1]), s[q][2]), d, o);
            if (two_cols) {
              hn::StoreU(hn::Sub(hn::Sub(s[q][1], s[q][2]), s[q][3]), d, o + st.x);
            }
          }
        }
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace kiln::onednn::winograd_internal
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::onednn {
namespace winograd_internal {
HWY_EXPORT(InputChunk);
HWY_EXPORT(OutputChunk);
}  // namespace winograd_internal

namespace {

using winograd_internal::Args;
using winograd_internal::Strides;
using memory = dnnl::memory;

// One scratch buffer per thread that runs WinogradConv chunks, grown to the
// largest: the calls of a model run one after another, so they share it
// instead of each holding its own.
char* ThreadScratch(int64_t bytes) {
  thread_local hwy::AlignedFreeUniquePtr<char[]> buffer;
  thread_local int64_t capacity = 0;
  if (bytes > capacity) {
    buffer = hwy::AllocateAligned<char>(static_cast<size_t>(bytes));
    if (buffer == nullptr) throw std::bad_alloc();
    capacity = bytes;
  }
  return buffer.get();
}

// Bytes of V and M per chunk: about a 512 KiB L2 (AMD Zen; Intel cores
// have 1-2 MiB); and at least kMinChunkTiles tiles, below which the
// matmul's per-call packing of U dominates (winograd_benchmark, 1 thread:
// one-tile-row chunks of 256 KiB took 1.2-1.6x the time of 512 KiB ones at
// 26x26 and 7x7 outputs).
constexpr int64_t kChunkBytes = 512 * 1024;
constexpr int64_t kMinChunkTiles = 128;

// U = G g G^T for one 3x3 kernel g (row-major), with
//   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
void TransformKernel(const float* g, float u[16]) {
  float gg[4][3];
  for (int c = 0; c < 3; ++c) {
    gg[0][c] = g[c];
    gg[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
    gg[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
    gg[3][c] = g[6 + c];
  }
  for (int r = 0; r < 4; ++r) {
    u[4 * r + 0] = gg[r][0];
    u[4 * r + 1] = 0.5f * (gg[r][0] + gg[r][1] + gg[r][2]);
    u[4 * r + 2] = 0.5f * (gg[r][0] - gg[r][1] + gg[r][2]);
    u[4 * r + 3] = gg[r][2];
  }
}

}  // namespace

// The matmul of one chunk of `rows` tile rows.
struct ChunkMatMul {
  int64_t rows = 0;
  dnnl::matmul matmul;
  memory::desc v_md, m_md;
  int64_t scratchpad_bytes = 0;
};

struct WinogradConv::Impl {
  WinogradShape shape;
  Args args;  // extents; pointers and the chunk set per chunk
  int64_t total_rows = 0;  // batch * tiles_h
  // Chunks of chunk.rows tile rows, the last one of tail.rows when fewer.
  ChunkMatMul chunk, tail;
  memory packed_u;
  int64_t weights_bytes = 0;
  int64_t scratch_bytes = 0;  // per chunk: V, M, the matmul's scratchpad
  std::string matmul_impl;
};

WinogradConv::WinogradConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WinogradConv::~WinogradConv() = default;

absl::StatusOr<std::unique_ptr<WinogradConv>> WinogradConv::Create(
    const WinogradShape& s, const float* weights) {
  if ((s.block != 8 && s.block != 16) || s.batch < 1 || s.in_channels < 1 ||
      s.out_channels < 1 || s.in_channels % s.block != 0 ||
      s.out_channels % s.block != 0 || s.pad_top < 0 || s.pad_top > 2 ||
      s.pad_left < 0 || s.pad_left > 2 || s.out_h < 1 || s.out_w < 1 ||
      s.out_h > s.in_h + 2 * s.pad_top || s.out_w > s.in_w + 2 * s.pad_left ||
      weights == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Winograd conv: unsupported shape ", s.batch, "x", s.in_channels, "x", s.in_h,
        "x", s.in_w, " -> ", s.out_channels, "x", s.out_h, "x", s.out_w, " (block ",
        s.block, ", pads ", s.pad_top, ",", s.pad_left, ")"));
  }
  auto impl = std::make_unique<Impl>();
  impl->shape = s;
  Args& a = impl->args;
  a.ic = s.in_channels;
  a.oc = s.out_channels;
  a.h = s.in_h;
  a.w = s.in_w;
  a.oh = s.out_h;
  a.ow = s.out_w;
  a.pad_top = s.pad_top;
  a.pad_left = s.pad_left;
  a.block = s.block;
  // [N][C/B][H][W][B], or [N][H][W][C] seen so.
  auto strides = [&](int64_t c, int64_t h, int64_t w) {
    return s.channels_last ? Strides{h * w * c, s.block, w * c, c}
                           : Strides{c * h * w, h * w * s.block, w * s.block, s.block};
  };
  a.src_strides = strides(s.in_channels, s.in_h, s.in_w);
  a.dst_strides = strides(s.out_channels, s.out_h, s.out_w);
  a.tiles_h = (s.out_h + 1) / 2;
  a.tiles_w = (s.out_w + 1) / 2;
  impl->total_rows = s.batch * a.tiles_h;
  // Tile rows per chunk: V and M of a chunk (16 floats per tile and
  // channel) within kChunkBytes, so the matmul reads V and the output
  // transform reads M from cache; at least one tile row.
  const int64_t row_bytes = 16 * a.tiles_w * (a.ic + a.oc) * 4;
  // Then as many chunks as that gives, rounded up to a multiple of the
  // thread count at creation (so a small conv still uses every thread), of
  // balanced sizes.
  const int64_t min_rows = (kMinChunkTiles + a.tiles_w - 1) / a.tiles_w;
  const int64_t target_rows =
      std::clamp<int64_t>(std::max(kChunkBytes / row_bytes, min_rows), 1, impl->total_rows);
  int64_t chunks = (impl->total_rows + target_rows - 1) / target_rows;
  const int64_t threads = NumThreads();
  chunks = std::min((chunks + threads - 1) / threads * threads, impl->total_rows);
  const int64_t chunk_rows = (impl->total_rows + chunks - 1) / chunks;
  const int64_t tail_rows = impl->total_rows % chunk_rows;

  try {
  dnnl::engine& engine = CpuEngine();
  using Tag = memory::format_tag;
  using DT = memory::data_type;
  const memory::desc u_any({16, a.ic, a.oc}, DT::f32, Tag::any);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  std::optional<memory::desc> packed_md;
  int64_t max_scratchpad = 0;
  for (auto [mm, rows] : {std::pair{&impl->chunk, chunk_rows},
                          std::pair{&impl->tail, tail_rows}}) {
    if (rows == 0) continue;
    mm->rows = rows;
    mm->v_md = memory::desc({16, rows * a.tiles_w, a.ic}, DT::f32, Tag::abc);
    mm->m_md = memory::desc({16, rows * a.tiles_w, a.oc}, DT::f32, Tag::abc);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(mm->v_md, u_any, mm->m_md),
                                          attr, engine);
    // Both chunks read one packed copy of U.
    if (packed_md && pd.weights_desc() != *packed_md) {
      return absl::UnimplementedError("Winograd conv: the chunk matmuls pack U differently");
    }
    packed_md = pd.weights_desc();
    mm->scratchpad_bytes = static_cast<int64_t>(pd.scratchpad_desc().get_size());
    max_scratchpad = std::max(max_scratchpad, mm->scratchpad_bytes);
    mm->matmul = dnnl::matmul(pd);
    if (mm == &impl->chunk) impl->matmul_impl = pd.impl_info_str();
  }
  // V and M of a full chunk, then the scratchpad, 64-byte aligned.
  const int64_t vm_bytes = (16 * chunk_rows * a.tiles_w * (a.ic + a.oc) * 4 + 63) / 64 * 64;
  impl->scratch_bytes = vm_bytes + max_scratchpad;

  // U[k][ic][oc], then packed once into the matmul's layout.
  auto u = hwy::AllocateAligned<float>(static_cast<size_t>(16 * a.ic * a.oc));
  if (u == nullptr) return absl::ResourceExhaustedError("Winograd conv: out of memory");
  for (int64_t o = 0; o < a.oc; ++o) {
    for (int64_t i = 0; i < a.ic; ++i) {
      float t[16];
      TransformKernel(weights + (o * a.ic + i) * 9, t);
      for (int k = 0; k < 16; ++k) u[(k * a.ic + i) * a.oc + o] = t[k];
    }
  }
  impl->packed_u = memory(*packed_md, engine);
  memory plain_u(memory::desc({16, a.ic, a.oc}, DT::f32, Tag::abc), engine, u.get());
  dnnl::stream& stream = CpuStream();
  dnnl::reorder(plain_u, impl->packed_u).execute(stream, plain_u, impl->packed_u);
  stream.wait();
  impl->weights_bytes = static_cast<int64_t>(packed_md->get_size());
  } catch (const dnnl::error& e) {
    return absl::UnimplementedError(
        absl::StrCat("Winograd conv: oneDNN refused its matmul: ", e.what()));
  }
  return std::unique_ptr<WinogradConv>(new WinogradConv(std::move(impl)));
}

void WinogradConv::Run(const float* src, float* dst) {
  const Impl& m = *impl_;
  const int64_t chunks = (m.total_rows + m.chunk.rows - 1) / m.chunk.rows;
  // Each chunk runs on one thread, start to end (transforms and a
  // single-threaded matmul: oneDNN runs sequentially inside a parallel
  // region), so V and M stay in that core's cache.
  ParallelFor(chunks, [&](int64_t c) {
    const ChunkMatMul& mm = (c + 1) * m.chunk.rows > m.total_rows ? m.tail : m.chunk;
    Args a = m.args;
    a.row0 = c * m.chunk.rows;
    a.rows = mm.rows;
    char* scratch = ThreadScratch(m.scratch_bytes);
    a.src = src;
    a.v = reinterpret_cast<float*>(scratch);
    a.m = a.v + 16 * a.rows * a.tiles_w * a.ic;
    a.dst = dst;
    HWY_DYNAMIC_DISPATCH(winograd_internal::InputChunk)(a);
    dnnl::engine& engine = CpuEngine();
    thread_local dnnl::stream stream(engine);
    mm.matmul.execute(
        stream, {{DNNL_ARG_SRC, memory(mm.v_md, engine, a.v)},
                 {DNNL_ARG_WEIGHTS, m.packed_u},
                 {DNNL_ARG_DST, memory(mm.m_md, engine, const_cast<float*>(a.m))},
                 {DNNL_ARG_SCRATCHPAD,
                  memory(memory::desc({mm.scratchpad_bytes}, memory::data_type::u8,
                                      memory::format_tag::x),
                         engine, scratch + m.scratch_bytes - mm.scratchpad_bytes)}});
    stream.wait();
    HWY_DYNAMIC_DISPATCH(winograd_internal::OutputChunk)(a);
  });
}

const WinogradShape& WinogradConv::shape() const { return impl_->shape; }
int64_t WinogradConv::weights_bytes() const { return impl_->weights_bytes; }
int64_t WinogradConv::scratch_bytes() const {
  return impl_->scratch_bytes;
}
const std::string& WinogradConv::matmul_impl() const { return impl_->matmul_impl; }

}  // namespace kiln::onednn
#endif  // HWY_ONCE
