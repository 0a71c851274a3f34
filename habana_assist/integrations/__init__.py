"""Models of other frameworks: wrap.py (habana_assist.wrap) over external.py (the core's model interface as Python
callbacks)."""
