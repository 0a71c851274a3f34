"""Checkpoint files: safetensors.py (reading and writing the format), loading.py (a checkpoint into weights the
core takes), saving.py (save_pretrained), state_dict.py (the weights as parameters() and state_dict() show them), hub.py
(what a name passed to from_pretrained resolves to)."""
