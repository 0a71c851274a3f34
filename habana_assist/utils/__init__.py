"""Helpers shared by the package: tensors.py (numpy and torch in and out), progress.py (progress bars)."""
