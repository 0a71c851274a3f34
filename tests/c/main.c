/* C-level tests of the habana_assist core, run under AddressSanitizer and UndefinedBehaviorSanitizer by
 * tests/core/test_c_core.py: this file's list and main, the tests by layer (test_kernels.c, test_model.c,
 * test_generation.c, test_cost.c, test_threads.c, test_tokenizer.c) and what they share (test_core.h, common.c),
 * linked with every C file of csrc/'s core folders (not csrc/bindings).
 *
 *   ./test_core --list     the test names, one per line
 *   ./test_core NAME       runs one test: exit 0 on pass; on failure a message on stderr saying what was
 *                          expected and what came, and exit 1
 *
 * Each test is named for the promise it holds. A failed check prints and leaves with _Exit(1) (so a
 * failure is not buried under the leak report of the buffers it abandoned); a passing test frees
 * everything, so LeakSanitizer checks the core's own allocations. */
#include "test_core.h"

/* ---- the list ------------------------------------------------------------------------------------------ */

typedef struct test_case {
    const char *name;
    void (*fn)(void);
} test_case;

#define T(name) { #name, test_##name }
static const test_case TESTS[] = {
    T(kernels_matmul_matches_double),
    T(rng_bits_philox_and_variants_bitwise),
    T(quantize_error_within_half_a_step),
    T(quantize_variants_match_the_reference),
    T(quantize_rejects_bad_input),
    T(convert_rejects_shapes_too_large_to_address),
    T(kernels_to_f32_integer_rows_exact),
    T(quant_act_variants_match_the_reference),
    T(kernels_matmul_int_variants_bitwise),
    T(kernels_to_f32_exact),
    T(kernels_dot_axpy_scale_match_double),
    T(kernels_float_sums_bitwise_their_definition),
    T(kernels_attention_blocks_equal_dot_axpy),
    T(kernels_exp_bitwise_ha_expf),
    T(kernels_matmul_batch_invariant),
    T(kernels_w8a8_bitwise_across_variants),
    T(kernels_avx_vnni_tables_are_avx2_but_w8a8),
    T(kernels_bf16x_bitwise_across_variants),
    T(bf16x_reference_is_the_instruction),
    T(kernels_matmul_panels_bitwise),
    T(kernels_panel_to_f32_exact),
    T(prefetcher_stays_in_its_region),
    T(cpu_vendor_matches_proc_cpuinfo),
    T(kernels_select_by_name),
    T(model_chunk_equals_token_by_token),
    T(model_long_append_equals_token_by_token),
    T(model_blas_prefill_blocks),
    T(model_blas_prefill_wide_attention_output),
    T(model_crop_then_append_equals_fresh),
    T(model_interleaved_sequences_equal_alone),
    T(model_want_mask_packs_rows),
    T(model_thread_count_gives_identical_logits),
    T(model_kernel_variants_give_the_same_bits),
    T(model_sliding_window_limits_attention),
    T(model_ring_cache_keeps_the_window),
    T(model_cache_copy_kv_and_hidden_states),
    T(model_cache_copy_of_a_cropped_ring_is_a_clone),
    T(model_fused_projections_equal_split),
    T(tree_nodes_are_bitwise_their_paths),
    T(tree_nodes_are_bitwise_their_paths_in_every_family),
    T(tree_contract_and_refusals),
    T(kv_capacity_error_appends_nothing),
    T(streamed_buffers_hold_their_size_at_huge_page_boundaries),
    T(kv_invalid_token_appends_nothing),
    T(kv_bad_sequence_and_crop_rejected),
    T(kv_crop_to_zero_equals_fresh),
    T(create_rejects_bad_weights),
    T(create_rejects_bad_config),
    T(create_accepts_tied_and_counts_bytes),
    T(rng_uniform_properties),
    T(sampler_greedy_first_argmax),
    T(sampler_greedy_matches_one_running_maximum),
    T(sampler_top_k_keeps_ties),
    T(sampler_shortcuts_equal_full_passes),
    T(sampler_top_p_transformers_semantics),
    T(sampler_repetition_penalty_and_temperature),
    T(sampler_frequencies_match_softmax),
    T(sampler_all_removed_returns_minus_one),
    T(sampler_create_rejects_bad_params),
    T(generate_greedy_equals_manual_loop),
    T(generate_sampled_equals_manual_loop),
    T(generate_eos_stops_row_and_pads),
    T(generate_max_new_tokens_exact),
    T(generate_min_new_tokens_suppresses_eos),
    T(generate_rejects_bad_input),
    T(assisted_equals_plain),
    T(assisted_equals_plain_across_a_rope_switch),
    T(longrope_an_append_takes_the_long_table_iff_it_ends_past_the_switch),
    T(generate_runs_a_row_again_whole_past_a_rope_switch),
    T(tree_assisted_equals_plain),
    T(tree_assisted_equals_plain_across_a_rope_switch),
    T(dyntree_assisted_equals_plain),
    T(dyntree_assisted_equals_plain_across_a_rope_switch),
    T(tree_assisted_refusals),
    T(tree_rejection_sampling_runs_and_keeps_the_caches),
    T(tree_interrupt_leaves_the_cache_as_it_was),
    T(tree_cost_schedule_keeps_siblings_only_where_width_is_cheap),
    T(tree_prompt_lookup_branches_equal_plain),
    T(assisted_reads_start_once),
    T(assisted_cost_schedule_edges),
    T(cost_schedule_plans_by_the_batch_s_costs),
    T(cost_schedule_counts_the_round_s_first_draft_step),
    T(cost_fits_the_table_to_the_call_s_rounds),
    T(cost_trim_keeps_the_candidates_worth_verifying),
    T(cost_siblings_rate_alternatives_by_their_own_counts),
    T(cost_frontier_takes_the_nodes_worth_their_draft_rows),
    T(assisted_rejection_runs_and_rejects_bad_args),
    T(assisted_drafting_ahead_changes_nothing),
    T(assisted_drafting_ahead_changes_nothing_across_a_rope_switch),
    T(threads_set_get_and_reject),
    T(threads_switching_keeps_results),
    T(threads_parallel_for_covers_range),
    T(threads_concurrent_callers),
    T(threads_idle_workers_sleep_and_wake_for_the_next_job),
    T(threads_a_stalled_worker_turns_jobs_to_the_caller),
    T(threads_kinds_are_timed_apart),
    T(threads_forked_child_runs_jobs),
    T(cpus_cgroup_quota_lowers_the_default),
    T(membw_measures_and_rejects),
    T(interrupt_stops_append_and_keeps_the_cache),
    T(interrupt_stops_generation),
    T(generate_max_time_returns_the_tokens_so_far),
    T(bpe_merges_lowest_rank_leftmost_first),
    T(bpe_byte_fallback_and_fused_unk),
    T(bpe_equals_naive_rule_on_random_merges),
    T(bpe_create_rejects_bad_tables),
};
#undef T

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s --list | TEST_NAME\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < COUNT(TESTS); i++) printf("%s\n", TESTS[i].name);
        return 0;
    }
    for (size_t i = 0; i < COUNT(TESTS); i++)
        if (strcmp(argv[1], TESTS[i].name) == 0) {
            current_test = TESTS[i].name;
            TESTS[i].fn();
            printf("ok %s\n", TESTS[i].name);
            return 0;
        }
    fprintf(stderr, "unknown test '%s'; run with --list for the names\n", argv[1]);
    return 2;
}
