/* Shared by the assisted loop's files: assist.c (the rounds), assist_cost.c (the cost schedule) and
 * assist_ahead.c (the thread drafting ahead). Private to them. */
#ifndef HA_ASSIST_H
#define HA_ASSIST_H

#include <pthread.h>
#include <stdatomic.h>

#include "generation.h"

/* The cost schedule's largest K, and the per-position acceptance it tracks. */
#define COST_K_MAX 32

/* Whether candidates are accepted by rejection sampling (min(1, p/q)), where a candidate's presence must never depend
 * on its own token; greedy and coupled acceptance take the target's own token whatever was proposed. */
static inline int ha_rejection_sampling(const ha_assist_params *p) {
    return p->gen.sampling.do_sample && p->acceptance == HA_ACCEPT_REJECTION;
}

typedef struct row_state {
    int32_t row;
    int32_t *tok;        /* (prompt + max_new + 1,) the row's real tokens, then this round's drafts */
    int64_t L;           /* tokens decided so far */
    int64_t target_len;  /* positions in the target's cache */
    int64_t draft_len;   /* positions in the draft's cache */
    int64_t generated;   /* new tokens decided so far */
    int64_t K;           /* constant and heuristic schedules: this row's K */
    int done;            /* ended: an eos, a stopping criterion, or max_new_tokens */
    /* this round */
    int64_t k_cap;       /* most candidates: room, rollback, num_assistant_tokens */
    int64_t k_max;       /* candidates planned (the cost schedule drafts at all iff > 0, and then as long as one more
                            is worth it, up to k_cap); other schedules: k_cap */
    int64_t k;           /* candidates proposed: tok[L, L + k) */
    int drafting;        /* still drafting (model draft) */
    double *conf;        /* (max_new,) candidate j's draft probability, with the cost schedule */
    double rate[COST_K_MAX]; /* cost schedule: the row's acceptance rate at each draft position, this round */
    double all_accepted; /* cost schedule: the chance that every candidate so far is accepted */
    double yield;        /* cost schedule: tokens the round is expected to give the row */
    int64_t idle;        /* cost schedule: rounds in a row it planned no candidate */
    int exploring;       /* cost schedule, this round: drafts to check a verdict of none (ha_cost_schedule) */
    int64_t unseen;      /* cost schedule, this round: the decided tokens the draft's first step appends for the row
                            (its catch-up: 1 after a round it drafted in, one more for each round it did not) */
    int64_t k_keep;      /* cost schedule, ha_cost_trim: candidates kept so far, and the best configuration's */
    int64_t k_best;
    double keep_chance;  /* ha_cost_trim: the chance that the k_keep candidates kept are all accepted */
    double worth;        /* cost schedule, this round: what a token of the row is worth (ha_cost_schedule) */
    float **p;           /* (max_new + 1,) position L + j's processed target scores */
    float **raw;         /* (max_new + 1,) position L + j's raw target logits, with logits_out */
    float **q;           /* (max_new,) candidate j's processed draft scores */
    ha_normalizer *qn;   /* (max_new,) their softmax normalizations, where the round needs them (norm_q) */
    /* drafting ahead (ha_assist_params.overlap; see assist_ahead.c) */
    int64_t ahead_cap;   /* this round: logits rows the thread may draft ahead for the row (0: none) */
    int64_t ahead_n;     /* rows drafted ahead: row j scores position L + k + j, after appending tok[L + k + j - 1] */
    float *ahead;        /* (ahead_cap, V) their raw logits */
    int64_t covered;     /* next round: draft steps 0 .. covered - 1 read cover's rows instead of appending */
    const float *cover;  /* (covered, V) */
    /* token trees (ha_assist_params.tree_width w > 1; see assist_tree.c) */
    int32_t *sib;        /* (max_new, w - 1) candidate j's siblings: the draft's next most probable tokens there */
    int64_t *nsib;       /* (max_new,) how many candidate j has */
    double *sib_rate;    /* (max_new, w - 1) what the cost schedule rates each by: its probability; under rejection
                          * sampling its place's (q's second, third, ... highest), never its own token's */
    float **ps;          /* (max_new, w - 1) their processed target scores, for position L + j + 1 */
    float **praw;        /* (max_new, w - 1) their raw target logits, with logits_out */
    int64_t catch_up;    /* this round: the row's tokens the target's tree starts with, tok[L - catch_up, L) */
    int64_t chain_n;     /* this round: the chain's candidates accepted */
    int64_t sib_taken;   /* this round: the sibling of candidate chain_n accepted after them, or -1 */
    int64_t *nkeep;      /* (max_new,) the cost schedule's siblings kept at each depth (ha_cost_siblings) */
    double *reach;       /* (max_new,) its chance that the chain reaches each depth */
    /* this round's verified tree, whatever its shape: filled by its verify and accept, read by ha_tree_keep and
     * ha_tree_record_round */
    int32_t *node_tok;   /* (max_tree,) the row's nodes' tokens, its catch-up first, in append order */
    int32_t *node_parent; /* (max_tree,) each one's parent: its index among the row's nodes, -1 for the first */
    int64_t n_nodes;
    int32_t *path;       /* (max_tree,) the accepted path's node indices, from the first node down */
    int64_t n_path;
    /* dynamic trees (ha_assist_params.tree_dynamic; see assist_dyntree.c) */
    struct dyn_node *dn;  /* (n_dyn,) this round's drafted nodes; dn[0] is the root (the row's last token) */
    int64_t n_dn;
    int32_t *vnode;       /* (max_tree,) the verified tree: its drafted nodes, parents first (the catch-up not in) */
    int64_t n_v;
    int dyn_leaf;         /* the accepted path ended at a node the verified tree has no child of (a bonus token) */
    int64_t budget;       /* this round: the nodes its verified tree may take (k_max is its deepest depth) */
    double *rrs;          /* (2, V) trees' rejection sampling: its residual target and draft left, shared by rows */
} row_state;

