"""Checkpoint files: safetensors.py (reading and writing the format), loading.py (a checkpoint into weights the
core takes), saving.py (save_pretrained), hub.py (what a name passed to from_pretrained resolves to)."""
