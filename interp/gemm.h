// File: interp/gemm.h — the reference's matrix-multiply loop, shared by Gemm,
// MatMul, Einsum and Conv (im2col): plain C++ the compiler can vectorize,
// fast enough for the reference to run whole models.
#ifndef KILN_INTERP_GEMM_H_
#define KILN_INTERP_GEMM_H_

#include <cstdint>

namespace kiln::interp {

// c_r[j] += a_r * b[j] for four rows r; restrict parameters let the
// compiler vectorize.
template <typename Acc>
void Axpy4(int64_t n, Acc a0, Acc a1, Acc a2, Acc a3, const Acc* __restrict b,
           Acc* __restrict c0, Acc* __restrict c1, Acc* __restrict c2,
           Acc* __restrict c3) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int u = 0; u < 4; ++u) {
      const Acc bv = b[j + u];
      c0[j + u] += a0 * bv;
      c1[j + u] += a1 * bv;
      c2[j + u] += a2 * bv;
      c3[j + u] += a3 * bv;
    }
  }
  for (; j < n; ++j) {
    const Acc bv = b[j];
    c0[j] += a0 * bv;
    c1[j] += a1 * bv;
    c2[j] += a2 * bv;
    c3[j] += a3 * bv;
  }
}

template <typename Acc>
void Axpy(int64_t n, Acc a, const Acc* __restrict b, Acc* __restrict c) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    for (int u = 0; u < 4; ++u) c[j + u] += a * b[j + u];
  }
  for (; j < n; ++j) c[j] += a * b[j];
}

// C += A * B for row-major A [M,K], B [K,N], C [M,N]; i-k-j order so the
// inner loop is contiguous, four rows of C at a time so each row of B is
// read once per four rows (the reference must run whole models).
template <typename Acc>
void GemmAccumulate(int64_t m, int64_t k, int64_t n, const Acc* a,
                    const Acc* b, Acc* c) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    Acc* c0 = c + i * n;
    for (int64_t p = 0; p < k; ++p) {
      Axpy4<Acc>(n, a[i * k + p], a[(i + 1) * k + p], a[(i + 2) * k + p],
                 a[(i + 3) * k + p], b + p * n, c0, c0 + n, c0 + 2 * n,
                 c0 + 3 * n);
    }
  }
  for (; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      Axpy<Acc>(n, a[i * k + p], b + p * n, c + i * n);
    }
  }
}

}  // namespace kiln::interp

#endif  // KILN_INTERP_GEMM_H_