/* A drafted node of a dynamic tree (the root: depth -1, the row's last decided token; its distribution r->q[0]). */
typedef struct dyn_node {
    int32_t tok;
    int32_t parent;           /* drafted node index; -1 for the root */
    int32_t depth;            /* its token is at position L + depth */
    int32_t child0, n_child;  /* its children, child0 .. child0 + n_child - 1, its chosen token's first; 0: leaf */
    int32_t vi;               /* its index among the verified nodes (r->vnode), -1 if not verified */
    int32_t di;               /* its index in the row's tree in the draft's cache this round, -1 if not there */
    double qx;                /* the draft's probability of tok at its parent */
    double qr;                /* what ranks it: qx; rejection sampling: the parent's (s+1)-th highest probability
                               * for its s-th child, whatever token was drawn (see the exactness rule) */
    double cum;               /* the product of qr along its path (the root: 1) */
    double reach;             /* the cost schedule's chance that acceptance reaches it */
    float *q;                 /* (V,) expanded: its processed draft scores for position L + depth + 1 */
    ha_normalizer qn;
    float *p, *raw;           /* (V,) verified (or the root): the target's processed and raw scores after it */
} dyn_node;

/* Work buffers of a call; rows of V floats grow with the largest round seen. */
typedef struct buffers {
    int64_t V;
    int32_t *seq, *tok;  /* (n_append,) append scratch */
    uint8_t *want;       /* (n_append,) */
    float *first;        /* (B, V) the prefill's logits at each row's last prompt token */
    float *first_raw;    /* (B, V) their raw copy, with logits_out */
    float *P, *raw, *Q;  /* (cap_p, V), (cap_p, V) with logits_out, (cap_q, V): a round's target and draft rows */
    int64_t cap_p, cap_raw, cap_q;
    struct acceptance *acceptance; /* (B,) the cost schedule's count of each row's acceptance */
    double *conf;                  /* (B, max_new) the cost schedule's draft probabilities of each row's candidates */
    ha_normalizer *qn;             /* (B, max_new) row_state.qn */
    float *A;                      /* (cap_a, V) every row's logits drafted ahead (row_state.ahead) */
    int64_t cap_a;
    int32_t *parent;               /* (n_append,) a tree's parents (trees only) */
    /* dynamic trees */
    int64_t n_dyn;                 /* nodes a row drafts at most (ha_dyn_max_nodes) */
    int64_t max_tree;              /* the target's ha_lm.max_tree */
    double *gain;                  /* (B, max_tree) each row's selected nodes' gains (the cost schedule) */
    int64_t *n_sel, *n_keep;       /* (B,) nodes selected, and kept by the cost schedule */
} buffers;

/* ---- the cost schedule (assist_cost.c) ---------------------------------------------------------------- */

#define COST_BINS 10

