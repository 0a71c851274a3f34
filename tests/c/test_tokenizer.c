#include "test_core.h"

/* ---- BPE merges ------------------------------------------------------------------------------------------- */

/* The merge rule written the slow way: find the lowest-rank adjacent pair (leftmost on ties), merge it, repeat. */
static int64_t bpe_naive(const int32_t *merges, int64_t n_merges, int32_t *sym, int64_t m) {
    for (;;) {
        int64_t best = -1, best_rank = INT64_MAX;
        int32_t result = -1;
        for (int64_t i = 0; i + 1 < m; i++) {
            int64_t rank = -1;
            for (int64_t r = 0; r < n_merges; r++) /* the last row of a pair wins */
                if (merges[3 * r] == sym[i] && merges[3 * r + 1] == sym[i + 1]) rank = r;
            if (rank >= 0 && rank < best_rank) {
                best_rank = rank;
                best = i;
                result = merges[3 * rank + 2];
            }
        }
        if (best < 0) return m;
        sym[best] = result;
        memmove(sym + best + 1, sym + best + 2, (size_t)(m - best - 2) * sizeof *sym);
        m--;
    }
}

void test_bpe_merges_lowest_rank_leftmost_first(void) {
    /* ids: a=0 b=1 c=2 ab=3 bc=4 abc=5 aa=6 aaa=7 */
    const uint32_t chars[] = { 'a', 'b', 'c' };
    const int32_t char_ids[] = { 0, 1, 2 };
    const int32_t merges[] = { 1, 2, 4, /* b c  (rank 0) */ 0, 1, 3, /* a b */ 0, 4, 5, /* a bc */ 0, 0, 6, /* a a */
                               6, 0, 7 /* aa a */ };
    ha_bpe *b = NULL;
    CHECK(ha_bpe_create(merges, 5, chars, char_ids, 3, NULL, -1, 0, 8, &b) == HA_OK, "%s", ha_last_error());
    const uint32_t abc[] = { 'a', 'b', 'c' }, aaaa[] = { 'a', 'a', 'a', 'a' }, aaa[] = { 'a', 'a', 'a' };
    int32_t ids[64];
    int64_t n = -1;
    CHECK(ha_bpe_encode(b, abc, 3, ids, 12, &n) == HA_OK && n == 1 && ids[0] == 5, "abc -> bc first, then a+bc");
    CHECK(ha_bpe_encode(b, aaaa, 4, ids, 16, &n) == HA_OK && n == 2 && ids[0] == 6 && ids[1] == 6,
          "aaaa -> aa aa (leftmost first on ties), got %lld ids", (long long)n);
    CHECK(ha_bpe_encode(b, aaa, 3, ids, 12, &n) == HA_OK && n == 1 && ids[0] == 7, "aaa -> aa a -> aaa");
    CHECK(ha_bpe_encode(b, aaa, 0, ids, 0, &n) == HA_OK && n == 0, "an empty word has no ids");
    CHECK(ha_bpe_encode(b, aaa, 3, ids, 11, &n) == HA_ERR_INVALID, "cap below 4 n is refused");
    const uint32_t bad[] = { 'a', 0x110000 }, unknown[] = { 'a', 'z' };
    CHECK(ha_bpe_encode(b, bad, 2, ids, 8, &n) == HA_ERR_INVALID, "a value above U+10FFFF is refused");
    CHECK(ha_bpe_encode(b, unknown, 2, ids, 8, &n) == HA_ERR_INVALID && strstr(ha_last_error(), "U+007A"),
          "no unk and no byte fallback: the unknown character is named (%s)", ha_last_error());
    ha_bpe_free(b);
}

