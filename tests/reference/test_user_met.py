"""What users met running scripts written for Transformers (docs/transformers-parity.md, "What users met"), each
beside Transformers itself where it can be (the reference environment: tests/fixtures/hf_reference.py, every job
in one child process through tests/fixtures/hf_usermet_runner.py), on tiny random checkpoints written here:

- copy.deepcopy of a cache (Transformers' prompt-reuse recipe): each request's copy generates Transformers'
  tokens, the prompt's cache stays as it was; copy.copy is, as there, another handle on the same cache;
- config overrides: AutoConfig's return_unused_kwargs answer is Transformers' for every family; from_pretrained's
  keywords and config= set what Transformers sets (logits within the parity tests' tolerance), refuse what it
  refuses, and weights left unused warn, naming Transformers' unexpected keys;
- compute_transition_scores of a batch whose rows end at different steps: Transformers' scores, logits and
  transition scores for the finished rows too (no -inf, no NaN);
- the text-generation pipeline over a list, a generator, a torch Dataset, an empty generator (Transformers' types:
  a list, lazy iterators, an empty list), and what we take beyond it (a tuple, any iterator);
- the model surface torch code touches: training, requires_grad_, half() / float() / bfloat16() / to(dtype).
Offsets and is_fast: tests/reference/test_tokenizers_parity.py.
"""

import copy
import os
import pickle
import types
import warnings

import numpy as np
import pytest
from family_checkpoints import write_family_checkpoint

import habana_assist as ha

RUNNER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "hf_usermet_runner.py")
SHIPPED_DRAFT = os.path.join(os.path.dirname(os.path.abspath(ha.__file__)), "pretrained", "pycode-draft")
TOL = 1e-5  # of the largest |value| compared: test_transformers_parity.py's LOGIT_TOL, for the same reasons
VOCAB = 96
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "smollm3", "gpt2")
PROMPT = [5, 17, 33, 2 + 40, 61, 8]
SUFFIXES = [[70, 71], [12]]
IDS = [[3, 14, 15, 92, 65, 35, 89]]
BATCH = [[0, 0, 11, 23, 45], [7, 19, 31, 43, 55]]  # left-padded, pad id 0
NEW = 8
PROMPTS = ["def fib(n):", "import os"]
PIPELINE_KWARGS = dict(max_new_tokens=3, do_sample=False)
PIPELINE_INPUTS = ("list", "generator", "torch_dataset", "empty_generator", "tuple", "iterator")


def _close(ours, theirs, what):
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, f"{what}: shapes {ours.shape} vs {theirs.shape}"
    finite = np.isfinite(theirs)
    assert np.array_equal(finite, np.isfinite(ours)), f"{what}: -inf / NaN at other places than Transformers'"
    scale = np.abs(theirs[finite]).max() if finite.any() else 1.0
    err = np.abs(ours[finite] - theirs[finite]).max() if finite.any() else 0.0
    assert err <= TOL * scale, f"{what}: differs from Transformers by {err:.3g} (allowed {TOL * scale:.3g})"
    assert np.array_equal(ours[~finite], theirs[~finite]), f"{what}: removed scores differ"


# Each family's keywords for AutoConfig, with a value its Transformers config accepts where it has the attribute.
def _override_values(config):
    own = dict(config)
    head_dim = own.get("head_dim") or own.get("hidden_size", own.get("n_embd", 32)) // own.get(
        "num_attention_heads", own.get("n_head", 4)
    )
    values = dict(
        output_attentions=False,
        output_hidden_states=False,
        return_dict=True,
        use_cache=True,
        num_labels=2,
        rope_theta=10000.0,
        partial_rotary_factor=1.0,
        rope_local_base_freq=10000.0,
        foo_bar=1,
        sliding_window=own.get("sliding_window") or 8,
        head_dim=head_dim,
        attention_bias=False,
        mlp_bias=False,
        sliding_window_pattern=own.get("sliding_window_pattern", 2),
        is_decoder=False,
        tie_word_embeddings=own.get("tie_word_embeddings", False),
        chunk_size_feed_forward=0,
        num_hidden_layers=own.get("num_hidden_layers", own.get("n_layer")),
    )
    if "rope_parameters" in own:
        values["rope_parameters"] = own["rope_parameters"]
    return values