typedef struct acceptance {
    double acc[COST_K_MAX];     /* candidates accepted at draft position j */
    double tested[COST_K_MAX];  /* candidates tested at position j: proposed, every one before it accepted */
} acceptance;

typedef struct cost_model {
    const double *d;            /* (n_d,) d(n) / t(1): a draft step for n = 1 .. n_d rows */
    int64_t n_d;
    const double *d_first;      /* (n_d_first,) the same for a round's first step (after the target's append) */
    int64_t n_d_first;
    const double *t;            /* (n_t,) t(T) / t(1) for T = 1 .. n_t */
    int64_t n_t;
    acceptance call;            /* over the call's rows */
    acceptance *rows;           /* (B,) each row's own */
    double steps_cost;          /* this round's draft steps so far */
    double bin_acc[COST_BINS];  /* tested candidates accepted, by tenth of the draft's probability */
    double bin_tested[COST_BINS];
    double alt_acc[COST_BINS];  /* the same for a tree's alternatives (a node's children after its first), by tenth of
                                 * what the schedule rates them by (sib_rate, dyn_node.qr) */
    double alt_tested[COST_BINS];
    int explore;                /* counts carried from other calls: a row idle long enough drafts (COST_EXPLORE) */
    int64_t quiet;              /* rounds since a row last drafted to explore */
    int64_t max_new;            /* the call's max_new_tokens */
    /* The table fitted to the call's own rounds (ha_cost_observe): t(T) -> fit_a t(T) + fit_b and d -> fit_d d once
     * fitted, the table as it is until then (zeroed: not fitted). calibrate: fit (chains with measured costs and
     * carried counts: K choices may vary anyway); t1: seconds of the table's t(1), observed seconds into its units;
     * obs: the target's appends seen, n and the sums of x, y, x^2 and x y (x the table's t(T) / t(1), y the append's
     * seconds / t1); draft_obs, draft_raw: the draft's steps seen, in t(1) units, and the table's for them;
     * steps_raw: this round's draft steps by the table alone. */
    int calibrate;
    double t1, obs[5], draft_obs, draft_raw, steps_raw;
    int fitted;
    double fit_a, fit_b, fit_d;
} cost_model;

/* Whether s (HA_COST_STATE,) is a valid ha_assist_params.cost_state: counts >= 0, finite, accepted <= tested. */
int ha_cost_state_ok(const double *s);
/* The cost model's call-wide counts from s, scaled down past HA_COST_MEMORY; and back into s. */
void ha_cost_state_load(cost_model *c, const double *s);
void ha_cost_state_store(const cost_model *c, double *s);
/* The chance a candidate the draft gave probability conf is accepted. */
double ha_cost_conf_rate(const cost_model *c, double conf);
/* The same for an alternative (a sibling, a dynamic tree's child after the first) rated by conf: a second choice of
 * a given probability is the target's token less often than a first choice of that probability. */
double ha_cost_alt_rate(const cost_model *c, double conf);
/* Counts an alternative rated by conf whose parent acceptance reached: tested, and accepted or not. */
void ha_cost_count_alt(cost_model *c, double conf, int accepted);
/* After a round whose draft steps took draft_s seconds (none of them taking in a row's prompt) and whose target
 * append of T tokens took target_s: the fit of the table to the call's rounds, where c->calibrate. */
void ha_cost_observe(cost_model *c, int64_t T, double target_s, double draft_s);
/* Plans k_max (<= k_cap) of every running row by the positional rates, which it leaves in r->rate. */
void ha_cost_schedule(cost_model *c, row_state *rows, int64_t B);
/* After draft step s: whether each row still drafting goes on (clears r->drafting where not). */
void ha_cost_continue(cost_model *c, row_state *rows, int64_t B, int64_t s);
/* Counts the round of a row that proposed k candidates of draft probabilities conf (k,) (NULL: prompt lookup)
 * and had n accepted. */
void ha_cost_count(cost_model *c, acceptance *row, const double *conf, int64_t k, int64_t n);
/* Chains, after drafting: cuts each running row's candidates (r->k) to the prefix worth verifying, by the draft's
 * probability of each. */
void ha_cost_trim(const cost_model *c, row_state *rows, int64_t B);
/* Token trees: trims each running row's siblings (r->nsib) to those worth their place in the target's append. */
void ha_cost_siblings(const cost_model *c, row_state *rows, int64_t B, int64_t w1);

