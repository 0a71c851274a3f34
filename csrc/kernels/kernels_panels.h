/* The driver of the float panel matmuls (ha_kernels.matmul for HA_F32P, HA_BF16P, HA_F16P), shared by the
 * SIMD kernel files. A file defines, for each SUF, its register tile
 *   ptile_SUF(P, S, panel, pbytes, X, n, Y, ldy, row, r0, r1, pf)
 * (panels panel + p * pbytes for p < P, the first holding row `row`, times tokens s < S of X (S, n), into
 * Y[s * ldy + row + 16 p + i] for the rows in [r0, r1); P and S literals; pf advanced once per PANEL_STEP
 * columns: 64 unless the file defines it before including this), PANEL_GROUP(S) (panels per tile of S tokens, a
 * literal for a literal S, never growing with S), PANEL_ALONE_SUF(S) (panels per group for a matmul of S tokens
 * run as one tile without software prefetch, or 0 for one run as groups of PANEL_GROUP(S) with it), MAX_S
 * (tokens per tile of a matmul cut into tiles) and MAX_CASE (the widest tile, >= MAX_S, a bare literal: 6, 8 or
 * 12), PANEL_TILE_MAX_SUF(T) (tokens per tile at most for a matmul of T tokens cut into tiles, MAX_S to
 * MAX_CASE); then HA_DEFINE_MATMUL_PANELS(ATTR, SUF, DTYPE) defines matmul_SUF.
 *
 * Y[t, r] for r0 <= r < r1: groups of panels, each run by tiles of up to PANEL_TILE_MAX_SUF(T) tokens, as even
 * as possible (6: T = 9 is 5 + 4), the group as large as the widest tile's PANEL_GROUP (a tile whose own
 * differs runs the group in smaller pieces: HA_PANEL_TILE_CASE). A matmul of T <= MAX_CASE tokens with
 * PANEL_ALONE_SUF(T) (T = 1 everywhere; on AVX2 float32 also T = 2, 3; on AVX-512 every T up to 12) is one tile
 * over groups of that many panels, streamed without prefetching the next group: many panels side by side are
 * many streams, which the next group's software prefetch would only compete with (the AVX-512 tiles prefetch
 * each panel's own stream a little ahead instead, kernels_avx512.c). Otherwise the tiles share out the prefetch
 * of the next group into L2 (with several tiles the first reads the group from memory and the others from L2).
 * Tiling never changes a result: every output is its own chain over k in order. */
#ifndef HA_KERNELS_PANELS_H
#define HA_KERNELS_PANELS_H

#ifndef PANEL_STEP
#define PANEL_STEP 64 /* columns per prefetch step */
#endif

/* A tile's outputs for the 16 rows b .. b + 15 of a panel, v (16,), into y where the row falls in [r0, r1)
 * (the part of a panel cut by the range's ends). */
static inline void ha_store_panel_rows(float *y, int64_t b, int64_t r0, int64_t r1, const float *v) {
    for (int i = 0; i < HA_PANEL_ROWS; i++)
        if (b + i >= r0 && b + i < r1) y[b + i] = v[i];
}

/* The widest group tiles of S tokens are run over (by the kernels of SUF). */
#define HA_PANEL_WIDEST(SUF, S) (PANEL_ALONE_##SUF(S) > PANEL_GROUP(S) ? PANEL_ALONE_##SUF(S) : PANEL_GROUP(S))

/* A tile of S (a literal) tokens over the group's np panels: the tile shape PANEL_ALONE_SUF(S) or PANEL_GROUP(S)
 * if the group has that many panels, else (a narrower tile, or the range's last group cut short) runs of 4,
 * 3, 2 and 1 panels (each only where the widest of the two exceeds it), so that a cut group still reads
 * several panels side by side (AVX2 at one token: exactly the tiles it ran before this driver was shared). */
#define HA_PANEL_TILE_RUN(SUF, P, S) \
    ptile_##SUF(P, S, panel + (size_t)p * pbytes, pbytes, x, n, y, ldy, row + p * HA_PANEL_ROWS, r0, r1, pf)
