/* Grouped weight-only int8 matmul for the residual adapters of a mixed batch (CPU).
 *
 * out[g] = relu?(x[g] @ (W[slots[g]] * scale[slots[g]]) + bias[g])   for g < groups
 *
 * x      [groups, rows, k]                    float32, contiguous
 * w      [n_slots, n / 64, k, 64]             int8: one layer of a bank, blocks of 64 output
 *                                             columns, so that a block is one contiguous read
 * scale  [n_slots, n]                         float32, one per output column
 * bias   [groups, n]                          float32 (the groups' own, gathered)
 * out    [groups, rows, n]                    float32
 *
 * Every (group, block) reads its 64 x k weights once and uses them for all the group's rows,
 * 4 rows at a time. Built by server/engine/int8_groups.py with -O3 -march=native -fopenmp;
 * without AVX-512 the plain loop below is left to the compiler's vectorizer.
 */
#include <stdint.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define BLOCK 64

static void block_rows(const float *x, int64_t rows, int64_t k_dim, const int8_t *w,
                       const float *scale, const float *bias, float *out, int64_t n_dim,
                       int relu) {
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
        const int64_t nr = rows - r0 < 4 ? rows - r0 : 4;
        const float *xr = x + r0 * k_dim;
#ifdef __AVX512F__
        __m512 acc[4][4];
        for (int r = 0; r < 4; ++r)
            for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
        for (int64_t k = 0; k < k_dim; ++k) {
            const int8_t *wk = w + k * BLOCK;
            __m512 wv[4];
            for (int j = 0; j < 4; ++j)
                wv[j] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                    _mm_loadu_si128((const __m128i *)(wk + 16 * j))));
            for (int64_t r = 0; r < nr; ++r) {
                const __m512 xv = _mm512_set1_ps(xr[r * k_dim + k]);
                for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_fmadd_ps(xv, wv[j], acc[r][j]);
            }
        }
        for (int j = 0; j < 4; ++j) {
            const __m512 s = _mm512_loadu_ps(scale + 16 * j);
            const __m512 b = _mm512_loadu_ps(bias + 16 * j);
            for (int64_t r = 0; r < nr; ++r) {
                __m512 v = _mm512_fmadd_ps(acc[r][j], s, b);
                if (relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
                _mm512_storeu_ps(out + (r0 + r) * n_dim + 16 * j, v);
            }
        }
#else
        float acc[4][BLOCK] = {{0}};
        for (int64_t k = 0; k < k_dim; ++k) {
            const int8_t *wk = w + k * BLOCK;
            for (int64_t r = 0; r < nr; ++r) {
                const float xv = xr[r * k_dim + k];
                for (int j = 0; j < BLOCK; ++j) acc[r][j] += xv * (float)wk[j];
            }
        }
        for (int64_t r = 0; r < nr; ++r)
            for (int j = 0; j < BLOCK; ++j) {
                float v = acc[r][j] * scale[j] + bias[j];
                out[(r0 + r) * n_dim + j] = relu && v < 0.0f ? 0.0f : v;
            }
#endif
    }
}

void nmt_grouped_int8(const float *x, int64_t groups, int64_t rows, int64_t k_dim,
                      const int8_t *w, const float *scale, const int64_t *slots,
                      const float *bias, float *out, int64_t n_dim, int relu, int threads) {
    const int64_t blocks = n_dim / BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t task = 0; task < groups * blocks; ++task) {
        const int64_t g = task / blocks, c0 = (task % blocks) * BLOCK;
        const int64_t slot = slots[g];
        block_rows(x + g * rows * k_dim, rows, k_dim,
                   w + (slot * blocks + c0 / BLOCK) * k_dim * BLOCK, scale + slot * n_dim + c0,
                   bias + g * n_dim + c0, out + g * rows * n_dim + c0, n_dim, relu);
    }
}
