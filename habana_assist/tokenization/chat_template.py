"""Chat templates: a checkpoint's Jinja template turned into the prompt text (or ids), as Transformers does it.

``apply_chat_template(tokenizer, conversation, ...)`` is Transformers' ``PreTrainedTokenizerBase.
apply_chat_template`` (4.5x semantics): the template is picked as ``get_chat_template`` picks it, rendered with
Jinja2 in an ``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with the loopcontrols
extension, the ``{% generation %}`` tag, the globals ``raise_exception`` and ``strftime_now`` and Transformers'
``tojson`` filter; the render context is the tokenizer's special tokens map, then ``messages``, ``tools``,
``documents``, ``add_generation_prompt`` and the caller's keyword arguments. The rendered text is tokenized with
``add_special_tokens=False`` (the template writes bos itself). Tools given as Python functions become JSON schemas
as Transformers' ``get_json_schema`` builds them. Not offered: ``return_assistant_tokens_mask`` (refused).

The tokenizer is duck-typed: ``chat_template`` (str, dict name -> str, or None), ``special_tokens_map``
(dict name -> str) and ``__call__(text, padding=, truncation=, max_length=, add_special_tokens=,
return_tensors=, ...) -> BatchEncoding``.

Every failure of a template (its syntax, or an error while rendering, ``raise_exception`` included) is a
``ChatTemplateError`` whose message names the template's line and quotes it.
"""

import functools
import inspect
import json
import re
import traceback
import types
import typing
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import InvalidInputError

# Appended to the final message's text for continue_final_message, then looked for in the render and cut there
# (Transformers' tag: a word no template writes, with the trailing space that shows whether the template trimmed).
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
_SET_TEMPLATE_HINT = (
    "set one with tokenizer.chat_template = '<Jinja template>' (or a chat_template.jinja file / "
    '"chat_template" in tokenizer_config.json beside the tokenizer), or pass '
    "chat_template='<Jinja template>' to apply_chat_template"
)
_QUOTED_LINE_CHARS = 160  # a quoted template line is cut to this many characters (one-line templates are long)


class ChatTemplateError(InvalidInputError, jinja2.TemplateError):
    """A chat template failed: its syntax, or rendering it for this conversation (``raise_exception`` included).

    ``lineno`` is the template's line (1-based, None where Jinja gave none) and ``line`` that line's text.
    Also a ``jinja2.TemplateError``, which is what Transformers' users catch for the same failures.
    """

    def __init__(self, message, lineno=None, line=None):
        super().__init__(message)
        self.lineno, self.line = lineno, line


class _TemplateRaised(jinja2.TemplateError):
    """What the template's raise_exception(message) raises inside the render; reported as a ChatTemplateError."""


# ---------------------------------------------------------------------------------------------------------------
# The environment: Transformers' helpers