#define HA_PANEL_TILE_CASE(SUF, S)                                    \
    case S: {                                                         \
        int64_t p = 0;                                                \
        if (PANEL_ALONE_##SUF(S) > 0 && np == PANEL_ALONE_##SUF(S)) { \
            HA_PANEL_TILE_RUN(SUF, PANEL_ALONE_##SUF(S), S);          \
            break;                                                    \
        }                                                             \
        if (np == PANEL_GROUP(S)) {                                   \
            HA_PANEL_TILE_RUN(SUF, PANEL_GROUP(S), S);                \
            break;                                                    \
        }                                                             \
        if (HA_PANEL_WIDEST(SUF, S) > 4 && np - p >= 4) {             \
            HA_PANEL_TILE_RUN(SUF, 4, S);                             \
            p += 4;                                                   \
        }                                                             \
        if (HA_PANEL_WIDEST(SUF, S) > 3 && np - p >= 3) {             \
            HA_PANEL_TILE_RUN(SUF, 3, S);                             \
            p += 3;                                                   \
        }                                                             \
        if (HA_PANEL_WIDEST(SUF, S) > 2 && np - p >= 2) {             \
            HA_PANEL_TILE_RUN(SUF, 2, S);                             \
            p += 2;                                                   \
        }                                                             \
        for (; p < np; p++) HA_PANEL_TILE_RUN(SUF, 1, S);             \
        break;                                                        \
    }

/* The cases S = 1 .. M (MAX_CASE, a bare literal: 6, 8 or 12). clang-format off: it reads the runs of cases as
 * declarations and re-wraps its own output on every pass. */
/* clang-format off */
#define HA_PANEL_TILE_CASES(M, SUF) HA_PANEL_TILE_CASES_(M, SUF)
#define HA_PANEL_TILE_CASES_(M, SUF) HA_PANEL_TILE_CASES_##M(SUF)
#define HA_PANEL_TILE_CASES_6(SUF)                                                                      \
    HA_PANEL_TILE_CASE(SUF, 1) HA_PANEL_TILE_CASE(SUF, 2) HA_PANEL_TILE_CASE(SUF, 3)                    \
    HA_PANEL_TILE_CASE(SUF, 4) HA_PANEL_TILE_CASE(SUF, 5) HA_PANEL_TILE_CASE(SUF, 6)
#define HA_PANEL_TILE_CASES_8(SUF) HA_PANEL_TILE_CASES_6(SUF) HA_PANEL_TILE_CASE(SUF, 7) HA_PANEL_TILE_CASE(SUF, 8)
#define HA_PANEL_TILE_CASES_12(SUF)                                                                     \
    HA_PANEL_TILE_CASES_8(SUF) HA_PANEL_TILE_CASE(SUF, 9) HA_PANEL_TILE_CASE(SUF, 10)                   \
    HA_PANEL_TILE_CASE(SUF, 11) HA_PANEL_TILE_CASE(SUF, 12)
/* clang-format on */

#define HA_DEFINE_MATMUL_PANELS(ATTR, SUF, DTYPE)                                                                     \
    ATTR static void matmul_##SUF(const void *W, int64_t n, int64_t r0, int64_t r1, const float *X, int64_t T,        \
                                  float *Y, int64_t ldy) {                                                            \
        if (T < 1 || r0 >= r1) return;                                                                                \
        const size_t pbytes = ha_matrix_bytes(DTYPE, HA_PANEL_ROWS, n);                                               \
        const int64_t alone = T <= MAX_CASE ? PANEL_ALONE_##SUF(T) : 0;                                               \
        const int64_t tiles = alone ? 1 : (T + PANEL_TILE_MAX_##SUF(T) - 1) / PANEL_TILE_MAX_##SUF(T);                \
        const int64_t G = alone ? alone : PANEL_GROUP((T + tiles - 1) / tiles);                                       \
        const int64_t p_end = (r1 + HA_PANEL_ROWS - 1) / HA_PANEL_ROWS;                                               \
        const int64_t steps = tiles * ((n + PANEL_STEP - 1) / PANEL_STEP);                                            \
        for (int64_t p0 = r0 / HA_PANEL_ROWS; p0 < p_end; p0 += G) {                                                  \
            const int64_t np = p_end - p0 < G ? p_end - p0 : G, next = p_end - (p0 + np) < G ? p_end - (p0 + np) : G; \
            const char *panel = (const char *)W + (size_t)p0 * pbytes;                                                \
            ha_prefetcher ahead = ha_prefetcher_over(panel + (size_t)np * pbytes, (size_t)next * pbytes, steps);      \
            ha_prefetcher *pf = alone ? NULL : &ahead;                                                                \
            const int64_t row = p0 * HA_PANEL_ROWS;                                                                   \
            int64_t t = 0;                                                                                            \
            for (int64_t i = 0; i < tiles; i++) {                                                                     \
                const int64_t S = (T - t + (tiles - i) - 1) / (tiles - i);                                            \
                const float *x = X + t * n;                                                                           \
                float *y = Y + t * ldy;                                                                               \
                switch (S) { HA_PANEL_TILE_CASES(MAX_CASE, SUF) }                                                     \
                t += S;                                                                                               \
            }                                                                                                         \
        }                                                                                                             \
    }

#endif /* HA_KERNELS_PANELS_H */
