"""Arrays in the caller's types: numpy arrays, Python lists or torch tensors in; numpy or torch out.

The core reads numpy arrays. to_numpy() turns what a caller passed into one (a torch CPU tensor zero-copy,
as a view of the tensor's memory) and says which kind it was; convert_output() turns a result back into
that kind (torch in, torch out; lists and numpy in, numpy out). torch is imported only once the caller has
handed in a torch tensor or asked for one (return_tensors="pt", or one of the model's torch types: model.dtype,
model.device, parameters()...), so numpy users never import it.

The model speaks torch's types where torch is importable: dtype_object() and cpu_device() give a dtype and the
device as torch.dtype and torch.device, and without torch as the dtype's name and CPUDevice.
"""

import copy
import dataclasses
import importlib.util
import sys

import numpy as np

from ..errors import InvalidInputError

__all__ = [
    "to_numpy",
    "from_numpy",
    "convert_output",
    "torch_available",
    "is_torch_tensor",
    "optional_torch",
    "dtype_object",
    "cpu_device",
    "CPUDevice",
    "KINDS",
]

KINDS = ("numpy", "list", "torch")


def torch_available():
    """Whether torch can be found on sys.path (cheap: it is not imported)."""
    return importlib.util.find_spec("torch") is not None  # consults sys.modules first: a blocked None is False


def is_torch_tensor(x):
    """Whether x is a torch.Tensor (or a subclass, e.g. nn.Parameter). Never imports torch: an object can only
    be a tensor if torch was imported already."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _tensor_to_numpy(x, name):
    """A torch tensor -> numpy array viewing its memory where numpy can (a copy for bfloat16, which numpy has
    no type for, and for tensors with a pending negation or conjugation)."""
    if x.device.type != "cpu":
        raise InvalidInputError(
            f"{name} is a torch tensor on device {str(x.device)!r}; this package computes on the "
            f"CPU: pass {name}.cpu() (or {name}.to('cpu'))"
        )
    if x.layout is not sys.modules["torch"].strided:
        raise InvalidInputError(
            f"{name} is a torch tensor with layout {x.layout}; pass a dense tensor ({name}.to_dense())"
        )
    x = x.detach()  # a tensor that requires grad: numpy() refuses it; detach() shares its memory
    if x.dtype == sys.modules["torch"].bfloat16:
        x = x.float()
    return x.resolve_conj().resolve_neg().numpy()


def to_numpy(x, name):
    """x (np.ndarray or numpy scalar, a nested list/tuple of numbers, or a torch tensor on the CPU) -> (np.ndarray,
    kind), kind one of "numpy", "list", "torch". numpy arrays are returned as they are and torch tensors as views
    of their memory (np.shares_memory holds); dtypes are kept (the caller checks them). Anything else, a ragged
    list, or a tensor on another device raises InvalidInputError naming `name`."""
    if isinstance(x, np.ndarray):
        return x, "numpy"
    if isinstance(x, np.generic):  # a numpy scalar: a 0-d array, whose shape the caller refuses or accepts
        return np.asarray(x), "numpy"
    if is_torch_tensor(x):
        return _tensor_to_numpy(x, name), "torch"
    if isinstance(x, (list, tuple)):
        try:
            array = np.asarray(x)
        except (ValueError, TypeError) as e:  # numpy >= 1.24: a ragged list raises ValueError
            raise InvalidInputError(
                f"{name} is a list that is not rectangular ({e}); pass equal-length rows (pad "
                "them: tok(texts, padding=True))"
            ) from None
        if array.dtype == object:
            raise InvalidInputError(
                f"{name} is a list whose items are not all numbers of equal-length rows; pass a "
                "list of ints or a list of equal-length lists of ints"
            )
        return array, "list"
    if callable(getattr(x, "keys", None)) and "input_ids" in x.keys():  # a tokenizer's whole output (BatchEncoding)
        raise InvalidInputError(
            f"{name} is a tokenizer's whole output ({type(x).__qualname__}); unpack it, "
            "model.generate(**inputs), or pass inputs['input_ids'] (and attention_mask=)"
        )
    raise InvalidInputError(
        f"{name} is a {type(x).__module__}.{type(x).__qualname__}; pass a numpy array, a (nested) "
        "list or a torch tensor, of shape (batch, seq) for token ids"
    )


def import_torch(needed_by="this call", fix="install Debian's python3-torch"):
    """torch (the one place the package imports it), or InvalidInputError naming what needed it and the fix."""
    try:
        import torch
    except ImportError:
        raise InvalidInputError(f"{needed_by} needs PyTorch (torch), which is not importable here; {fix}") from None
    return torch


def optional_torch():
    """torch where it is importable (imported now if need be), else None."""
    if not torch_available():
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch


class CPUDevice(str):
    """The CPU as model.device names it where torch is not importable: the string "cpu" (equal to it, printed as
    it), with torch.device's type and index."""

    type = "cpu"
    index = None  # type: ignore[assignment]  # torch.device's index, in place of str.index, as torch.device has it

    def __new__(cls, name="cpu"):  # name: what copy and pickle pass back
        if name != "cpu":
            raise InvalidInputError(f"CPUDevice({name!r}): the only device here is 'cpu'")
        return super().__new__(cls, "cpu")

    def __repr__(self):
        return "device(type='cpu')"


def cpu_device():
    """torch.device("cpu") where torch is importable, else CPUDevice()."""
    torch = optional_torch()
    return CPUDevice() if torch is None else torch.device("cpu")


def dtype_object(name):
    """A float dtype's name ("float32", "bfloat16", "float16") as the model reports it: torch's dtype
    (torch.bfloat16) where torch is importable, else the name itself (numpy has no bfloat16; np.dtype(name) gives
    numpy's for the other two)."""
    torch = optional_torch()
    return name if torch is None else getattr(torch, name)


def _torch():
    return import_torch()  # only called once the caller chose torch, so it is importable


def from_numpy(array, kind):
    """np.ndarray -> a torch tensor sharing its memory for kind "torch" (a copy if the array is read-only or of a
    byte order torch cannot view); the array itself otherwise."""
    if kind != "torch":
        return array
    if not array.flags.writeable or not array.dtype.isnative:
        array = np.array(array, dtype=array.dtype.newbyteorder("="))  # torch warns on read-only memory
    return _torch().from_numpy(array)


def convert_output(obj, kind):
    """A result in the kind of the caller's input: for kind "torch", every np.ndarray inside obj (itself, the items
    of tuples, lists and dicts, the fields of dataclasses such as GenerateDecoderOnlyOutput and CausalLMOutput,
    recursively) becomes a torch tensor sharing its memory; numbers, None and other objects are kept. For other
    kinds obj is returned as it is. Containers are rebuilt (a dataclass is copied), never changed in place."""
    if kind != "torch":
        return obj
    return _convert(obj)


def _convert(obj):
    if isinstance(obj, np.ndarray):
        return from_numpy(obj, "torch")
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return type(obj)(*(_convert(v) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_convert(v) for v in obj)
    if isinstance(obj, dict):
        out = copy.copy(obj)  # keeps the class (BatchEncoding) and its attributes
        for key, value in obj.items():
            out[key] = _convert(value)
        return out
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = copy.copy(obj)
        for field in dataclasses.fields(obj):
            value = getattr(obj, field.name)
            converted = _convert(value)
            if converted is not value:
                object.__setattr__(out, field.name, converted)  # works for frozen dataclasses too
        return out
    return obj