void test_bpe_byte_fallback_and_fused_unk(void) {
    const uint32_t chars[] = { 'a' };
    const int32_t char_ids[] = { 1 };
    int32_t byte_ids[256];
    for (int i = 0; i < 256; i++) byte_ids[i] = -1;
    byte_ids[0xC3] = 2; /* "é" is C3 A9: both bytes known */
    byte_ids[0xA9] = 3;
    const int32_t merges[] = { 2, 3, 4 }; /* <0xC3> <0xA9> merge like any symbols */
    ha_bpe *b = NULL;
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, byte_ids, 0, 1, 5, &b) == HA_OK, "%s", ha_last_error());
    const uint32_t word[] = { 'a', 0xE9, 0x4E2D, 0x6587, 'a', 0x4E2D };
    int32_t ids[24];
    int64_t n = -1;
    CHECK(ha_bpe_encode(b, word, 6, ids, 24, &n) == HA_OK, "%s", ha_last_error());
    const int32_t want[] = { 1, 4, 0, 1, 0 }; /* a, é merged, two unknown CJK fused into one unk, a, unk */
    CHECK(n == 5 && memcmp(ids, want, sizeof want) == 0, "byte fallback then fused unk: got %lld ids", (long long)n);
    ha_bpe_free(b);
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, byte_ids, 0, 0, 5, &b) == HA_OK, "%s", ha_last_error());
    CHECK(ha_bpe_encode(b, word, 6, ids, 24, &n) == HA_OK && n == 6 && ids[2] == 0 && ids[3] == 0,
          "without fuse_unk each unknown character is its own unk");
    ha_bpe_free(b);
}

void test_bpe_equals_naive_rule_on_random_merges(void) {
    /* 4 letters, random merges over every id made so far (duplicated pairs included), long random words. */
    rng s = { 12345 };
    enum { LETTERS = 4, MERGES = 60, VOCAB = LETTERS + MERGES };
    int32_t merges[3 * MERGES];
    for (int r = 0; r < MERGES; r++) {
        merges[3 * r] = (int32_t)(rng_next(&s) % (uint64_t)(LETTERS + r));
        merges[3 * r + 1] = (int32_t)(rng_next(&s) % (uint64_t)(LETTERS + r));
        merges[3 * r + 2] = LETTERS + r;
    }
    const uint32_t chars[LETTERS] = { 'a', 'b', 'c', 'd' };
    const int32_t char_ids[LETTERS] = { 0, 1, 2, 3 };
    ha_bpe *b = NULL;
    CHECK(ha_bpe_create(merges, MERGES, chars, char_ids, LETTERS, NULL, -1, 0, VOCAB, &b) == HA_OK, "%s",
          ha_last_error());
    for (int trial = 0; trial < 200; trial++) {
        int64_t len = 1 + (int64_t)(rng_next(&s) % 300);
        uint32_t word[300];
        int32_t got[1200], want[300];
        for (int64_t i = 0; i < len; i++) {
            word[i] = chars[rng_next(&s) % LETTERS];
            want[i] = (int32_t)(word[i] - 'a');
        }
        int64_t n = -1, m = bpe_naive(merges, MERGES, want, len);
        CHECK(ha_bpe_encode(b, word, len, got, 4 * len, &n) == HA_OK, "%s", ha_last_error());
        CHECK(n == m && memcmp(got, want, (size_t)m * sizeof *got) == 0,
              "trial %d (length %lld): %lld ids, naive "
              "%lld",
              trial, (long long)len, (long long)n, (long long)m);
    }
    ha_bpe_free(b);
}

void test_bpe_create_rejects_bad_tables(void) {
    const uint32_t chars[] = { 'a' };
    const int32_t char_ids[] = { 0 }, bad_ids[] = { 9 };
    const int32_t merges[] = { 0, 0, 1 }, bad_merges[] = { 0, 0, 7 };
    int32_t byte_ids[256];
    for (int i = 0; i < 256; i++) byte_ids[i] = -2;
    ha_bpe *b = (ha_bpe *)&b;
    CHECK(ha_bpe_create(bad_merges, 1, chars, char_ids, 1, NULL, -1, 0, 2, &b) == HA_ERR_INVALID && !b,
          "a merge naming an id outside the vocabulary is refused and nothing is made");
    CHECK(ha_bpe_create(merges, 1, chars, bad_ids, 1, NULL, -1, 0, 2, &b) == HA_ERR_INVALID, "bad character id");
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, byte_ids, -1, 0, 2, &b) == HA_ERR_INVALID, "bad byte id");
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, NULL, 2, 0, 2, &b) == HA_ERR_INVALID, "unk outside");
    CHECK(ha_bpe_create(merges, -1, chars, char_ids, 1, NULL, -1, 0, 2, &b) == HA_ERR_INVALID, "negative count");
    CHECK(ha_bpe_create(NULL, 1, chars, char_ids, 1, NULL, -1, 0, 2, &b) == HA_ERR_INVALID, "NULL merges");
    CHECK(ha_bpe_create(merges, 1, chars, char_ids, 1, NULL, -1, 0, 2, NULL) == HA_ERR_INVALID, "NULL out");
    ha_bpe_free(NULL);
}
