"""The typed surface: every public function and method of habana_assist carries type hints (mypy checks the modules
holding them, pyproject.toml's [tool.mypy]; this names any that lacks one), the type checker's view of the
architecture classes matches the package's, the extension's stub and py.typed are in the package, and
check_public_api.py, which mypy checks strictly, runs."""

from __future__ import annotations

import ast
import inspect
import os
from collections.abc import Iterator
from typing import Any, Callable

import check_public_api

import habana_assist as ha
from habana_assist.models.auto import ARCHITECTURE_CLASSES

# Methods that are public surface although their names start with an underscore.
_DUNDERS = ("__init__", "__call__", "__iter__", "__next__", "__getitem__", "__len__", "__contains__", "__getattr__")


def _functions(name: str, obj: object, package: str = "habana_assist") -> Iterator[tuple[str, Callable[..., Any]]]:
    """(qualified name, function) of a public function, or of every public method and property of a public class
    that package defines (inherited ones included; those of builtins such as dict left out)."""
    if inspect.isfunction(obj):
        yield name, obj
        return
    if not inspect.isclass(obj) or issubclass(obj, BaseException):
        return
    for attr in dir(obj):
        if attr.startswith("_") and attr not in _DUNDERS:
            continue
        static = inspect.getattr_static(obj, attr)
        if isinstance(static, (classmethod, staticmethod)):
            static = static.__func__
        elif isinstance(static, property):
            for part in (static.fget, static.fset):
                if part is not None and part.__module__.startswith(package):
                    yield f"{name}.{attr}", part
            continue
        if inspect.isfunction(static) and static.__module__.startswith(package):
            yield f"{name}.{attr}", static


def _missing(function: Callable[..., Any]) -> list[str]:
    """The parameters (and "return") of function that have no annotation."""
    signature = inspect.signature(function)
    missing = [
        p.name
        for i, p in enumerate(signature.parameters.values())
        if p.annotation is inspect.Parameter.empty and not (i == 0 and p.name in ("self", "cls"))
    ]
    if signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def test_every_public_function_and_method_is_annotated() -> None:
    seen, unannotated = 0, {}
    for name in ha.__all__:
        for qualified, function in _functions(name, getattr(ha, name)):
            seen += 1
            missing = _missing(function)
            if missing:
                unannotated[qualified] = missing
    assert seen > 150, f"expected the public surface's functions and methods (over 150), found {seen}"
    assert not unannotated, f"expected type hints on every public function and method; these lack them: {unannotated}"


def test_an_unannotated_method_is_found() -> None:
    class Sample:
        def typed(self, x: int) -> int:
            return x

        def untyped(self, x, y: int = 0):  # type: ignore[no-untyped-def]  # the case under test
            return x

    found = {name: _missing(f) for name, f in _functions("Sample", Sample, package=__name__)}
    assert found == {"Sample.typed": [], "Sample.untyped": ["x", "return"]}, found


def test_the_type_checkers_architecture_classes_are_the_packages() -> None:
    """habana_assist/__init__.py names each architecture class for the type checker (the package adds them with
    globals().update, which no type checker reads): the same names as models.auto.ARCHITECTURE_CLASSES."""
    with open(ha.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    declared: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            declared |= {
                t.id
                for stmt in node.body
                if isinstance(stmt, ast.Assign)
                for t in stmt.targets
                if isinstance(t, ast.Name)
            }
    assert declared == set(ARCHITECTURE_CLASSES), (
        f"expected __init__.py's TYPE_CHECKING names {sorted(ARCHITECTURE_CLASSES)}, got {sorted(declared)}"
    )
    for name in declared:
        assert name in ha.__all__ and issubclass(getattr(ha, name), ha.PreTrainedCausalLM), name


def test_the_package_ships_its_stub_and_py_typed() -> None:
    here = os.path.dirname(ha.__file__)
    for name in ("py.typed", "_core.pyi"):
        assert os.path.isfile(os.path.join(here, name)), f"expected {name} beside habana_assist/__init__.py"


def test_the_type_checked_usage_runs() -> None:
    texts = check_public_api.main()
    assert len(texts) == 3 and all(isinstance(t, str) and t for t in texts), texts
