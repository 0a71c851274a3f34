"""What generate() returns with return_dict_in_generate=True: GenerateDecoderOnlyOutput, which shows itself in a
notebook through display.py; TokenSource (token_source.py) and TokenTree (token_tree.py), re-exported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

import numpy as np

from ..utils.generic import ModelOutput
from .display import result_html
from .token_source import TokenSource
from .token_tree import TokenTree

if TYPE_CHECKING:
    from ..cache_utils import Cache
    from ..tokenization.tokenization_utils import PreTrainedTokenizerBase

__all__ = ["GenerateDecoderOnlyOutput", "TokenSource", "TokenTree"]


def timings_from(seconds: np.ndarray) -> Dict[str, float]:
    """GenerateDecoderOnlyOutput.timings from the core's seconds float64 (4,) (ha.h ha_seconds: prefill, target,
    draft, the whole call): those and the rest of the call, "other"."""
    prefill, target, draft, total = (float(x) for x in seconds)
    other = max(0.0, total - prefill - target - draft)
    return {"prefill": prefill, "target": target, "draft": draft, "other": other, "total": total}


@dataclass(repr=False)
class GenerateDecoderOnlyOutput(ModelOutput):
    """What generate(return_dict_in_generate=True) returns.

    sequences: np.int64 (batch, prompt + new). scores: with output_scores, one float32 (batch, vocab) array
    of the target's processed scores per step (-inf for rows already finished), else None. logits: with
    output_logits, one float32 (batch, vocab) array of the target's raw logits per step (before any
    processor), else None. With assisted generation (assistant_model= or prompt_lookup_num_tokens=), also:
    num_draft_tokens (proposed), num_accepted_tokens (proposed and kept), num_target_passes (the target's
    verifying appends, one per round and row, the prompt's prefill not counted), num_draft_passes (the draft's
    appends, the first of which also takes in the prompt), proposed_per_position and accepted_per_position (np.int64
    (K,): drafts proposed and accepted at draft position j, so accepted / proposed is the acceptance rate by position);
    each summed over the rows of a batch; and num_rounds, the rounds of the call (target appends verifying all
    rows' candidates together; num_target_passes at batch 1). With an external target (habana_assist.wrap),
    num_narrow_margins: the target's logits rows of the call whose top two differ by less than the model's
    measured disagreement between a chunked and a one-token forward (0 where that is 0: integrations/external.py).
    With token trees (assistant_tree_width > 1): num_draft_tokens counts every node verified (the chain's tokens and
    their siblings), num_sibling_tokens the siblings among them and num_sibling_accepted those accepted (counted in
    num_accepted_tokens, and ACCEPTED in token_sources); per target pass, num_draft_tokens / num_target_passes nodes
    are verified and num_accepted_tokens / num_target_passes tokens accepted. With assistant_tree_shape="dynamic"
    the "siblings" are the verified nodes off the chain of the draft's chosen tokens from the root.
    token_sources (an attribute, not among keys(); numpy even where the other fields are torch tensors): np.uint8
    (batch, new tokens), aligned with sequences[:, -new:]: how each generated token was
    decided, a TokenSource (ACCEPTED draft token, CORRECTED or BONUS token of the target after a round, PLAIN
    decoding, NONE where the row had stopped). Its ACCEPTED count is num_accepted_tokens; each round ends in
    one target token (PLAIN, CORRECTED or BONUS) unless eos or max_new_tokens cut it.
    token_trees (an attribute, not among keys(); token trees only, else None; numpy as token_sources): per row, a
    list of TokenTree (token_tree.py), one per target pass of that row in order: the nodes the pass verified (token
    ids, parents), its accepted path, and the column of the row's new tokens the path starts at; the branches tried
    and not taken are the nodes off the path. Recorded whenever trees run with return_dict_in_generate=True.
    timings (an attribute, not among keys(); None where the call ran in Python: an external target, or a draft with
    another tokenizer): where the call's wall-clock time went, in seconds, as a dict: "prefill" (the target taking
    in the prompts, and a draft model taking in its rows' whole sequences), "target" (the target's other forwards:
    plain decoding's steps, assisted generation's verifications), "draft" (the draft's other forwards: its steps),
    "other" (the rest: sampling, acceptance, callbacks, the loop), "total" (the whole call in the core). Decoding
    alone is total - prefill, as llama.cpp reports its "eval" apart from its "prompt eval".

    In a notebook the result shows itself as its text, each token marked by its source, and a summary
    (_repr_html_, to_html()); habana_assist.plot_acceptance(result) plots acceptance by draft position."""

    sequences: np.ndarray
    scores: Optional[Tuple[np.ndarray, ...]] = None
    logits: Optional[Tuple[np.ndarray, ...]] = None
    attentions: None = None  # Transformers' fields that this package never fills (output_attentions and
    hidden_states: None = None  # output_hidden_states are refused)
    cache: Optional[Cache] = None  # the Cache (cache_utils.py), with use_cache; out.past_key_values reads it too
    num_draft_tokens: Optional[int] = None
    num_accepted_tokens: Optional[int] = None
    num_target_passes: Optional[int] = None
    num_draft_passes: Optional[int] = None
    num_rounds: Optional[int] = None
    proposed_per_position: Optional[np.ndarray] = None
    accepted_per_position: Optional[np.ndarray] = None
    num_narrow_margins: Optional[int] = None  # an external target's (habana_assist.wrap)
    num_sibling_tokens: Optional[int] = None  # token trees (assistant_tree_width > 1), see above
    num_sibling_accepted: Optional[int] = None
    # Attributes, not fields: keys(), to_tuple() and indexing stay Transformers' (a plain call with output_scores
    # has exactly the keys sequences and scores). An annotation at run time would make them dataclass fields, so the
    # type checker alone sees one.
    if TYPE_CHECKING:
        token_sources: Optional[np.ndarray] = None  # np.uint8 (batch, new tokens), see above
        token_trees: Optional[List[List[TokenTree]]] = None  # per row, one TokenTree per target pass, see above
        timings: Optional[Dict[str, float]] = None  # where the call's time went, see above
        _tokenizer: Any = None  # the view's tokenizer, or a checkpoint path to load it from
    else:
        token_sources = None
        token_trees = None
        timings = None
        _tokenizer = None

    def __repr__(self) -> str:
        """Short: shapes and counts, never the arrays' contents."""
        parts = []
        for name in self.keys():
            v = getattr(self, name)
            if hasattr(v, "shape") and hasattr(v, "dtype"):
                parts.append(f"{name}=<{str(v.dtype).replace('torch.', '')} {tuple(v.shape)}>")
            elif isinstance(v, tuple):
                parts.append(f"{name}=<{len(v)} steps>")
            else:
                parts.append(f"{name}={v!r}")
        if self.token_sources is not None:
            parts.append(f"token_sources=<{self.token_sources.dtype} {tuple(self.token_sources.shape)}>")
        if self.token_trees is not None:
            parts.append(f"token_trees=<{sum(len(row) for row in self.token_trees)} trees>")
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_html(self, tokenizer: Union[PreTrainedTokenizerBase, str, None] = None, row: int = 0) -> str:
        """The HTML view of row `row`: its generated text, each token marked by its TokenSource, and a summary
        line. tokenizer: to decode the tokens (default: the one passed to generate(), else the model's checkpoint's;
        token ids are shown where there is none)."""
        return result_html(self, tokenizer, row)

    def _repr_html_(self) -> str:
        return result_html(self, None, None)