@pytest.fixture(scope="module")
def setup(hf_reference, tmp_path_factory):
    """The checkpoints, what we choose from our own greedy run (the end token of the transition-scores batch), and
    Transformers' results for every job (one child process)."""
    root = tmp_path_factory.mktemp("user_met")
    dirs, configs = {}, {}
    for family in FAMILIES:
        dirs[family] = str(root / family)
        configs[family], _ = write_family_checkpoint(dirs[family], family, vocab_size=VOCAB, seed=3, v5=True, scale=2.0)
    model = ha.AutoModelForCausalLM.from_pretrained(dirs["llama"])
    # an end token that the first row gives early and the second row never (taken from a run whose end token, the
    # pad id, is held off to the last step): the rows end apart
    free = model.generate(
        np.array(BATCH),
        attention_mask=np.array(BATCH) != 0,
        max_new_tokens=NEW,
        min_new_tokens=NEW,
        do_sample=False,
        repetition_penalty=1.3,
        eos_token_id=0,
        pad_token_id=0,
    )
    new = free[:, len(BATCH[0]) :]
    eos = next(int(new[0, j]) for j in range(1, NEW - 3) if new[0, j] not in new[1] and new[0, j] not in new[0, :j])
    scores_kwargs = dict(max_new_tokens=NEW, do_sample=False, repetition_penalty=1.3, eos_token_id=eos, pad_token_id=0)
    llama_cases = [
        dict(num_hidden_layers=1),
        dict(use_cache=False),
        dict(output_hidden_states=True),
        dict(rope_parameters={"rope_type": "default", "rope_theta": 500.0}),
        dict(rope_theta=500.0),
        dict(foo_bar=1),
        dict(output_attentions=True),
    ]
    jobs = {
        "cache": dict(kind="cache_copies", dir=dirs["llama"], prompt=PROMPT, suffixes=SUFFIXES, max_new=NEW),
        "llama_overrides": dict(
            kind="config_overrides",
            dir=dirs["llama"],
            cases=llama_cases,
            input_ids=IDS,
            config_cases=[dict(set=dict(num_hidden_layers=1))],
        ),
        "scores": dict(
            kind="transition_scores",
            dir=dirs["llama"],
            input_ids=BATCH,
            attention_mask=(np.array(BATCH) != 0).astype(int).tolist(),
            kwargs=scores_kwargs,
        ),
        "pipeline": dict(
            kind="pipeline_inputs",
            dir=SHIPPED_DRAFT,
            prompts=PROMPTS,
            kwargs=PIPELINE_KWARGS,
            cases=list(PIPELINE_INPUTS),
        ),
        **{
            ("config", family): dict(
                kind="config_overrides",
                dir=dirs[family],
                models=False,
                cases=[{k: v} for k, v in _override_values(configs[family]).items()],
            )
            for family in FAMILIES
        },
    }
    results = hf_reference.run_file(RUNNER, list(jobs.values()))
    out = dict(zip(jobs, results))
    for key, result in out.items():
        assert "error" not in result, f"Transformers failed the {key} job: {result['error']}"
    return dict(dirs=dirs, configs=configs, hf=out, scores_kwargs=scores_kwargs, eos=eos)


# ---- caches: copy.deepcopy and copy.copy ------------------------------------------------------------------------


def test_deepcopy_of_a_prompt_cache_serves_each_request_as_transformers(setup):
    """Transformers' prompt-reuse recipe: a prompt's cache filled once, then per request generate(prompt + suffix,
    past_key_values=copy.deepcopy(cache)). Each request gives Transformers' tokens (and its own plain output), and
    the prompt's cache keeps its length and keys."""
    hf = setup["hf"]["cache"]
    model = ha.AutoModelForCausalLM.from_pretrained(setup["dirs"]["llama"])
    cache = ha.DynamicCache()
    model(np.array([PROMPT]), past_key_values=cache)
    keys = [k.copy() for k, _ in cache.to_legacy_cache()]
    for suffix, theirs, plain in zip(SUFFIXES, hf["copied"], hf["plain"]):
        ids = np.array([PROMPT + suffix])
        ours = model.generate(ids, past_key_values=copy.deepcopy(cache), max_new_tokens=NEW, do_sample=False)
        assert ours.tolist() == theirs.tolist() == plain.tolist(), (
            f"suffix {suffix}: ours {ours.tolist()}, Transformers {theirs.tolist()} (plain {plain.tolist()})"
        )
    assert hf["original_unchanged"] and cache.get_seq_length() == hf["original_length"] == len(PROMPT)
    assert all(np.array_equal(a, k) for a, (k, _) in zip(keys, cache.to_legacy_cache())), (
        "the prompt's cache changed when its deep copies were extended"
    )


