"""Type aliases the package's annotations share (no runtime behaviour: only annotations name them).

torch is optional: where the type checker cannot import it, "torch.Tensor" reads as Any, so a tensor argument
accepts anything there; with torch installed, it is torch's own type."""

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, Union

import numpy as np

if TYPE_CHECKING:
    import torch

# A path on disk, as open() takes it.
PathLike = Union[str, "os.PathLike[str]"]
# An array in or out: numpy, or torch where the caller handed torch (numpy in, numpy out; torch in, torch out).
Tensor = Union[np.ndarray, "torch.Tensor"]


class Decoder(Protocol):
    """A tokenizer as the streamers use it: this package's, or any with decode(ids, **options) -> str, such as
    Transformers'."""

    def decode(self, token_ids: Any, **kwargs: Any) -> str: ...


# Token ids as generate(), forward() and the tokenizers take them: an array or tensor (batch, seq) or (seq,), or
# Python lists of ints.
TokenIds = Union[Tensor, Sequence[int], Sequence[Sequence[int]]]
