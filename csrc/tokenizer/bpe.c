/* BPE merges: the hot loop of tokenizer.json's BPE model (habana_assist/tokenization/tokenizer_json.py).
 *
 * A word (code points) becomes its first symbols, one per code point (its vocabulary id; else, with byte
 * fallback, one symbol per UTF-8 byte "<0xNN>"; else unk, runs of unk fused into one where fuse_unk says), then
 * adjacent pairs are merged as Hugging Face tokenizers' Word::merge_all does: always the pair of lowest rank,
 * leftmost on ties, through a min-heap of (rank, position) entries that are checked for staleness when popped.
 * O(n log n) in the word's length, so a whole paragraph given as one word (SentencePiece-style BPE without a
 * pre-tokenizer, Llama 2 / Gemma) costs what its symbols cost. */
#include <stdlib.h>
#include <string.h>

#include "../core/core.h"

/* Open-addressing hash map from a 64-bit key to two int32 values; capacity a power of two, at most half full. */
typedef struct {
    uint64_t *keys; /* key + 1; 0 marks an empty slot */
    int32_t *a, *b;
    uint64_t mask;
} table;

static uint64_t mix(uint64_t k) { /* splitmix64's finalizer */
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebULL;
    return k ^ (k >> 31);
}

static ha_status table_init(table *t, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    t->keys = calloc(cap, sizeof *t->keys);
    t->a = malloc(cap * sizeof *t->a);
    t->b = malloc(cap * sizeof *t->b);
    t->mask = cap - 1;
    if (!t->keys || !t->a || !t->b)
        return ha_fail(HA_ERR_NOMEM, "bpe: no memory for a table of %llu slots", (unsigned long long)cap);
    return HA_OK;
}

static void table_free(table *t) {
    free(t->keys);
    free(t->a);
    free(t->b);
}

/* Inserts or overwrites (a later merges entry of the same pair wins, as a Rust HashMap collected in order). */
static void table_put(table *t, uint64_t key, int32_t a, int32_t b) {
    uint64_t i = mix(key) & t->mask;
    while (t->keys[i] && t->keys[i] != key + 1) i = (i + 1) & t->mask;
    t->keys[i] = key + 1;
    t->a[i] = a;
    t->b[i] = b;
}

/* The slot of key, or -1. */
static int64_t table_find(const table *t, uint64_t key) {
    uint64_t i = mix(key) & t->mask;
    while (t->keys[i]) {
        if (t->keys[i] == key + 1) return (int64_t)i;
        i = (i + 1) & t->mask;
    }
    return -1;
}

struct ha_bpe {
    table merges; /* (left << 32 | right) -> rank, result */
    table chars;  /* code point -> id, unused */
    int32_t byte_ids[256];
    int has_bytes;
    int32_t unk_id;
    int fuse_unk;
};

ha_status ha_bpe_create(const int32_t *merges, int64_t n_merges, const uint32_t *chars, const int32_t *char_ids,
                        int64_t n_chars, const int32_t *byte_ids, int32_t unk_id, int fuse_unk, int64_t vocab_size,
                        ha_bpe **out) {
    if (!out) return ha_fail(HA_ERR_INVALID, "bpe: out is NULL");
    *out = NULL;
    if (n_merges < 0 || n_chars < 0 || vocab_size < 1 || vocab_size > INT32_MAX || (n_merges && !merges) ||
        (n_chars && (!chars || !char_ids)) || unk_id < -1 || unk_id >= vocab_size)
        return ha_fail(HA_ERR_INVALID, "bpe: bad sizes or ids (n_merges %lld, n_chars %lld, unk %d, vocab %lld)",
                       (long long)n_merges, (long long)n_chars, unk_id, (long long)vocab_size);
    for (int64_t i = 0; i < n_merges * 3; i++)
        if (merges[i] < 0 || merges[i] >= vocab_size)
            return ha_fail(HA_ERR_INVALID, "bpe: merge %lld names id %d outside [0, %lld)", (long long)(i / 3),
                           merges[i], (long long)vocab_size);
    for (int64_t i = 0; i < n_chars; i++)
        if (char_ids[i] < 0 || char_ids[i] >= vocab_size || chars[i] > 0x10FFFF)
            return ha_fail(HA_ERR_INVALID, "bpe: character %lld (U+%X -> %d) is outside the vocabulary", (long long)i,
                           chars[i], char_ids[i]);
    if (byte_ids)
        for (int i = 0; i < 256; i++)
            if (byte_ids[i] < -1 || byte_ids[i] >= vocab_size)
                return ha_fail(HA_ERR_INVALID, "bpe: byte 0x%02X's id %d is outside the vocabulary", i, byte_ids[i]);
    ha_bpe *b = calloc(1, sizeof *b);
    if (!b) return ha_fail(HA_ERR_NOMEM, "bpe: no memory");
    ha_status st = table_init(&b->merges, n_merges);
    if (st == HA_OK) st = table_init(&b->chars, n_chars);
    if (st != HA_OK) {
        ha_bpe_free(b);
        return st;
    }
    for (int64_t i = 0; i < n_merges; i++) {
        uint64_t key = (uint64_t)(uint32_t)merges[3 * i] << 32 | (uint32_t)merges[3 * i + 1];
        table_put(&b->merges, key, (int32_t)i, merges[3 * i + 2]);
    }
    for (int64_t i = 0; i < n_chars; i++) table_put(&b->chars, chars[i], char_ids[i], 0);
    b->has_bytes = byte_ids != NULL;
    for (int i = 0; i < 256; i++) b->byte_ids[i] = byte_ids ? byte_ids[i] : -1;
    b->unk_id = unk_id;
    b->fuse_unk = fuse_unk;
    *out = b;
    return HA_OK;
}

