"""The notebooks in examples/ run headlessly as a user runs them (Debian's python3-nbclient and python3-ipykernel,
working directory examples/), and every code cell's output is checked; the notebooks are committed without
outputs; the kernel's interrupt button stops a generation and leaves the model usable.

The kernel is ipykernel's own spec for this Python (sys.executable -m ipykernel_launcher), not Debian's
/usr/share/jupyter/kernels/python3 (always /usr/bin/python3), with the package under test first on PYTHONPATH
(tests/fixtures/package_under_test.py), so that the notebooks' `import habana_assist` imports it.
"""

import os
import re
import time

import browser
import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager, KernelManager
from nbclient import NotebookClient
from package_under_test import PACKAGE_DIR, child_env

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")
KERNEL = "habana-assist-tests"

# Per notebook, one entry per code cell, in order: regexes its text output (stdout, text/plain) must match ("^$":
# it shows nothing), and the rich outputs (mimetypes) it must have.
EXPECTED = {
    "quickstart.ipynb": [
        ([r"^$"], []),
        ([r"LlamaForCausalLM\('.*pycode', .*layers=8\)", r"LlamaForCausalLM\('.*pycode-draft', .*layers=4\)"], []),
        ([r"\.py \(1, \d+\)"], []),
        (
            [
                r"plain +\d+\.\d tokens/s",
                r"assisted +\d+\.\d tokens/s \(\d+\.\d\dx\)",
                r"tokens per target pass: \d+\.\d\d \(\d+ passes for \d+ tokens\)",
                r"identical: True",
            ],
            [],
        ),
        ([r"GenerateDecoderOnlyOutput\(sequences=<int64 \(1, \d+\)>"], ["text/html"]),
        ([r"ACCEPTED +\d+", r"CORRECTED +\d+", r"BONUS +\d+", r"accepted == num_accepted_tokens: True"], []),
        ([r"AcceptanceFigure size 900x320 with 2 Axes"], ["image/png"]),
    ],
    "sampling.ipynb": [
        ([r"^$"], []),
        ([r"^$"], []),
        ([r"the same seed gives the same tokens: True"], []),
        # one table: tokens/s (its format only), tokens per pass, acceptance, same tokens as plain sampling
        (
            [
                r"method +tokens/s +tokens/pass +acceptance +same tokens as plain",
                r"\nplain +\d+\.\d +1\.00 +- +True\n",
                r"\ncoupled +\d+\.\d +\d+\.\d\d +\d+/\d+ \(\d+%\) +True\n",
                r"\nrejection +\d+\.\d +\d+\.\d\d +\d+/\d+ \(\d+%\) +False\n",
            ],
            [],
        ),
        ([r"rejection sampling: 48 new tokens, acceptance \d+/\d+", r"GenerateDecoderOnlyOutput"], ["text/html"]),
    ],
    "streaming.ipynb": [
        ([r"^$"], []),
        ([r"^$"], []),
        # each piece printed as it arrives, then "|"
        ([r"^[^|]+\|[^|]+\|", r"with the draft: \d+ pieces"], []),
        ([r"^[^|]+\|[^|]+\|", r"without the draft: \d+ pieces"], []),
        (
            [
                r"pieces: \d+ with the draft, \d+ without",
                r"fewer, larger pieces with the draft: True",
                r"the streamed text is the generated text: True",
            ],
            [],
        ),
    ],
}


def _text(cell):
    """A cell's stdout and text/plain outputs, joined."""
    parts = []
    for out in cell.outputs:
        if out.output_type == "stream" and out.name == "stdout":
            parts.append(out.text)
        elif "data" in out and "text/plain" in out.data:
            parts.append(out.data["text/plain"])
    return "".join(parts)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """A KernelSpecManager that knows one kernel, KERNEL: this Python running ipykernel."""
    directory = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(str(directory / KERNEL))
    return KernelSpecManager(kernel_dirs=[str(directory)])


@pytest.fixture(scope="module")
def executed(kernels):
    """name -> the notebook executed (once per module, on first asking), outputs in place."""
    done = {}

    def run(name):
        if name not in done:
            nb = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
            km = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=kernels)
            NotebookClient(nb, km=km, timeout=600, resources={"metadata": {"path": EXAMPLES}}).execute(
                cleanup_kc=True, env=child_env()
            )
            done[name] = nb
        return done[name]

    return run


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_and_every_cell_shows_what_it_should(name, executed):
    nb = executed(name)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    assert len(cells) == len(EXPECTED[name]), (
        f"{name} has {len(cells)} code cells; EXPECTED lists {len(EXPECTED[name])}"
    )
    for i, (cell, (patterns, mimetypes)) in enumerate(zip(cells, EXPECTED[name])):
        errors = [o for o in cell.outputs if o.output_type == "error" or getattr(o, "name", "") == "stderr"]
        assert not errors, f"{name} cell {i} wrote an error or to stderr: {errors}"
        text = _text(cell)
        for pattern in patterns:
            assert (text == "") if pattern == "^$" else re.search(pattern, text), (
                f"{name} cell {i}: expected {pattern!r} in its output; it showed:\n{text}"
            )
        shown = {m for o in cell.outputs for m in o.get("data", {})}
        assert set(mimetypes) <= shown, f"{name} cell {i}: expected {mimetypes}; it showed {sorted(shown)}"
    if name == "quickstart.ipynb":  # the view marks as many accepted tokens as the cell after it counted
        html = cells[4].outputs[0].data["text/html"]
        accepted = int(re.search(r"ACCEPTED +(\d+)", _text(cells[5])).group(1))
        assert html.count('class="ha-accepted"') == accepted


