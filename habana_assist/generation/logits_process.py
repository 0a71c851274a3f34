"""Logits processors, as in Transformers: generate(..., logits_processor=[...]) takes a list of callables
f(input_ids, scores) -> scores.

input_ids is (batch, seq) int64 and scores (batch, vocab) float32, both numpy arrays or both torch tensors,
whichever generate() hands over (torch when the caller's input_ids was a torch tensor). Neither class here
looks at the type: a processor returns scores of the kind it was given.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from ..errors import InvalidInputError
from ..utils.types import Tensor

__all__ = ["LogitsProcessor", "LogitsProcessorList"]


class LogitsProcessor:
    """Base class of a processor: subclasses implement __call__(input_ids, scores) -> scores."""

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} must implement __call__(input_ids, scores) -> scores "
            "(LogitsProcessor is a base class)"
        )


def _extra_parameters(processor: Callable[..., Any]) -> Optional[tuple[list[str], set[str], bool]]:
    """The parameters processor takes after (input_ids, scores): (names it requires, names it accepts,
    whether it takes **kwargs); None when it takes two arguments or its signature cannot be read."""
    try:
        params = list(inspect.signature(processor).parameters.values())
    except (TypeError, ValueError):  # a builtin or extension callable without a signature
        return None
    if len(params) <= 2:
        return None
    extra = [p for p in params[2:] if p.kind is not p.VAR_POSITIONAL]
    var_kw = any(p.kind is p.VAR_KEYWORD for p in extra)
    named = [p for p in extra if p.kind is not p.VAR_KEYWORD]
    required = [p.name for p in named if p.default is p.empty]
    return required, {p.name for p in named}, var_kw


class LogitsProcessorList(list[Callable[..., Tensor]]):
    """A list of processors, itself a processor: __call__ applies each in order and returns the last scores.

    As in Transformers, a processor whose __call__ takes more than (input_ids, scores) gets the keyword
    arguments this list was called with; one that requires a keyword argument that was not given is refused."""

    def __call__(self, input_ids: Tensor, scores: Tensor, **kwargs: Any) -> Tensor:
        for processor in self:
            extra = _extra_parameters(processor)
            if extra is None:
                scores = processor(input_ids, scores)
                continue
            required, accepted, var_kw = extra
            missing = [name for name in required if name not in kwargs]
            if missing:
                raise InvalidInputError(
                    f"logits processor {type(processor).__name__} requires the argument(s) "
                    f"{missing}, which were not passed to LogitsProcessorList(...)(input_ids, "
                    "scores, **kwargs); pass them, or give them defaults"
                )
            given = kwargs if var_kw else {k: v for k, v in kwargs.items() if k in accepted}
            scores = processor(input_ids, scores, **given)
        return scores
