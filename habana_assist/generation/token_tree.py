"""TokenTree: one round's verified token tree for one row (assistant_tree_width > 1), the entries of a result's
token_trees, read from the core's record (ha.h ha_tree_record). The bottom of generation/, beside token_source.py:
the notebook view (display.py) and the outputs (outputs.py) read it, generate() (utils.py) builds it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

import numpy as np

__all__ = ["TokenTree", "token_trees_from_record"]


@dataclass(frozen=True, eq=False)
class TokenTree:
    """The tree one target pass verified for one row, and what it accepted.

    tokens: np.int64 (nodes,), the verified nodes' token ids: first the catch-up (the `catch_up` tokens decided
    before the round that the target had not seen yet: the target's own token of the round before), then the drafted
    nodes in the order the target's pass took them (for a chain with siblings: each drafted token, then its siblings).
    parents: np.int64 (nodes,), each node's parent as an index into tokens, -1 for a root (a node at depth 0; a
    round without catch-up, the first, has a root per token drafted at depth 0). accepted: np.bool_ (nodes,), the
    accepted path, a chain of parent links down from a root: the catch-up, then the drafted tokens the target
    accepted (those cut by an eos or a stopping criterion left out). position: the column, among the row's new tokens
    (sequences[row, prompt width + position]), of the path's node at depth 0; the path's node at depth d is the token
    at column position + d, and the round's own tokens begin at column position + catch_up (the accepted drafts,
    then the target's own token, which is no node)."""

    tokens: np.ndarray
    parents: np.ndarray
    accepted: np.ndarray
    position: int
    catch_up: int

    @property
    def path(self) -> np.ndarray:
        """np.int64 (accepted nodes,): the accepted path's node indices, from its root down (depth 0, 1, ...)."""
        return np.flatnonzero(self.accepted).astype(np.int64)

    @property
    def depths(self) -> np.ndarray:
        """np.int64 (nodes,): each node's depth (0 for a root; a parent always comes before its children)."""
        depth = np.zeros(len(self.parents), dtype=np.int64)
        for i, parent in enumerate(self.parents.tolist()):
            if parent >= 0:
                depth[i] = depth[parent] + 1
        return depth

    @property
    def num_drafted(self) -> int:
        """Drafted nodes verified (num_draft_tokens counts these): the nodes after the catch-up."""
        return len(self.tokens) - self.catch_up

    @property
    def num_accepted(self) -> int:
        """Drafted nodes accepted (num_accepted_tokens counts these)."""
        return int(np.count_nonzero(self.accepted)) - self.catch_up

    def __repr__(self) -> str:
        return (
            f"TokenTree(position={self.position}, catch_up={self.catch_up}, nodes={len(self.tokens)}, "
            f"path={self.tokens[self.path].tolist()})"
        )


def token_trees_from_record(
    counts: np.ndarray, rounds: np.ndarray, nodes: np.ndarray, fields: Sequence[str]
) -> List[List[TokenTree]]:
    """The core's record (generate_assisted's tree_counts (B,), tree_rounds (B, max_new, fields) and tree_nodes
    (B, max_new, 3, max_nodes); fields: the names of tree_rounds' columns, _core.TREE_FIELDS) -> per row, its rounds'
    TokenTrees in order (each row's list as long as its target passes)."""
    col = {name: i for i, name in enumerate(fields)}
    trees = []
    for b in range(len(counts)):
        row = []
        for i in range(int(counts[b])):
            start, catch_up, n, n_path = (int(rounds[b, i, col[k]]) for k in ("start", "catch_up", "nodes", "path"))
            accepted = np.zeros(n, dtype=bool)
            accepted[nodes[b, i, 2, :n_path]] = True
            row.append(
                TokenTree(
                    tokens=nodes[b, i, 0, :n].astype(np.int64),
                    parents=nodes[b, i, 1, :n].astype(np.int64),
                    accepted=accepted,
                    position=start - catch_up,
                    catch_up=catch_up,
                )
            )
        trees.append(row)
    return trees