VIEWS = sorted(name for name, cells in EXPECTED.items() if any("text/html" in m for _, m in cells))


@pytest.mark.skipif(browser.CHROMIUM is None, reason=browser.SKIP_REASON)
@pytest.mark.parametrize("theme", sorted(browser.THEMES))
@pytest.mark.parametrize("name", VIEWS)
def test_the_notebook_views_are_readable_in_a_browser_in_a_light_and_a_dark_page(name, theme, executed, tmp_path):
    """Every HTML output of the executed notebook, as the notebook shows them one after another, in headless
    chromium (tests/fixtures/browser.py): each element that shows text at WCAG AA contrast, as computed by the
    browser. HA_VIEW_SCREENSHOTS=DIR also writes DIR/NAME-THEME.png of that page (docs/generation.md's pictures)."""
    outputs = [
        o.data["text/html"]
        for c in executed(name).cells
        if c.cell_type == "code"
        for o in c.outputs
        if "text/html" in o.get("data", {})
    ]
    assert outputs, f"{name} showed no HTML"
    body = "\n".join(f'<div class="output">{h}</div>' for h in outputs)
    measured = browser.measure(body, theme, str(tmp_path))
    tokens = [e for e in measured["elements"] if e["cls"] in ("ha-accepted", "ha-corrected", "ha-bonus", "ha-plain")]
    assert len(tokens) >= 10 and len(measured["rows"]) == len(outputs), (len(tokens), len(measured["rows"]))
    bad = browser.unreadable(measured)
    assert not bad, f"{name}, {theme} page: below {browser.AA}:1:\n" + "\n".join(bad)
    if os.environ.get("HA_VIEW_SCREENSHOTS"):
        out = os.path.join(os.environ["HA_VIEW_SCREENSHOTS"], f"{name.split('.')[0]}-{theme}.png")
        browser.screenshot(body, theme, str(tmp_path), os.path.abspath(out), size=(860, 270))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebooks_are_committed_without_outputs(name):
    nb = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{name}: strip the outputs before committing (Kernel > Restart & Clear Output, then save)"
            )


def test_every_notebook_in_examples_is_tested():
    assert sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".ipynb")) == sorted(EXPECTED)


def _run(client, code, timeout=120):
    """Executes code in the kernel -> (reply content, stdout text)."""
    msg_id = client.execute(code)
    out = []
    deadline = time.monotonic() + timeout
    while True:
        msg = client.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    return _reply(client, msg_id, timeout), "".join(out)


def _reply(client, msg_id, timeout):
    """The shell's reply to request msg_id (content), past any other: wait_for_ready asks for kernel_info again
    each second until one reply comes, so a kernel slow to start leaves the others' replies queued."""
    while True:
        msg = client.get_shell_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg["content"]


def test_the_interrupt_button_stops_a_generation_and_the_model_goes_on_exactly(kernels):
    manager = KernelManager(kernel_name=KERNEL, kernel_spec_manager=kernels)
    manager.start_kernel(cwd=EXAMPLES, env=child_env())
    client = manager.client()
    try:
        client.start_channels()
        client.wait_for_ready(timeout=60)
        setup = nbformat.read(os.path.join(EXAMPLES, "quickstart.ipynb"), as_version=4).cells[1].source
        reply, imported = _run(
            client,
            setup
            + """
print(ha.__file__)
tokenizer = ha.AutoTokenizer.from_pretrained("habana-assist/pycode")
model = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode")
draft = ha.AutoModelForCausalLM.from_pretrained("habana-assist/pycode-draft")
inputs = tokenizer(["import os\\n"] * 4, return_tensors="np")
before = model.generate(**inputs, max_new_tokens=16, assistant_model=draft)""",
        )
        assert reply["status"] == "ok", reply
        printed = [os.path.realpath(line) for line in imported.splitlines() if line.endswith("__init__.py")]
        assert printed == [os.path.realpath(os.path.join(PACKAGE_DIR, "__init__.py"))], (
            f"the kernel must import the package under test, {PACKAGE_DIR}; it printed {imported!r}"
        )
        # a long call (4 rows x 1000 tokens, seconds), interrupted once its first token is decided: a stopping
        # criterion (called inside generate()) says so once
        msg_id = client.execute(
            "told = []\n"
            "def tell(input_ids, scores):\n"
            "    if not told:\n"
            "        told.append(print('started', flush=True))\n"
            "    return False\n"
            "model.generate(**inputs, max_new_tokens=1000, assistant_model=draft, progress=False,\n"
            "               stopping_criteria=[tell])\n"
            "print('finished')",
            stop_on_error=False,
        )  # else the kernel aborts a request
        # sent at once after the error as queued behind it (a user's next cell comes later)
        started = False
        while not started:
            msg = client.get_iopub_msg(timeout=60)
            started = (
                msg["parent_header"].get("msg_id") == msg_id
                and msg["msg_type"] == "stream"
                and "started" in msg["content"]["text"]
            )
        manager.interrupt_kernel()
        reply = _reply(client, msg_id, 60)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        assert any("generate" in line for line in reply["traceback"]), "the interrupt must land in generate()"
        reply, text = _run(
            client,
            "after = model.generate(**inputs, max_new_tokens=16, assistant_model=draft)\n"
            "print('same after the interrupt:', (after == before).all())",
        )
        assert reply["status"] == "ok" and "same after the interrupt: True" in text, (reply, text)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
