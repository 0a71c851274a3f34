"""ModelOutput: Transformers' access to a result dataclass (utils/generic.py there too)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Union

# Transformers 5.24's older names of a field, still read: its outputs call the cache `cache`, and
# out.past_key_values, out["past_key_values"] and "past_key_values" in out reach it.
OLD_NAMES = {"past_key_values": "cache"}


class ModelOutput:
    """Transformers' ModelOutput access for a dataclass: out.field, out["field"], out[0] or out[:2] (over the
    fields that are not None, in order, as to_tuple()), keys(), values(), items(), get(), iteration over the keys;
    the older names of OLD_NAMES (past_key_values) reach their field."""

    if TYPE_CHECKING:  # each subclass is a dataclass
        __dataclass_fields__: ClassVar[dict[str, Any]]

    def __getitem__(self, key: Union[str, int, slice]) -> Any:
        if isinstance(key, str):
            key = OLD_NAMES.get(key, key)
            if key not in self.keys():
                raise KeyError(key)
            return getattr(self, key)
        return self.to_tuple()[key]

    def get(self, key: str, default: Any = None) -> Any:
        key = OLD_NAMES.get(key, key)
        return getattr(self, key) if key in self.keys() else default

    @property
    def past_key_values(self) -> Any:
        """The cache: Transformers 5.24's older name of `cache`."""
        return getattr(self, "cache", None)

    def keys(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None]

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self.keys()]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def to_tuple(self) -> tuple[Any, ...]:
        return tuple(self.values())

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, key: str) -> bool:
        return OLD_NAMES.get(key, key) in self.keys()
