"""The shipped pair (pycode, pycode-draft: see MODEL_CARD.md) and the split of the standard library it was trained
and is evaluated on (stdlib_split.py, evaluation.py)."""