def test_copy_copy_of_a_cache_is_another_handle_as_in_transformers(setup):
    """Transformers' copy.copy shares the cache's layers: generating from the copy extends the original too."""
    hf = setup["hf"]["cache"]
    model = ha.AutoModelForCausalLM.from_pretrained(setup["dirs"]["llama"])
    original = ha.DynamicCache()
    model(np.array([PROMPT]), past_key_values=original)
    shallow = copy.copy(original)
    model.generate(np.array([PROMPT + SUFFIXES[0]]), past_key_values=shallow, max_new_tokens=NEW, do_sample=False)
    assert (original.get_seq_length(), shallow.get_seq_length()) == (
        hf["shallow_original_length"],
        hf["shallow_copy_length"],
    ), "copy.copy: lengths differ from Transformers'"
    assert shallow is not original


def test_deepcopy_of_a_cropped_sliding_window_cache_is_a_clone(tmp_path):
    """A sliding window's ring cropped back after a longer forward (as assisted generation leaves it), deep-copied:
    the copy can be cropped back exactly as far as the original and continues bitwise as it does; a StaticCache and
    a cache not yet bound copy too; pickling refuses, naming what pickles."""
    directory = str(tmp_path / "mistral")
    write_family_checkpoint(directory, "mistral", vocab_size=VOCAB, sliding_window=8, max_position_embeddings=1024)
    model = ha.AutoModelForCausalLM.from_pretrained(directory)
    rng = np.random.default_rng(0)
    ids = rng.integers(3, VOCAB, (1, 420))
    cache = ha.DynamicCache()
    model(ids[:, :400], past_key_values=cache)
    cache.crop(300)  # within the ring's slack: the ring keeps positions up to 399 written
    clone = copy.deepcopy(cache)
    allowed = []
    for keep in (290, 250, 200, 150, 140, 100, 45):  # the same crops, in turn, on both
        allowed.append(_crops(cache, keep))
        assert _crops(clone, keep) == allowed[-1], f"crop({keep}): the clone and the original disagree"
    assert True in allowed and False in allowed, f"a weak test: crops allowed {allowed}"
    kept = cache.get_seq_length()
    a = model(ids[:, kept : kept + 20], past_key_values=cache).logits
    b = model(ids[:, kept : kept + 20], past_key_values=clone).logits
    assert np.array_equal(a, b), "the deep copy continues otherwise than the original"
    static = model.create_cache(batch_size=1, max_cache_len=64)
    model(ids[:, :10], past_key_values=static)
    twin = copy.deepcopy(static)
    assert isinstance(twin, ha.StaticCache) and twin.get_seq_length() == 10 and twin.get_max_cache_shape() == 64
    assert np.array_equal(
        model(ids[:, 10:12], past_key_values=twin).logits, model(ids[:, 10:12], past_key_values=static).logits
    )
    assert copy.deepcopy(ha.DynamicCache()).get_seq_length() == 0
    with pytest.raises(ha.InvalidInputError, match="to_legacy_cache"):
        pickle.dumps(cache)


def _crops(cache, keep):
    try:
        cache.crop(keep)
        return True
    except ha.UnsupportedModelError:
        return False


# ---- config overrides, config=, unused weights -------------------------------------------------------------------

