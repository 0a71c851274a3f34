/* The record of the token trees (ha_assist_params.tree_record, ha.h ha_tree_record): each row's rounds as the
 * verified tree's nodes and its accepted path, read from row_state's node_tok, node_parent and path, which describe
 * the tree whatever its shape; written once per round and row, from finish_row (assist.c). */
#include <string.h>

#include "assist.h"

ha_status ha_tree_record_round(const ha_assist_params *p, const row_state *r, int64_t accepted, int64_t kept) {
    ha_tree_record *rec = p->tree_record;
    if (!rec) return HA_OK;
    const int64_t N = p->gen.max_new_tokens, M = rec->max_nodes, i = rec->n_rounds[r->row];
    const int64_t catch_up = r->n_path - accepted, reached = catch_up + (accepted < kept ? accepted : kept);
    if (i >= N || r->n_nodes > M || catch_up < 0 || reached > r->n_nodes)
        return ha_fail(HA_ERR_INTERNAL,
                       "assist_record.c: row %d's round %lld of %lld nodes (path %lld, %lld accepted) past the "
                       "record's %lld rounds of %lld nodes",
                       r->row, (long long)i, (long long)r->n_nodes, (long long)r->n_path, (long long)accepted,
                       (long long)N, (long long)M);
    int64_t *round = rec->rounds + ((int64_t)r->row * N + i) * HA_TREE_FIELDS;
    round[HA_TREE_START] = r->generated;
    round[HA_TREE_CATCH_UP] = catch_up;
    round[HA_TREE_NODES] = r->n_nodes;
    round[HA_TREE_PATH] = reached;
    int32_t *nodes = rec->nodes + ((int64_t)r->row * N + i) * 3 * M; /* (3, M): tokens, parents, path */
    memcpy(nodes, r->node_tok, (size_t)r->n_nodes * sizeof(int32_t));
    memcpy(nodes + M, r->node_parent, (size_t)r->n_nodes * sizeof(int32_t));
    memcpy(nodes + 2 * M, r->path, (size_t)reached * sizeof(int32_t));
    rec->n_rounds[r->row] = i + 1;
    return HA_OK;
}