def _raise_exception(message):
    raise _TemplateRaised(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """Transformers' tojson filter: json.dumps with these defaults, not Jinja's own filter (which escapes <, >, &
    and ' for HTML and sorts keys)."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.now().strftime(format)


class _GenerationTag(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}``: Transformers marks the assistant's text with it for
    return_assistant_tokens_mask. That mask is not offered here, so the tag renders its body unchanged (templates
    that use it still render)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    @staticmethod
    def _render_body(caller):
        return caller()


@functools.lru_cache(maxsize=None)
def _environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _template_line(source, lineno):
    """(lineno, the text of that line of source, stripped and cut) or (None, None) where lineno is unusable."""
    lines = re.split(r"\r\n|\r|\n", source)  # Jinja's own line breaks (str.splitlines also splits on \x0c etc.)
    if not isinstance(lineno, int) or not 1 <= lineno <= len(lines):
        return None, None
    text = lines[lineno - 1].strip()
    if len(text) > _QUOTED_LINE_CHARS:
        text = text[:_QUOTED_LINE_CHARS] + "..."
    return lineno, text


def _where(lineno, line):
    return f"line {lineno} ({line!r})" if lineno is not None else "an unknown line"


def compile_chat_template(source):
    """Template source (str) -> jinja2.Template in Transformers' environment; compiled once per source.
    A syntax error is a ChatTemplateError naming the line."""
    if not isinstance(source, str):
        raise InvalidInputError(
            f"a chat template is a str of Jinja source, not {type(source).__name__}; set "
            "tokenizer.chat_template (or pass chat_template=) to the template's text"
        )
    return _compile(source)


@functools.lru_cache(maxsize=64)
def _compile(source):
    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as e:
        lineno, line = _template_line(source, e.lineno)
        raise ChatTemplateError(
            f"the chat template has a syntax error at {_where(lineno, line)}: {e.message}; fix "
            "the template (tokenizer.chat_template or the chat_template argument)",
            lineno,
            line,
        ) from None
    except SyntaxError as e:  # Jinja compiled it to Python that Python refuses ({% break %} outside a loop)
        raise ChatTemplateError(
            f"the chat template compiles to invalid code ({e.msg}); fix the template "
            "(tokenizer.chat_template or the chat_template argument)"
        ) from None
    except (RecursionError, MemoryError) as e:  # absurdly deep nesting: the parser gives up
        raise ChatTemplateError(
            f"the chat template could not be compiled ({type(e).__name__}: {e}); simplify the template's nesting"
        ) from None


def _render(template, source, context):
    """template.render(**context) -> str; every error raised while rendering becomes a ChatTemplateError naming the
    template line that was running (the innermost traceback frame Jinja maps back to the template)."""
    try:
        return template.render(**context)
    except Exception as e:  # noqa: BLE001 - a template can fail with any error a filter or method raises
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == "<template>"]
        lineno, line = _template_line(source, frames[-1].lineno if frames else getattr(e, "lineno", None))
        if isinstance(e, _TemplateRaised):
            message = (
                f"the chat template refused this input: {e.message} (raise_exception at "
                f"{_where(lineno, line)}); change the conversation or the arguments to what the template "
                "accepts"
            )
        else:
            message = (
                f"rendering the chat template failed at {_where(lineno, line)}: {type(e).__name__}: {e}; "
                "check that the conversation and the keyword arguments are what the template expects, or "
                "fix the template"
            )
        raise ChatTemplateError(message, lineno, line) from e


# ---------------------------------------------------------------------------------------------------------------
# Choosing the template


def get_chat_template(tokenizer, chat_template=None, tools=None):
    """The template source apply_chat_template uses, chosen as Transformers' get_chat_template chooses it.

    tokenizer.chat_template a dict (named templates): chat_template names one of them (else it is itself the
    source); with chat_template None, "tool_use" when tools are given and it exists, else "default", else an error
    listing the names. tokenizer.chat_template a str or None: chat_template, else the tokenizer's, else an error
    saying how to set one."""
    own = getattr(tokenizer, "chat_template", None)
    if isinstance(own, (list, tuple)):  # tokenizer_config.json's form of named templates
        try:
            own = {entry["name"]: entry["template"] for entry in own}
        except (TypeError, KeyError):
            raise InvalidInputError(
                "tokenizer.chat_template is a list: it must hold {'name': ..., 'template': ...} "
                "dicts (named templates); set a str or a dict name -> template"
            ) from None
    if chat_template is not None and not isinstance(chat_template, str):
        raise InvalidInputError(
            f"chat_template={type(chat_template).__name__}; pass a template's Jinja source or "
            "the name of one of the tokenizer's named templates (a str)"
        )
    if isinstance(own, dict):
        if chat_template is not None:
            return own.get(chat_template, chat_template)
        if tools is not None and "tool_use" in own:
            return own["tool_use"]
        if "default" in own:
            return own["default"]
        raise InvalidInputError(
            "this tokenizer has several chat templates and none named 'default'; pass "
            f"chat_template=<one of {sorted(own)}> or a template's Jinja source"
        )
    if chat_template is not None:
        return chat_template
    if own is None:
        raise InvalidInputError(f"this tokenizer has no chat template and none was passed; {_SET_TEMPLATE_HINT}")
    return own


# ---------------------------------------------------------------------------------------------------------------
# Tools given as Python functions: Transformers' get_json_schema (type hints + a Google-style docstring)

_JSON_TYPES = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    typing.Any: {},
    type(None): {"type": "null"},
}


def _hint_schema(hint, where):
    """A type hint -> its JSON schema: basic types, Optional/Union (a list of types, or anyOf; "nullable" with None),
    list[...] (items), tuple[...] (prefixItems), dict[str, ...] (additionalProperties); other classes are objects."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is None:
        return dict(_JSON_TYPES.get(hint, {"type": "object"}))
    if origin is typing.Union or origin is types.UnionType:
        subtypes = [_hint_schema(a, where) for a in args if a is not type(None)]
        if len(subtypes) == 1:
            out = subtypes[0]
        elif all(isinstance(t.get("type"), str) for t in subtypes):
            out = {"type": sorted(t["type"] for t in subtypes)}
        else:
            out = {"anyOf": subtypes}
        if type(None) in args:
            out["nullable"] = True
        return out
    if origin is list:
        return {"type": "array", "items": _hint_schema(args[0], where)} if args else {"type": "array"}
    if origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 1 or ... in args:
            raise InvalidInputError(
                f"{where}: a tuple hint needs two or more fixed element types ({hint}); use "
                "list[...] for a variable-length argument"
            )
        return {"type": "array", "prefixItems": [_hint_schema(a, where) for a in args]}
    if origin is dict:
        out = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = _hint_schema(args[1], where)
        return out
    raise InvalidInputError(
        f"{where}: the type hint {hint} has no JSON schema here; use int, float, str, bool, "
        "list, tuple, dict, Optional or Union of those, or pass the tool's JSON schema"
    )


def _parse_docstring(doc):
    """Google-style docstring -> (description, {argument: description}, returns description or None)."""
    description = re.match(r"(.*?)\s*(?:Args:|Returns:|Raises:|\Z)", doc, re.S).group(1).strip()
    block = re.search(r"\n\s*Args:\n\s*(.*?)\s*(?:Returns:|Raises:|\Z)", doc, re.S)
    arguments = {}
    if block:
        lines = "\n".join(line for line in block.group(1).split("\n") if line.strip())
        for name, text in re.findall(r"(?:^|\n)\s*(\w+):\s*(.*?)\s*(?=\n\s*\w+:|\Z)", lines, re.S):
            arguments[name] = re.sub(r"\s*\n+\s*", " ", text.strip())
    returns = re.search(r"\n\s*Returns:\n\s*(.*?)\s*(?:Raises:|\Z)", doc, re.S)
    return description, arguments, returns.group(1).strip() if returns else None


def get_json_schema(func):
    """A Python function -> its tool schema {"type": "function", "function": {"name", "description",
    "parameters": {"type": "object", "properties", "required"}, "return"?}}, as Transformers' get_json_schema:
    every argument needs a type hint and a description under "Args:" in the docstring; a description ending in
    "(choices: [...])" becomes an "enum"."""
    name = getattr(func, "__name__", repr(func))
    doc = inspect.getdoc(func)
    if not doc:
        raise InvalidInputError(
            f"cannot build a JSON schema for tool {name}: it has no docstring; give it one "
            "(a description, then 'Args:' with one 'name: description' line per argument)"
        )
    description, described, returns = _parse_docstring(doc.strip())
    try:
        hints = typing.get_type_hints(func)
    except Exception as e:  # noqa: BLE001 - an unresolvable annotation raises NameError, TypeError...
        raise InvalidInputError(
            f"cannot build a JSON schema for tool {name}: its type hints do not resolve ({type(e).__name__}: {e})"
        ) from None
    required = []
    for parameter in inspect.signature(func).parameters.values():
        if parameter.annotation is inspect.Parameter.empty:
            raise InvalidInputError(
                f"cannot build a JSON schema for tool {name}: argument {parameter.name} has no "
                "type hint; annotate it (e.g. city: str)"
            )
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    properties = {arg: _hint_schema(hint, f"tool {name}, argument {arg}") for arg, hint in hints.items()}
    returned = properties.pop("return", None)
    if returned is not None and returns is not None:
        returned["description"] = returns
    for arg, schema in properties.items():
        if arg not in described:
            raise InvalidInputError(
                f"cannot build a JSON schema for tool {name}: the docstring has no description "
                f"for the argument '{arg}'; add '{arg}: <description>' under 'Args:'"
            )
        text = described[arg]
        choices = re.search(r"\(choices:\s*(.*?)\)\s*$", text, flags=re.IGNORECASE)
        if choices:
            try:
                values = json.loads(choices.group(1))
            except ValueError:
                raise InvalidInputError(
                    f"tool {name}, argument {arg}: '(choices: ...)' must hold a JSON list, e.g. "
                    '(choices: ["tea", "coffee"])'
                ) from None
            schema["enum"] = [v.strip() if isinstance(v, str) else v for v in values]
            text = text[: choices.start()].strip()
        schema["description"] = text
    parameters = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    function = {"name": name, "description": description, "parameters": parameters}
    if returned is not None:
        function["return"] = returned
    return {"type": "function", "function": function}


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def _is_chat(value):
    return isinstance(value, (list, tuple)) or hasattr(value, "messages")


def _messages(chat):
    return chat.messages if hasattr(chat, "messages") else chat  # a Conversation-like object carries .messages


def _tool_schemas(tools):
    """tools -> their JSON schemas: dicts as given, Python functions through get_json_schema."""
    if tools is None:
        return None
    if not isinstance(tools, (list, tuple)):
        raise InvalidInputError(
            f"tools={type(tools).__name__}; pass a list of JSON schemas (dicts) or Python "
            "functions with type hints and a Google-style docstring"
        )
    schemas = []
    for i, tool in enumerate(tools):
        if isinstance(tool, dict):
            schemas.append(tool)
        elif inspect.isfunction(tool):
            schemas.append(get_json_schema(tool))
        else:
            raise InvalidInputError(
                f"tools[{i}] is a {type(tool).__name__}; tools should either be a JSON schema "
                "(a dict) or a Python function with type hints and a docstring suitable for "
                "auto-conversion to a schema"
            )
    return schemas


def _with_continue_tag(messages):
    """messages -> (a copy whose final text carries _CONTINUE_TAG, the final text as given), as Transformers marks
    it: the content when it is a str, else the last content block that has "text"."""
    if not messages:
        raise InvalidInputError("continue_final_message=True needs a conversation with at least one message")
    final = messages[-1]
    if not isinstance(final, dict) or "content" not in final:
        raise InvalidInputError(
            "continue_final_message=True: the final message must be a dict with a 'content' to continue"
        )
    content = final["content"]
    if isinstance(content, str):
        return list(messages[:-1]) + [{**final, "content": content + _CONTINUE_TAG}], content
    if isinstance(content, (list, tuple)):
        blocks = list(content)
        for i in range(len(blocks) - 1, -1, -1):
            if isinstance(blocks[i], dict) and "text" in blocks[i]:
                text = blocks[i]["text"]
                if not isinstance(text, str):
                    break
                blocks[i] = {**blocks[i], "text": text + _CONTINUE_TAG}
                return list(messages[:-1]) + [{**final, "content": blocks}], text
        raise InvalidInputError(
            "continue_final_message is set but we could not find any text to continue in the "
            "final message! Give its content a str, or a block with a 'text' str"
        )
    raise InvalidInputError(
        f"continue_final_message=True: the final message's content is a "
        f"{type(content).__name__}; it must be a str or a list of content blocks with 'text'"
    )


def _cut_at_continue_tag(rendered, final_text):
    """The render cut where the final message's text ends, before whatever the template writes after it
    (end-of-turn tokens). Where the template trimmed the tag's space, trailing space before it goes too."""
    tag = _CONTINUE_TAG.strip()
    if final_text.strip() not in rendered or tag not in rendered:
        raise InvalidInputError(
            "continue_final_message is set but the final message does not appear in the chat "
            "after applying the chat template! This can happen if the chat template deletes "
            "portions of the final message. Please verify the chat template and final message "
            "in your chat to ensure they are compatible."
        )
    at = rendered.rindex(tag)
    if rendered[at : at + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return rendered[:at]
    return rendered[:at].rstrip()


def render_chat_template(
    source,
    conversations,
    tools=None,
    documents=None,
    add_generation_prompt=False,
    continue_final_message=False,
    context=None,
):
    """Template source, a list of conversations -> a list of rendered str (one per conversation), Transformers'
    render_jinja_template without the assistant mask. context: dict of the other template variables (special
    tokens, then the caller's kwargs)."""
    context = dict(context or {})
    template = compile_chat_template(source)
    tool_schemas = _tool_schemas(tools)
    if documents is not None:
        if not isinstance(documents, (list, tuple)) or not all(isinstance(d, dict) for d in documents):
            raise InvalidInputError("documents should be a list of dicts with 'title' and 'text' keys")
    if "messages" in context:
        raise InvalidInputError(
            "'messages' is the conversation's name inside the template; pass the conversation as "
            "the first argument, not messages="
        )
    rendered = []
    for chat in conversations:
        messages = _messages(chat)
        final_text = None
        if continue_final_message:
            messages, final_text = _with_continue_tag(messages)
        text = _render(
            template,
            source,
            {
                **context,
                "messages": messages,
                "tools": tool_schemas,
                "documents": documents,
                "add_generation_prompt": add_generation_prompt,
            },
        )
        if continue_final_message:
            text = _cut_at_continue_tag(text, final_text)
        rendered.append(text)
    return rendered


def apply_chat_template(
    tokenizer,
    conversation,
    tools=None,
    documents=None,
    chat_template=None,
    add_generation_prompt=False,
    continue_final_message=False,
    tokenize=True,
    padding=False,
    truncation=False,
    max_length=None,
    return_tensors=None,
    return_dict=False,
    return_assistant_tokens_mask=False,
    tokenizer_kwargs=None,
    **kwargs,
):
    """A conversation (list of {"role", "content"} dicts) or a batch of them -> the prompt, as Transformers'
    tokenizer.apply_chat_template.

    tokenize=False: the rendered str (a list of str for a batch). tokenize=True: the ids of
    tokenizer(rendered, add_special_tokens=False, padding, truncation, max_length, return_tensors,
    **tokenizer_kwargs): a list of int (a list of lists for a batch; arrays/tensors with return_tensors), or with
    return_dict=True the whole BatchEncoding (input_ids, attention_mask). kwargs are template variables (e.g.
    enable_thinking=False for Qwen3) and override the special tokens of the same name.
    tools: JSON schemas (dicts) or Python functions (converted by get_json_schema).
    Refused: return_assistant_tokens_mask=True (it needs each token's character offsets)."""
    if return_dict and not tokenize:
        raise InvalidInputError(
            "`return_dict=True` is incompatible with `tokenize=False`, because there is no dict "
            "of tokenizer outputs to return."
        )
    if return_assistant_tokens_mask and not return_dict:
        raise InvalidInputError("`return_assistant_tokens_mask=True` is incompatible with `return_dict=False`")
    if return_assistant_tokens_mask:
        raise InvalidInputError(
            "return_assistant_tokens_mask=True is not supported by this package (it needs "
            "character offsets of each token); leave it False"
        )
    if continue_final_message and add_generation_prompt:
        raise InvalidInputError(
            "continue_final_message and add_generation_prompt are not compatible. Use "
            "continue_final_message when you want the model to continue the final message, and "
            "add_generation_prompt when you want to add a header that will prompt it to start a "
            "new assistant message instead."
        )
    if tokenizer_kwargs is not None and not isinstance(tokenizer_kwargs, dict):
        raise InvalidInputError(
            f"tokenizer_kwargs={type(tokenizer_kwargs).__name__}; pass a dict of the tokenizer's call arguments or None"
        )
    source = get_chat_template(tokenizer, chat_template, tools)

    if not isinstance(conversation, (list, tuple)) and not hasattr(conversation, "messages"):
        raise InvalidInputError(
            f"conversation is a {type(conversation).__name__}; pass a list of messages "
            "({'role': ..., 'content': ...} dicts) or a list of such lists (a batch)"
        )
    batched = isinstance(conversation, (list, tuple)) and len(conversation) > 0 and _is_chat(conversation[0])
    conversations = list(conversation) if batched else [conversation]
    if batched and not all(_is_chat(c) for c in conversations):
        raise InvalidInputError(
            "a batch of conversations must hold only lists of messages; conversation holds a list and something else"
        )

    special = dict(getattr(tokenizer, "special_tokens_map", None) or {})
    rendered = render_chat_template(
        source,
        conversations,
        tools=tools,
        documents=documents,
        add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message,
        context={**special, **kwargs},
    )
    if not batched:
        rendered = rendered[0]
    if not tokenize:
        return rendered
    out = tokenizer(
        rendered,
        padding=padding,
        truncation=truncation,
        max_length=max_length,
        add_special_tokens=False,
        return_tensors=return_tensors,
        **(tokenizer_kwargs or {}),
    )
    return out if return_dict else out["input_ids"]
