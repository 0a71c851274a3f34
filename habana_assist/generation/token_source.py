"""TokenSource: how the core decided each generated token (its ha_token_source), the values of a result's
token_sources. The bottom of generation/: the drafters (universal.py), the notebook view (display.py) and the
outputs (outputs.py) read it."""

import enum


class TokenSource(enum.IntEnum):
    """How a generated token was decided: the values of GenerateDecoderOnlyOutput.token_sources (the core's
    ha_token_source)."""

    NONE = 0  # no token: padding after the row stopped
    PLAIN = 1  # the target's own, with nothing drafted for it (plain decoding; a round of K = 0)
    ACCEPTED = 2  # a draft token the target accepted
    CORRECTED = 3  # the target's own, after it rejected the draft token at this position
    BONUS = 4  # the target's own, after it accepted every draft token of the round
