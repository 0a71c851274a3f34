"""Helpers shared by the package: tensors.py (numpy and torch in and out, the one torch import), inputs.py (a call's
inputs checked), files.py (the one atomic file writer), progress.py (progress bars), generic.py (ModelOutput),
types.py (the type aliases of the annotations)."""
