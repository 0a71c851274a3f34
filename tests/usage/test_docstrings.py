"""The public entry points document their arguments as Transformers' do: a Google-style docstring whose Args
section names every parameter of the signature and nothing else (a `*inputs` or `**kwargs` catch-all documented by
its starred name, saying in prose what it takes), with a Returns section and, where the function raises this
package's errors by design, a Raises section naming real ones."""

import inspect
import re

import pytest

import habana_assist as ha
from habana_assist import errors
from habana_assist.generation.utils import GenerationMixin
from habana_assist.modeling_utils import PreTrainedCausalLM
from habana_assist.tokenization.tokenization_utils_base import PreTrainedTokenizerBase

ENTRY_POINTS = {
    "GenerationMixin.generate": GenerationMixin.generate,
    "PreTrainedCausalLM.forward": PreTrainedCausalLM.forward,
    "PreTrainedCausalLM.__call__": PreTrainedCausalLM.__call__,
    "PreTrainedCausalLM.from_pretrained": PreTrainedCausalLM.from_pretrained,
    "AutoModelForCausalLM.from_pretrained": ha.AutoModelForCausalLM.from_pretrained,
    "AutoTokenizer.from_pretrained": ha.AutoTokenizer.from_pretrained,
    "PreTrainedTokenizerBase.from_pretrained": PreTrainedTokenizerBase.from_pretrained,
    "pipeline": ha.pipeline,
}
SECTIONS = ("Args", "Returns", "Raises", "Yields", "Examples", "Example", "Note", "Notes")
ENTRY = re.compile(r"(\*{0,2}\w+)(?: \([^)]*\))?:(?:\s|$)")


def sections(doc):
    """A docstring -> {section name: its lines, dedented to the section's body}."""
    lines = inspect.cleandoc(doc).splitlines()
    found, name = {}, None
    for line in lines:
        header = line.rstrip()
        if header.endswith(":") and header[:-1] in SECTIONS and not line.startswith(" "):
            name = header[:-1]
            if name in found:
                raise AssertionError(f"section {name}: appears twice")
            found[name] = []
        elif name is not None:
            if line and not line.startswith(" "):
                name = None  # prose after the sections
            else:
                found[name].append(line)
    return {k: inspect.cleandoc("\n".join(v)).splitlines() for k, v in found.items()}


def documented_names(args_lines):
    """The names an Args section documents: its lines at the section's own indentation, `name:` or
    `name (type):`; continuation lines are indented deeper."""
    names = []
    for line in args_lines:
        if not line or line.startswith(" "):
            continue
        match = ENTRY.match(line)
        assert match, f"an Args line at the entries' indentation that names no argument: {line!r}"
        names.append(match.group(1))
    return names


def signature_names(function):
    """-> (the named parameters but self/cls, the starred catch-alls as written: '*inputs', '**kwargs')."""
    named, starred = [], []
    for p in inspect.signature(function).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            starred.append("*" + p.name)
        elif p.kind is p.VAR_KEYWORD:
            starred.append("**" + p.name)
        elif p.name not in ("self", "cls"):
            named.append(p.name)
    return named, starred


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_args_section_documents_exactly_the_signature(name):
    function = ENTRY_POINTS[name]
    doc = inspect.getdoc(function)
    assert doc, f"{name} has no docstring"
    parts = sections(doc)
    assert "Args" in parts, f"{name}: expected an Args: section, found sections {sorted(parts)}"
    documented = documented_names(parts["Args"])
    named, starred = signature_names(function)
    assert len(documented) == len(set(documented)), f"{name}: an argument documented twice: {documented}"
    missing = [n for n in named + starred if n not in documented]
    assert not missing, f"{name}: parameters of the signature missing from Args: {missing}"
    extra = [n for n in documented if n not in named + starred]
    assert not extra, f"{name}: Args documents names the signature lacks: {extra} (signature: {named + starred})"
    assert documented == named + starred, (
        f"{name}: Args should follow the signature's order {named + starred}, got {documented}"
    )


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_returns_and_raises_sections_name_real_things(name):
    function = ENTRY_POINTS[name]
    parts = sections(inspect.getdoc(function))
    assert parts.get("Returns"), f"{name}: expected a non-empty Returns: section, found sections {sorted(parts)}"
    if name.endswith("__call__"):  # model(...) is forward(...), whose docstring says what it raises
        assert "forward" in inspect.getdoc(function), f"{name}: expected the docstring to point to forward"
        return
    raised = [
        m.group(1)
        for line in parts.get("Raises", [])
        if not line.startswith(" ")
        for m in re.finditer(r"(\w+Error)\b", line.split(":")[0])
    ]
    assert raised, f"{name}: expected a Raises: section naming this package's errors, found {parts.get('Raises')}"
    unknown = [
        e
        for e in raised
        if not (isinstance(getattr(errors, e, None), type) and issubclass(getattr(errors, e), errors.HabanaAssistError))
    ]
    assert not unknown, f"{name}: Raises names errors that habana_assist.errors does not define: {unknown}"


def test_the_auto_class_loads_with_the_base_class_method():
    """AutoModelForCausalLM.from_pretrained is the base class's method, so one docstring serves both."""
    assert ha.AutoModelForCausalLM.from_pretrained.__func__ is PreTrainedCausalLM.from_pretrained.__func__


def test_the_parser_sees_a_missing_and_an_extra_argument():
    """The checks above could fail: a docstring that forgets one argument and names another is caught."""

    def f(a, b=1, **kwargs):
        """Does f.

        Args:
            a: first.
            c (int): not an argument.
                Continued.
            **kwargs: nothing.

        Returns:
            None.
        """

    documented = documented_names(sections(f.__doc__)["Args"])
    named, starred = signature_names(f)
    assert documented == ["a", "c", "**kwargs"], documented
    assert (named, starred) == (["a", "b"], ["**kwargs"])
    assert [n for n in named if n not in documented] == ["b"]