# Attributes whose value the config derives as it is read, where Transformers' setattr after construction keeps the
# value given: Qwen2/Qwen3's sliding_window reads null while use_sliding_window is false (Qwen2Config's own rule at
# construction; the number Transformers keeps is unused by its model too); num_labels sets id2label there.
DERIVED = {("qwen2", "sliding_window"), ("qwen3", "sliding_window")} | {(f, "num_labels") for f in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_autoconfig_return_unused_kwargs_is_transformers(setup, family):
    """AutoConfig.from_pretrained(path, return_unused_kwargs=True, **kwargs) returns as unused exactly what
    Transformers' does (output_attentions and the other attributes every config has are used; rope_theta,
    partial_rotary_factor and rope_local_base_freq are not: Transformers 5 holds them in rope_parameters), and a
    used one sets the attribute to the value given."""
    theirs = setup["hf"][("config", family)]["cases"]
    differ = []
    for (name, value), their in zip(_override_values(setup["configs"][family]).items(), theirs, strict=True):
        assert "config_error" not in their, f"{family} {name}: Transformers refused: {their['config_error']}"
        config, unused = ha.AutoConfig.from_pretrained(
            setup["dirs"][family], return_unused_kwargs=True, **{name: value}
        )
        if sorted(unused) != their["unused"]:
            differ.append(f"{name}: ours {sorted(unused)}, Transformers {their['unused']}")
        elif not unused and (family, name) not in DERIVED:
            assert getattr(config, name) == their["config_values"][name] == value, (
                f"{family} {name}: ours {getattr(config, name)!r}, Transformers {their['config_values'][name]!r}"
            )
    assert not differ, f"{family}: unused keywords differ:\n" + "\n".join(differ)
    with pytest.warns(UserWarning, match="foo_bar"):  # Transformers drops it silently; we say so
        ha.AutoConfig.from_pretrained(setup["dirs"][family], foo_bar=1)


def test_from_pretrained_keywords_set_transformers_attributes_and_refuse_the_rest(setup):
    hf = setup["hf"]["llama_overrides"]
    directory = setup["dirs"]["llama"]
    cases = hf["cases"]
    # num_hidden_layers=1: one layer, Transformers' logits, the second layer's weights named as unused
    with pytest.warns(UserWarning, match=r"not used when initializing.*model\.layers\.1\.mlp\.down_proj\.weight"):
        one = ha.AutoModelForCausalLM.from_pretrained(directory, num_hidden_layers=1)
    assert one.config.num_hidden_layers == cases[0]["num_hidden_layers"] == 1
    _close(one(np.array(IDS)).logits, cases[0]["logits"], "num_hidden_layers=1")
    # use_cache=False, output_hidden_states=True: the config's attribute, and what forward does by default
    for case, name in ((cases[1], "use_cache"), (cases[2], "output_hidden_states")):
        model = ha.AutoModelForCausalLM.from_pretrained(directory, **{name: case["model_values"][name]})
        assert getattr(model.config, name) == case["model_values"][name], name
        _close(model(np.array(IDS)).logits, case["logits"], name)
    assert cases[1]["model_values"]["use_cache"] is False
    hidden = ha.AutoModelForCausalLM.from_pretrained(directory, output_hidden_states=True)(np.array(IDS))
    assert hidden.hidden_states is not None and len(hidden.hidden_states) == 3
    assert hidden.past_key_values is not None
    # rope_parameters: a new rotary base, Transformers' logits
    rope = ha.AutoModelForCausalLM.from_pretrained(
        directory, rope_parameters=cases[3]["model_values"]["rope_parameters"]
    )
    assert rope.config.rope_theta == 500.0
    _close(rope(np.array(IDS)).logits, cases[3]["logits"], "rope_parameters")
    base = ha.AutoModelForCausalLM.from_pretrained(directory)(np.array(IDS)).logits
    assert not np.allclose(base, cases[3]["logits"], atol=1e-3), "the rope override changed nothing: a weak test"
    # rope_theta and an unknown keyword: refused, as Transformers' model constructor refuses them
    for case, kwargs, match in (
        (cases[4], dict(rope_theta=500.0), "rope_parameters"),
        (cases[5], dict(foo_bar=1), "foo_bar"),
    ):
        assert case["model_error"].startswith("TypeError") and "unexpected keyword" in case["model_error"]
        with pytest.raises(ha.InvalidInputError, match=match):
            ha.AutoModelForCausalLM.from_pretrained(directory, **kwargs)
    # output_attentions=True: Transformers would return attention weights; none are computed here (refused)
    assert "model_error" not in cases[6]
    with pytest.raises(ha.InvalidInputError, match="output_attentions"):
        ha.AutoModelForCausalLM.from_pretrained(directory, output_attentions=True)


def test_from_pretrained_config_is_transformers_config_argument(setup):
    """config= replaces config.json (here one layer fewer): Transformers' logits, and a UserWarning that names
    exactly the weights Transformers reports unexpected; a keyword beside config= is refused, as there."""
    theirs = setup["hf"]["llama_overrides"]["config_cases"][0]
    directory = setup["dirs"]["llama"]
    config = ha.AutoConfig.from_pretrained(directory)
    config.num_hidden_layers = 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ha.AutoModelForCausalLM.from_pretrained(directory, config=config)
    unused = [w for w in caught if "were not used" in str(w.message)]
    assert len(unused) == 1 and unused[0].category is UserWarning and unused[0].filename == __file__
    named = str(unused[0].message).split("): ", 1)[1].split(". This IS")[0].split(", ")
    assert sorted(named) == theirs["unexpected_keys"], f"named {named}, Transformers {theirs['unexpected_keys']}"
    assert model.config is not config and model.config.num_hidden_layers == theirs["num_hidden_layers"] == 1
    _close(model(np.array(IDS)).logits, theirs["logits"], "config=")
    assert theirs["with_keywords"].startswith("TypeError")
    with pytest.raises(ha.InvalidInputError, match="config="):
        ha.AutoModelForCausalLM.from_pretrained(directory, config=config, num_hidden_layers=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checkpoint's own config: nothing unused, no warning
        ha.AutoModelForCausalLM.from_pretrained(directory)


# ---- compute_transition_scores of rows that end early -------------------------------------------------------------


def test_transition_scores_of_rows_that_ended_are_transformers(setup):
    """A batch whose first row ends three steps in: Transformers keeps computing it (fed the pad id) and reports
    its real scores and logits there; so do we, and compute_transition_scores (normalized or not) equals
    Transformers' everywhere, with no NaN."""
    hf = setup["hf"]["scores"]
    model = ha.AutoModelForCausalLM.from_pretrained(setup["dirs"]["llama"])
    batch = np.array(BATCH)
    res = model.generate(
        batch,
        attention_mask=batch != 0,
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
        **setup["scores_kwargs"],
    )
    assert res.sequences.tolist() == hf["sequences"].tolist()
    steps = res.sequences.shape[1] - batch.shape[1]
    ended = int(np.argmax(res.sequences[0, batch.shape[1] :] == setup["eos"]))
    assert ended < steps - 2, "the first row must end well before the batch does"
    _close(np.stack(res.scores), hf["scores"], "scores")
    _close(np.stack(res.logits), hf["logits"], "logits")
    for normalize, key in ((True, "transition"), (False, "transition_raw")):
        ours = model.compute_transition_scores(res.sequences, res.scores, normalize_logits=normalize)
        assert np.isfinite(ours).all() and np.isfinite(ours.sum(axis=1)).all(), f"{key}: {ours}"
        _close(ours, hf[key], key)


# ---- pipeline inputs -------------------------------------------------------------------------------------------


def _inputs(kind):
    import torch

    class Dataset(torch.utils.data.Dataset):
        def __len__(self):
            return len(PROMPTS)

        def __getitem__(self, i):
            return PROMPTS[i]

    return {
        "list": lambda: list(PROMPTS),
        "tuple": lambda: tuple(PROMPTS),
        "iterator": lambda: iter(PROMPTS),
        "generator": lambda: (p for p in PROMPTS),
        "torch_dataset": Dataset,
        "empty_generator": lambda: (p for p in []),
    }[kind]()


# where we take what Transformers fails on (a TypeError from its preprocessing): documented in transformers-parity.md
TAKEN_BEYOND = {"tuple": "a list of records", "iterator": "a lazy iterator, as for a generator"}


def test_pipeline_returns_transformers_types_for_lists_generators_and_datasets(setup):
    """A list gives a list; a generator and a torch Dataset a lazy iterator, each element one input's records; an
    empty generator an empty list: as Transformers. A tuple and any iterator are taken here (Transformers fails on
    them); the records are Transformers' (greedy, the shipped draft)."""
    hf = setup["hf"]["pipeline"]["results"]
    pipe = ha.pipeline("text-generation", model=SHIPPED_DRAFT)
    expected = [[{"generated_text": r[0]["generated_text"]}] for r in hf["list"]["records"]]
    for kind in PIPELINE_INPUTS:
        theirs = hf[kind]
        got = pipe(_inputs(kind), **PIPELINE_KWARGS)
        lazy = not isinstance(got, (list, tuple, dict))
        records = list(got)
        if kind in TAKEN_BEYOND:
            assert "error" in theirs and theirs["error"].startswith("TypeError"), f"{kind}: Transformers {theirs}"
            assert lazy == (kind == "iterator") and records == expected, f"{kind}: {type(got)} {records}"
            continue
        assert "error" not in theirs, f"{kind}: Transformers failed: {theirs}"
        assert lazy == theirs["lazy"], (
            f"{kind}: ours {'lazy' if lazy else type(got).__name__}, Transformers {theirs['type']}"
        )
        assert records == theirs["records"], f"{kind}: ours {records}, Transformers {theirs['records']}"


def test_pipeline_over_a_generator_generates_as_it_is_read():
    """Lazy: the call reads the generator's first input only (as Transformers peeks at it); each next() generates
    one batch; a generator of message dicts is one chat."""
    pipe = ha.pipeline("text-generation", model=SHIPPED_DRAFT)
    pulled = []

    def prompts():
        for p in PROMPTS * 2:
            pulled.append(p)
            yield p

    out = pipe(prompts(), batch_size=2, **PIPELINE_KWARGS)
    assert isinstance(out, types.GeneratorType) and len(pulled) == 1, pulled
    first = next(out)
    assert len(pulled) == 2 and first[0]["generated_text"].startswith(PROMPTS[0])
    assert len(list(out)) == 3 and len(pulled) == 4
    with pytest.raises(ha.InvalidInputError, match="input 1 is a int"):
        list(pipe((p for p in [PROMPTS[0], 7]), **PIPELINE_KWARGS))


# ---- the model surface torch code touches ---------------------------------------------------------------------


def test_training_requires_grad_and_dtype_conversions(setup, tmp_path):
    """training is False (inference only); requires_grad_(False) is a no-op and True is refused; half(),
    bfloat16(), float() and to(dtype) convert the weights the model holds, in place, to what
    from_pretrained(path, dtype=...) holds (bitwise the same logits); a no-op in the model's own dtype; refused for
    a quantized model and for float64, naming from_pretrained(..., dtype=...)."""
    directory = setup["dirs"]["llama"]
    model = ha.AutoModelForCausalLM.from_pretrained(directory)
    assert model.training is False and model.eval().training is False
    assert model.requires_grad_(False) is model
    with pytest.raises(ha.InvalidInputError, match="inference"):
        model.requires_grad_()
    ids = np.array(IDS)
    assert model.float() is model and model.to(np.float32) is model
    generation_config = model.generation_config
    for convert, dtype in (
        (lambda m: m.half(), "float16"),
        (lambda m: m.bfloat16(), "bfloat16"),
        (lambda m: m.to("float32"), "float32"),
    ):
        want = ha.AutoModelForCausalLM.from_pretrained(directory, dtype=dtype)(ids).logits
        fresh = ha.AutoModelForCausalLM.from_pretrained(directory)
        assert convert(fresh) is fresh and fresh.weight_dtype == dtype and str(fresh.dtype).endswith(dtype)
        assert np.array_equal(fresh(ids).logits, want), f"{dtype}: logits differ from a load in {dtype}"
    assert model.half().float() is model and model.weight_dtype == "float32"
    assert model.generation_config is generation_config and model.name_or_path == directory
    again = ha.AutoModelForCausalLM.from_pretrained(directory, dtype="float16").float()(ids).logits
    assert np.array_equal(again, model(ids).logits), "half() then float(): the float16 weights, widened"
    quantized = ha.AutoModelForCausalLM.from_pretrained(directory, dtype="int8")
    with pytest.raises(ha.InvalidInputError, match=r"dtype='float16'"):
        quantized.half()
    with pytest.raises(ha.InvalidInputError, match="float64"):
        model.double()
    with pytest.raises(ha.InvalidInputError, match="CPU only"):
        model.to("cuda")
