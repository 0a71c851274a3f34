"""ModelOutput: Transformers' access to a result dataclass (utils/generic.py there too)."""

import dataclasses


class ModelOutput:
    """Transformers' ModelOutput access for a dataclass: out.field, out["field"], out[0] or out[:2] (over the
    fields that are not None, in order, as to_tuple()), keys(), values(), items(), iteration over the keys."""

    def __getitem__(self, key):
        if isinstance(key, str):
            if key not in self.keys():
                raise KeyError(key)
            return getattr(self, key)
        return self.to_tuple()[key]

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
        return key in self.keys()
