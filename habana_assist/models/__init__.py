"""The supported families: each family's knowledge as data, and the Auto classes (auto.py)."""
