/* What the C tests of the core share (the files of tests/c/, one program: tests/core/test_c_core.py builds it): the
 * checks, the test data, the independent decoders the kernels are checked against, the tiny model, and every
 * test function, which main.c lists. */
#ifndef HA_TEST_CORE_H
#define HA_TEST_CORE_H

#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../../csrc/core/core.h"
#include "../../csrc/kernels/kernels.h"
#include "../../csrc/model/model.h"


/* ---- checks, test data, decoders, the tiny model (common.c) ---- */

extern const char *current_test;
/* an address to preset a create call's out-pointer with: a refused create must set it to NULL */
extern int sentinel_model;

__attribute__((format(printf, 3, 4), noreturn)) void fail_at(const char *file, int line, const char *fmt, ...);

#define FAIL(...) fail_at(__FILE__, __LINE__, __VA_ARGS__)

/* CHECK(cond, "expected ..., got ...", args) */
#define CHECK(cond, ...)                                               \
    do {                                                               \
        if (!(cond)) FAIL("check `" #cond "` is false: " __VA_ARGS__); \
    } while (0)

const char *status_name(ha_status s);

/* The call returns `want`; on a mismatch shows both statuses and ha_last_error(). */
#define CHECK_STATUS(call, want)                                                                             \
    do {                                                                                                     \
        ha_status st_ = (call);                                                                              \
        if (st_ != (want))                                                                                   \
            FAIL("%s: expected %s, got %s (last error: \"%s\")", #call, status_name(want), status_name(st_), \
                 ha_last_error());                                                                           \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, HA_OK)

/* ha_last_error() contains `needle`. */
#define CHECK_MSG(needle)                                                                                \
    do {                                                                                                 \
        if (!strstr(ha_last_error(), (needle)))                                                          \
            FAIL("expected the error message to mention \"%s\", got \"%s\"", (needle), ha_last_error()); \
    } while (0)

uint32_t fbits(float f);

float bits_f(uint32_t u);

/* got (n,) is bitwise equal to want (n,). */
#define CHECK_SAME_FLOATS(want, got, n, ...) check_same_floats(__FILE__, __LINE__, (want), (got), (n), __VA_ARGS__)

__attribute__((format(printf, 6, 7))) void check_same_floats(const char *file, int line, const float *want,
                                                             const float *got, size_t n, const char *fmt, ...);

void *xmalloc(size_t n);

void *xcalloc(size_t n, size_t size);

/* ---- test data: a small deterministic generator (splitmix64) ---------------------------------------- */

typedef struct rng { uint64_t s; } rng;

uint64_t rng_next(rng *r);

double rng_uniform(rng *r, double lo, double hi);

int32_t rng_int(rng *r, int32_t n);

double half_value(uint16_t h);

double bf16_value(uint16_t b);

uint16_t half_from_float(float f);

const char *dname(ha_dtype t);

ha_dtype element_dtype(ha_dtype t);

void *make_weights(ha_dtype dt, int64_t rows, int64_t cols, rng *r, double scale, int wide, double *vals);

void *make_row_major_weights(ha_dtype dt, int64_t rows, int64_t cols, rng *r, double scale, int wide, double *vals);

float *make_floats(size_t n, rng *r, double lo, double hi);

/* The kernel variants this CPU runs: scalar always, the others where ha_kernels_find has them (avx512-emulated
 * wherever avx2 runs and the build found libsimde-dev; avx-vnni-evex wherever AVX-512 VNNI and VL run). */
static const char *const VARIANTS[] = { "scalar", "avx2", "avx-vnni", "avx512", "avx512-emulated", "avx-vnni-evex" };

#define NVARIANTS 6

int kernel_variants(const ha_kernels **out, const char **names);

void run_matmul(const ha_kernels *k, ha_dtype dt, const void *W, int64_t n, int64_t r0, int64_t r1, const float *X,
                int64_t T, float *Y, int64_t ldy);

static const int64_t KN[] = { 1, 7, 8, 15, 16, 17, 33, 100, 257, 523 };

static const int64_t KR[] = { 1, 3, 4, 5, 9 };

#define COUNT(a) (sizeof(a) / sizeof *(a))

#define SENTINEL 0x7fc0deadu

/* ---- the tiny model ------------------------------------------------------------------------------------ */

enum { TV = 50, TD = 32, TL = 2, TNH = 4, TNKV = 2, THD = 8, TF = 48, TQ = TNH * THD, TKV = TNKV * THD };

typedef struct tiny {
    ha_llama_config cfg;
    double inv_freq[THD / 2];
    double inv_freq_long[THD / 2]; /* longrope's long table, where tiny_build_longrope gives one */
    ha_llama_layer layers[TL];
    ha_llama_weights w;
    void *bufs[64];
    int nbufs;
    ha_dtype dtype;
    int bias;
    ha_llama *m;
} tiny;

void *tiny_keep(tiny *t, void *p);

ha_matrix tiny_matrix(tiny *t, rng *r, int64_t rows, int64_t cols, double scale);

ha_vector tiny_vector(tiny *t, rng *r, int64_t n, double center, double spread);

/* vocab 50, hidden 32, 2 layers, 4 heads, 2 kv heads, head_dim 8, intermediate 48; weights of dtype in
 * malloc'd buffers; biases on every projection when bias; tied: lm_head is the embedding buffer. */
/* long_from > 0: longrope, the long table (the low frequencies stretched up to 6x) for an append that takes a
 * sequence past long_from positions (ha_llama_config.rope_long_from), cos and sin scaled by 1.1. TINY_LONG
 * (TINY_SHORT): no long table, every position rotated by the long (short) one with that scale: the model a longrope
 * one is while its appends take the long (short) table. 0: the plain rope. */
enum { TINY_LONG = -1, TINY_SHORT = -2 };

tiny *tiny_build_longrope(ha_dtype dtype, int bias, int tied, int64_t window, uint64_t seed, int64_t long_from);

tiny *tiny_build(ha_dtype dtype, int bias, int tied, int64_t window, uint64_t seed);

void tiny_free(tiny *t);

ha_llama_context *ctx_new_blas(const ha_llama *m, int64_t n_seq, int64_t capacity, int blas_prefill);

ha_llama_context *ctx_new(const ha_llama *m, int64_t n_seq, int64_t capacity);

#define LM(c) ha_llama_context_lm(c)

#define LEN(c, s) (LM(c)->length(LM(c)->self, (s)))

ha_status append_seq(ha_llama_context *c, int32_t s, int64_t n, const int32_t *tok, float *logits);

void random_tokens(rng *r, int32_t *tok, int64_t n);

/* Every model configuration the model tests run: dtype x biases. */
typedef struct model_case {
    ha_dtype dtype;
    int bias;
} model_case;

static const model_case MODEL_CASES[] = {
    { HA_F32, 0 }, { HA_F32, 1 }, { HA_BF16, 0 }, { HA_BF16, 1 },  { HA_F16, 1 },
    { HA_Q8, 1 },  { HA_Q4, 0 },  { HA_F32P, 1 }, { HA_BF16P, 0 }, { HA_F16P, 1 }
};

int forward_variants(const char **names);

void select_kernels(const char *name);

void one_thread(void);

#define FOR_EACH_MODEL(t, vname)                                                                         \
    const char *vnames_[NVARIANTS];                                                                      \
    int nv_ = forward_variants(vnames_);                                                                 \
    for (int vi_ = 0; vi_ < nv_; vi_++)                                                                  \
        for (size_t mc_ = 0; mc_ < COUNT(MODEL_CASES); mc_++)                                            \
            for (tiny *t = (select_kernels(vnames_[vi_]),                                                \
                            tiny_build(MODEL_CASES[mc_].dtype, MODEL_CASES[mc_].bias, 0, 0, 100 + mc_)); \
                 t; tiny_free(t), t = NULL)                                                              \
                for (const char *vname = vnames_[vi_]; vname; vname = NULL)

#define CASE_FMT "[%s kernels, %s weights, %s] "

#define CASE_ARGS(t, vname) (vname), dname((t)->dtype), (t)->bias ? "biases" : "no biases"

/* ---- test_kernels.c ---- */
void test_kernels_matmul_matches_double(void);
void test_kernels_to_f32_exact(void);
void test_kernels_dot_axpy_scale_match_double(void);
void test_kernels_float_sums_bitwise_their_definition(void);
void test_kernels_attention_blocks_equal_dot_axpy(void);
void test_kernels_exp_bitwise_ha_expf(void);
void test_kernels_matmul_batch_invariant(void);
void test_kernels_bf16x_bitwise_across_variants(void);
void test_bf16x_reference_is_the_instruction(void);
void test_kernels_w8a8_bitwise_across_variants(void);
void test_kernels_avx_vnni_tables_are_avx2_but_w8a8(void);
void test_cpu_vendor_matches_proc_cpuinfo(void);
void test_kernels_select_by_name(void);
void test_quantize_error_within_half_a_step(void);
void test_quantize_variants_match_the_reference(void);
void test_kernels_to_f32_integer_rows_exact(void);
void test_quantize_rejects_bad_input(void);
void test_convert_rejects_shapes_too_large_to_address(void);
void test_quant_act_variants_match_the_reference(void);
void test_kernels_matmul_int_variants_bitwise(void);
void test_kernels_matmul_panels_bitwise(void);
void test_prefetcher_stays_in_its_region(void);
void test_kernels_panel_to_f32_exact(void);
void test_membw_measures_and_rejects(void);

/* ---- test_model.c ---- */
void test_model_chunk_equals_token_by_token(void);
void test_model_long_append_equals_token_by_token(void);
void test_model_blas_prefill_blocks(void);
void test_model_blas_prefill_wide_attention_output(void);
void test_model_crop_then_append_equals_fresh(void);
void test_model_interleaved_sequences_equal_alone(void);
void test_model_want_mask_packs_rows(void);
void test_model_thread_count_gives_identical_logits(void);
void test_model_kernel_variants_give_the_same_bits(void);
void test_model_sliding_window_limits_attention(void);
void test_model_ring_cache_keeps_the_window(void);
void test_model_cache_copy_of_a_cropped_ring_is_a_clone(void);
void test_model_cache_copy_kv_and_hidden_states(void);
void test_model_fused_projections_equal_split(void);
void test_kv_capacity_error_appends_nothing(void);
void test_streamed_buffers_hold_their_size_at_huge_page_boundaries(void);
void test_kv_invalid_token_appends_nothing(void);
void test_kv_bad_sequence_and_crop_rejected(void);
void test_kv_crop_to_zero_equals_fresh(void);
void test_create_rejects_bad_weights(void);
void test_create_rejects_bad_config(void);
void test_create_accepts_tied_and_counts_bytes(void);

/* ---- test_tree.c ---- */
void test_tree_nodes_are_bitwise_their_paths(void);
void test_tree_nodes_are_bitwise_their_paths_in_every_family(void);
void test_tree_contract_and_refusals(void);
void test_tree_assisted_equals_plain(void);
void test_tree_assisted_equals_plain_across_a_rope_switch(void);
void test_dyntree_assisted_equals_plain(void);
void test_dyntree_assisted_equals_plain_across_a_rope_switch(void);
void test_tree_assisted_refusals(void);
void test_tree_rejection_sampling_runs_and_keeps_the_caches(void);
void test_tree_interrupt_leaves_the_cache_as_it_was(void);
void test_tree_cost_schedule_keeps_siblings_only_where_width_is_cheap(void);
void test_tree_prompt_lookup_branches_equal_plain(void);

/* ---- test_generation.c ---- */
void test_rng_uniform_properties(void);
void test_rng_bits_philox_and_variants_bitwise(void);
void test_sampler_greedy_first_argmax(void);
void test_sampler_greedy_matches_one_running_maximum(void);
void test_sampler_top_k_keeps_ties(void);
void test_sampler_shortcuts_equal_full_passes(void);
void test_sampler_top_p_transformers_semantics(void);
void test_sampler_repetition_penalty_and_temperature(void);
void test_sampler_frequencies_match_softmax(void);
void test_sampler_all_removed_returns_minus_one(void);
void test_sampler_create_rejects_bad_params(void);
void test_generate_greedy_equals_manual_loop(void);
void test_generate_sampled_equals_manual_loop(void);
void test_generate_eos_stops_row_and_pads(void);
void test_generate_max_new_tokens_exact(void);
void test_generate_min_new_tokens_suppresses_eos(void);
void test_generate_rejects_bad_input(void);
void test_assisted_equals_plain(void);
void test_assisted_equals_plain_across_a_rope_switch(void);
void test_longrope_an_append_takes_the_long_table_iff_it_ends_past_the_switch(void);
void test_generate_runs_a_row_again_whole_past_a_rope_switch(void);
void test_assisted_cost_schedule_edges(void);
void test_cost_schedule_plans_by_the_batch_s_costs(void);
void test_cost_schedule_counts_the_round_s_first_draft_step(void);
void test_cost_fits_the_table_to_the_call_s_rounds(void);
void test_cost_trim_keeps_the_candidates_worth_verifying(void);
void test_cost_siblings_rate_alternatives_by_their_own_counts(void);
void test_cost_frontier_takes_the_nodes_worth_their_draft_rows(void);
void test_assisted_reads_start_once(void);
void test_assisted_drafting_ahead_changes_nothing(void);
void test_assisted_drafting_ahead_changes_nothing_across_a_rope_switch(void);
void test_assisted_rejection_runs_and_rejects_bad_args(void);
void test_interrupt_stops_append_and_keeps_the_cache(void);
void test_interrupt_stops_generation(void);
void test_generate_max_time_returns_the_tokens_so_far(void);

/* ---- test_threads.c ---- */
void test_threads_set_get_and_reject(void);
void test_threads_switching_keeps_results(void);
void test_threads_parallel_for_covers_range(void);
void test_threads_concurrent_callers(void);
void test_threads_idle_workers_sleep_and_wake_for_the_next_job(void);
void test_threads_a_stalled_worker_turns_jobs_to_the_caller(void);
void test_threads_kinds_are_timed_apart(void);
void test_threads_forked_child_runs_jobs(void);
void test_cpus_cgroup_quota_lowers_the_default(void);

/* ---- test_tokenizer.c ---- */
void test_bpe_merges_lowest_rank_leftmost_first(void);
void test_bpe_byte_fallback_and_fused_unk(void);
void test_bpe_equals_naive_rule_on_random_merges(void);
void test_bpe_create_rejects_bad_tables(void);

/* test_model.c, used by test_threads.c too */
void workload(const ha_llama *m, ha_llama_context *reuse, float *logits);
#endif