/* ---- drafting ahead (assist_ahead.c) ------------------------------------------------------------------ */

typedef struct ahead {
    ha_lm *draft;
    ha_sampler *sampler;
    const ha_generate_params *gen;
    row_state *rows;
    int64_t B, V;
    int32_t *seq, *tok; /* (B,) an append's tokens: one per row going */
    float *logits; /* (B, V) its logits */
    float *scores; /* (V,) a row's logits, processed to choose its token */
    atomic_int stop; /* set once the target's append has returned */
    int64_t passes; /* appends made ahead, per row */
    pthread_t thread;
} ahead;

/* Plans each running row's drafting ahead for this round and starts the thread; returns 1 if it runs, 0 if no row
 * drafts ahead (or the thread or its buffer could not be had: the round goes on without). */
int ha_ahead_start(ahead *a, ha_lm *target, ha_lm *draft, const ha_assist_params *p, row_state *rows, int64_t B,
                   buffers *b);
/* Stops the thread after its current step and waits for it. */
void ha_ahead_finish(ahead *a, ha_assist_stats *stats);

/* ---- the rounds' pieces the thread drafting ahead shares (assist.c) ----------------------------------- */

/* Grows *buf to hold `rows` rows of V floats (kept if large enough; contents not kept). */
ha_status ha_assist_grow(float **buf, int64_t *cap, int64_t rows, int64_t V);
/* Grows b->P (and b->raw, with logits_out) to hold `rows` rows of scores. */
ha_status ha_assist_grow_scores(buffers *b, const ha_assist_params *p, int64_t rows);
/* K after a round that accepted n of a row's candidates under the heuristic schedules, as Transformers'
 * AssistedCandidateGenerator.update_candidate_strategy: K + 2 after a draft fully accepted, else max(1, K - 1). */
int64_t ha_assist_heuristic_k(int64_t K, int64_t n);

/* A round's most candidates for a row that wants k and has L tokens decided, `generated` of them new: never more
 * than leave room for the target's own token within max_new_tokens, nor more than a model with sliding-window rings
 * can take back (ha_lm.max_rollback), nor, for a target with a rope switch S, candidates whose scores would come from
 * forwards on both sides of S (a round from L <= S scores positions up to S at most: k <= S - L), since plain
 * generation computes those positions in appends of their own side. */
int64_t ha_assist_candidate_cap(int64_t k, int64_t L, int64_t generated, const ha_assist_params *p, const ha_lm *target,
                                const ha_lm *draft);

/* ---- token trees (assist_tree.c) ---------------------------------------------------------------------- */

/* The n_max tokens of highest score in q (V,), best first (the lower index first on ties), other than x and tokens
 * scored -inf or NaN, into out; *n how many there are (<= n_max). */
void ha_tree_siblings(const float *q, int64_t V, int32_t x, int64_t n_max, int32_t *out, int64_t *n);
/* Rejection sampling ranks the s-th token drawn without replacement from q by the probability of its place, q's s-th
 * highest (never its own token's): rank[0 .. n) (the last repeated where q has fewer tokens left). qn: q's
 * ha_softmax_norm. */
void ha_tree_rank_probs(const float *q, int64_t V, ha_normalizer qn, int64_t n, double *rank);
/* Row r (batch row i) starts its tree: its tokens the target has not seen, tok[target_len, L), a chain from the
 * sequence's end at the append's entries from *n (r->catch_up of them), the last one's scores (position L) into
 * *p0 from b->P's next row; where there are none, *p0 (and *raw0 if not NULL) point at position L's scores from
 * the prefill (b->first, b->first_raw). Moves *n and *n_rows past what it took. */
void ha_tree_catch_up(row_state *r, buffers *b, int64_t i, int64_t *n, int64_t *n_rows, float **p0, float **raw0);
/* Row r's nodes of the round (the append's entries [first, end)) into its node_tok and node_parent (parents as
 * indices among them): the tree as ha_tree_keep and the record read it, whatever its shape. */
void ha_tree_note_nodes(row_state *r, const buffers *b, int64_t first, int64_t end);
/* The target's append_tree of the round's n nodes (b->seq, tok, parent, want) into b->P's n_rows rows, copied to
 * b->raw with logits_out. */
ha_status ha_tree_score(ha_lm *target, const ha_assist_params *p, buffers *b, int64_t n, int64_t n_rows);
/* The target's append_tree for a round: each running row's catch-up, candidates and siblings; points r->p (r->raw)
 * at the chain's rows and r->ps (r->praw) at the siblings', and processes them all. */