void ha_bpe_free(ha_bpe *b) {
    if (!b) return;
    table_free(&b->merges);
    table_free(&b->chars);
    free(b);
}

/* UTF-8 of code point c into out (4 bytes of room) -> its length; c <= 0x10FFFF (checked by the caller). */
static int utf8(uint32_t c, unsigned char *out) {
    if (c < 0x80) {
        out[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (unsigned char)(0xC0 | c >> 6);
        out[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (unsigned char)(0xE0 | c >> 12);
        out[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        out[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | c >> 18);
    out[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    out[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
    out[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

typedef struct { int32_t rank, pos, result; } entry;

static int before(entry x, entry y) { return x.rank != y.rank ? x.rank < y.rank : x.pos < y.pos; }

static void heap_push(entry *h, int64_t *n, entry e) {
    int64_t i = (*n)++;
    while (i > 0 && before(e, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static entry heap_pop(entry *h, int64_t *n) {
    entry top = h[0], last = h[--*n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(h[c + 1], h[c])) c++;
        if (!before(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

/* Pushes the merge of the pair starting at symbol pos, if the merges have one. */
static void push_pair(const ha_bpe *b, const int32_t *id, const int32_t *next, int32_t pos, entry *heap,
                      int64_t *n_heap) {
    if (next[pos] < 0) return;
    int64_t slot = table_find(&b->merges, (uint64_t)(uint32_t)id[pos] << 32 | (uint32_t)id[next[pos]]);
    if (slot >= 0) heap_push(heap, n_heap, (entry){ b->merges.a[slot], pos, b->merges.b[slot] });
}

ha_status ha_bpe_encode(const ha_bpe *b, const uint32_t *word, int64_t n, int32_t *ids, int64_t cap, int64_t *n_ids) {
    if (!b || !n_ids || n < 0 || (n && !word) || !ids || cap < 4 * n)
        return ha_fail(HA_ERR_INVALID, "bpe_encode: bad arguments (n %lld, cap %lld; cap must be >= 4 n)", (long long)n,
                       (long long)cap);
    if (n > INT32_MAX / 8)
        return ha_fail(HA_ERR_INVALID, "bpe_encode: a word of %lld characters is too long", (long long)n);
    *n_ids = 0;
    /* The first symbols are written into ids itself (at most 4 per code point), then linked and merged. */
    int64_t m = 0;
    int unk_open = 0; /* the last symbol is an unk that a following unknown character may fuse into */
    for (int64_t i = 0; i < n; i++) {
        if (word[i] > 0x10FFFF) return ha_fail(HA_ERR_INVALID, "bpe_encode: U+%X is not a code point", word[i]);
        int64_t slot = table_find(&b->chars, word[i]);
        if (slot >= 0) {
            ids[m++] = b->chars.a[slot];
            unk_open = 0;
            continue;
        }
        if (b->has_bytes) {
            unsigned char u[4];
            int len = utf8(word[i], u), ok = 1;
            for (int k = 0; k < len; k++) ok &= b->byte_ids[u[k]] >= 0;
            if (ok) {
                for (int k = 0; k < len; k++) ids[m++] = b->byte_ids[u[k]];
                unk_open = 0;
                continue;
            }
        }
        if (b->unk_id < 0)
            return ha_fail(HA_ERR_INVALID,
                           "bpe_encode: U+%04X is not in the vocabulary, which has no unk_token "
                           "(and no byte fallback for it)",
                           word[i]);
        if (!(unk_open && b->fuse_unk)) ids[m++] = b->unk_id;
        unk_open = 1;
    }
    if (m <= 1) {
        *n_ids = m;
        return HA_OK;
    }
    int32_t *prev = malloc((size_t)m * sizeof *prev), *next = malloc((size_t)m * sizeof *next);
    entry *heap = malloc((size_t)(2 * m) * sizeof *heap); /* m - 1 at first, at most 2 more per merge */
    if (!prev || !next || !heap) {
        free(prev);
        free(next);
        free(heap);
        return ha_fail(HA_ERR_NOMEM, "bpe_encode: no memory for a word of %lld symbols", (long long)m);
    }
    int64_t n_heap = 0;
    for (int32_t i = 0; i < m; i++) {
        prev[i] = i - 1;
        next[i] = i + 1 < m ? i + 1 : -1;
    }
    for (int32_t i = 0; i + 1 < m; i++) push_pair(b, ids, next, i, heap, &n_heap);
    /* A merged-away symbol gets id -1; an entry is stale when its left symbol is gone, has no right neighbour, or
     * the pair there now merges into something else (tokenizers checks only the result, and so do we). */
    while (n_heap > 0) {
        entry e = heap_pop(heap, &n_heap);
        int32_t p = e.pos, q = next[p];
        if (ids[p] < 0 || q < 0) continue;
        int64_t slot = table_find(&b->merges, (uint64_t)(uint32_t)ids[p] << 32 | (uint32_t)ids[q]);
        if (slot < 0 || b->merges.b[slot] != e.result) continue;
        ids[p] = e.result;
        ids[q] = -1;
        next[p] = next[q];
        if (next[q] >= 0) prev[next[q]] = p;
        if (prev[p] >= 0) push_pair(b, ids, next, prev[p], heap, &n_heap);
        push_pair(b, ids, next, p, heap, &n_heap);
    }
    int64_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) ids[k++] = ids[i]; /* symbol 0 is never merged away */
    *n_ids = k;
    free(prev);
    free(next);
    free(heap);
    return HA_OK;
}
