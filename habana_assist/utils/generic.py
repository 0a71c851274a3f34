"""ModelOutput: Transformers' access to a result dataclass (utils/generic.py there too)."""

import dataclasses

# Transformers 5.24's older names of a field, still read: its outputs call the cache `cache`, and
# out.past_key_values, out["past_key_values"] and "past_key_values" in out reach it.
OLD_NAMES = {"past_key_values": "cache"}


class ModelOutput:
    """Transformers' ModelOutput access for a dataclass: out.field, out["field"], out[0] or out[:2] (over the
    fields that are not None, in order, as to_tuple()), keys(), values(), items(), get(), iteration over the keys;
    the older names of OLD_NAMES (past_key_values) reach their field."""

    def __getitem__(self, key):
        if isinstance(key, str):
            key = OLD_NAMES.get(key, key)
            if key not in self.keys():
                raise KeyError(key)
            return getattr(self, key)
        return self.to_tuple()[key]

    def get(self, key, default=None):
        key = OLD_NAMES.get(key, key)
        return getattr(self, key) if key in self.keys() else default

    @property
    def past_key_values(self):
        """The cache: Transformers 5.24's older name of `cache`."""
        return getattr(self, "cache", None)

    def keys(self):
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]

    def values(self):
        return [getattr(self, k) for k in self.keys()]

    def items(self):
        return [(k, getattr(self, k)) for k in self.keys()]

    def to_tuple(self):
        return tuple(self.values())

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self.keys())

    def __contains__(self, key):
        return OLD_NAMES.get(key, key) in self.keys()