ha_status ha_tree_verify(ha_lm *target, const ha_assist_params *p, ha_sampler *sampler, row_state *rows, int64_t B,
                         buffers *b);
/* Acceptance on r's tree (greedy, coupled, or with a model draft rejection sampling with r->rrs); model_draft
 * 0 (prompt lookup): the target's own token at each node, as for its chains. Returns the tokens accepted
 * (the chain's chain_n, then the sibling taken if any, which it writes at tok[L + chain_n] with its rows as
 * p[chain_n + 1]) and the target's next token. */
int64_t ha_tree_accept(const ha_assist_params *p, const ha_sampler *sampler, row_state *r, int model_draft, int64_t V,
                       int32_t *next);
/* ---- dynamic trees (assist_dyntree.c) ------------------------------------------------------------------ */

/* The widest dynamic tree (a node's children, a depth's frontier: on the stack). */
#define HA_DYN_MAX_WIDTH 64
/* Nodes a row drafts at most in a round of depth <= max_tree / w + 1 with frontier width w. */
int64_t ha_dyn_max_nodes(int64_t w, int64_t max_tree);
/* The draft's dynamic trees for every row with k_max > 0 (depth k_max), the rows' catch-up in one append and each
 * depth's frontiers in one append_tree; then each row's verified tree (r->vnode), r->k its depth. cost: the cost
 * schedule's model (the verified tree's size from it), else NULL. */
ha_status ha_dyn_draft(ha_lm *draft, const ha_assist_params *p, ha_sampler *sampler, row_state *rows, int64_t B,
                       buffers *b, cost_model *cost, ha_assist_stats *stats);
/* The target's append_tree of each running row's catch-up and verified tree, every row processed with its path's
 * history. */
ha_status ha_dyn_verify(ha_lm *target, const ha_assist_params *p, ha_sampler *sampler, row_state *rows, int64_t B,
                        buffers *b);
/* The walk down r's verified tree (greedy, coupled, rejection sampling); writes the accepted path's tokens at
 * tok[L, L + n) and their target rows as p[0 .. n] (raw as raw), r->path; returns n, the next token in *next. */
int64_t ha_dyn_accept(const ha_assist_params *p, const ha_sampler *sampler, row_state *r, int64_t V, int32_t *next);
/* After the round: the target keeps the first `keep` nodes of r->path; the draft the longest prefix of the accepted
 * path its tree holds (*draft_len: the positions it then holds). */
ha_status ha_dyn_keep(ha_lm *target, ha_lm *draft, row_state *r, int64_t L_old, int64_t keep, int64_t *draft_len);
/* The statistics of r's round (nodes verified, those off the chain of chosen tokens, accepted: n of them, kept), and
 * with the cost schedule its count of the chain's acceptance. */
void ha_dyn_count(const row_state *r, int64_t n, int64_t kept, ha_assist_stats *stats, cost_model *cost);
/* The cost schedule: how many of each row's selected nodes (in order, with their gains) to verify. */
void ha_cost_dyn_budget(const cost_model *c, row_state *rows, int64_t B, const double *gain, const int64_t *n_sel,
                        int64_t stride, int64_t *n_keep);
/* d(n) / t(1): a round's draft step s of n rows (0 for none; step 0 at its own cost, d_first). */
double ha_cost_draft_step(const cost_model *c, int64_t s, int64_t n);
/* Whether row r's frontier at depth d takes one more node (nf taken), one acceptance reaches with chance `reach`. */
int ha_cost_frontier_takes(const cost_model *c, const row_state *r, int64_t d, int64_t nf, double reach);

/* The target keeps the first `keep` positions of the round's accepted path (catch-up, then candidates) after the
 * row's round from L_old: keep_path. */
ha_status ha_tree_keep(ha_lm *target, const row_state *r, int64_t L_old, int64_t keep);

/* ---- the record of the trees (assist_record.c) -------------------------------------------------------- */

/* Row r's round into p->tree_record (if any) from its node_tok, node_parent and path: `accepted` drafts accepted, of
 * which `kept` reached out (the round's tokens, the target's own after them included), from column r->generated. */
ha_status ha_tree_record_round(const ha_assist_params *p, const row_state *r, int64_t accepted, int64_t kept);

#endif /* HA_ASSIST_H */
