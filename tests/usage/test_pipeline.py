"""pipeline("text-generation", ...) and TextGenerationPipeline: Transformers' pipeline semantics over generate().

Every output is compared with the tokenizer + generate() + decode calls that Transformers' pipeline stands for,
computed here: the new text is decode(sequence)[len(decode(prompt)):] (skip_special_tokens=True,
clean_up_tokenization_spaces the tokenizer's own), after the prompt as given (return_full_text=True) or alone. Most
tests use a tiny random Llama with a small SentencePiece tokenizer (tests/fixtures/tokenizer_fixture.py) and a second
one as its draft; a few use the shipped pair.
"""

import json
import os
import warnings

import numpy as np
import pytest
from tokenizer_fixture import TOKENIZER_CONFIG, write_checkpoint, write_tokenizer

import habana_assist as ha
from habana_assist.errors import CacheCapacityError, InvalidInputError
from habana_assist.pipelines import TextGenerationPipeline, pipeline

# A template in the usual shape: one block per message, an assistant header as the generation prompt.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
PROMPTS = ["def add(a, b):", "import os\nimport sys\n\nclass Stack:\n    def push(self, x):", "x = 1"]
CHAT = [{"role": "system", "content": "You write Python."}, {"role": "user", "content": "def square(x):"}]
GREEDY = dict(max_new_tokens=12, do_sample=False)


@pytest.fixture(scope="module")
def target_dir(tmp_path_factory):
    directory = write_checkpoint(str(tmp_path_factory.mktemp("target")), seed=0)
    write_tokenizer(directory, config={**TOKENIZER_CONFIG, "chat_template": CHAT_TEMPLATE})
    return directory


@pytest.fixture(scope="module")
def draft_dir(tmp_path_factory):
    return write_checkpoint(str(tmp_path_factory.mktemp("draft")), seed=1, num_layers=1)


@pytest.fixture(scope="module")
def model(target_dir):
    return ha.AutoModelForCausalLM.from_pretrained(target_dir)


@pytest.fixture(scope="module")
def tok(target_dir):
    return ha.AutoTokenizer.from_pretrained(target_dir)


@pytest.fixture(scope="module")
def pipe(model, tok):
    return pipeline("text-generation", model=model, tokenizer=tok)


def new_texts(model, tok, enc, clean=None, skip=True, **gen):
    """What the pipeline stands for: generate() on enc's prompt, each row decoded with the prompt's text cut off
    -> (new texts, sequences)."""
    sequences = model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], **gen)
    prompt_length = len(tok.decode(enc["input_ids"][0], skip_special_tokens=skip, clean_up_tokenization_spaces=clean))
    texts = [
        tok.decode(row, skip_special_tokens=skip, clean_up_tokenization_spaces=clean)[prompt_length:]
        for row in sequences
    ]
    return texts, sequences


def expected_text(model, tok, prompt, **gen):
    """The record of a str prompt, return_full_text=True: the prompt as given, then the new text."""
    texts, _ = new_texts(model, tok, tok(prompt, return_tensors="np"), **gen)
    return [{"generated_text": prompt + t} for t in texts]


def expected_chat(model, tok, messages, continue_final_message=False, **gen):
    enc = tok.apply_chat_template(
        messages,
        add_generation_prompt=not continue_final_message,
        continue_final_message=continue_final_message,
        return_dict=True,
        return_tensors="np",
    )
    texts, _ = new_texts(model, tok, enc, **gen)
    if continue_final_message:
        return [
            {"generated_text": messages[:-1] + [{"role": messages[-1]["role"], "content": messages[-1]["content"] + t}]}
            for t in texts
        ]
    return [{"generated_text": messages + [{"role": "assistant", "content": t}]} for t in texts]


# ---- inputs and outputs ------------------------------------------------------------------------------------


def test_a_string_gives_the_prompt_and_the_decoded_generation(pipe, model, tok):
    got = pipe(PROMPTS[0], **GREEDY)
    want = expected_text(model, tok, PROMPTS[0], **GREEDY)
    assert got == want, f"expected {want}, got {got}"


def test_a_list_of_strings_gives_a_list_of_each_strings_records(pipe, model, tok):
    got = pipe(PROMPTS, **GREEDY)
    want = [expected_text(model, tok, p, **GREEDY) for p in PROMPTS]
    assert got == want, f"expected {want}, got {got}"
    assert pipe(tuple(PROMPTS), **GREEDY) == want
    assert pipe([]) == []


def test_a_generator_of_prompts_gives_a_lazy_iterator_of_the_list_records(pipe):
    """As Transformers' PipelineIterator: each input's records as it is read (tests/reference/test_user_met.py)."""
    got = pipe((p for p in PROMPTS[:2]), **GREEDY)
    assert not isinstance(got, list) and list(got) == pipe(PROMPTS[:2], **GREEDY)


def test_a_chat_gets_the_assistant_reply_appended(pipe, model, tok):
    got = pipe(CHAT, **GREEDY)
    want = expected_chat(model, tok, CHAT, **GREEDY)
    assert got == want, f"expected {want}, got {got}"
    assert got[0]["generated_text"][-1]["role"] == "assistant"


def test_a_chat_ending_with_the_assistant_continues_that_message(pipe, model, tok):
    chat = CHAT + [{"role": "assistant", "content": "def square(x):\n    return"}]
    got = pipe(chat, **GREEDY)
    want = expected_chat(model, tok, chat, continue_final_message=True, **GREEDY)
    assert got == want, f"expected {want}, got {got}"
    assert len(got[0]["generated_text"]) == len(chat)
    # continue_final_message=False starts a new assistant message after it instead
    assert pipe(chat, continue_final_message=False, **GREEDY) == expected_chat(model, tok, chat, **GREEDY)


def test_a_list_of_chats_and_return_full_text_false(pipe, model, tok):
    chats = [CHAT, [{"role": "user", "content": "import os"}]]
    got = pipe(chats, **GREEDY)
    assert got == [expected_chat(model, tok, c, **GREEDY) for c in chats]
    new_only = pipe(chats, return_full_text=False, **GREEDY)
    assert new_only == [[{"generated_text": r[0]["generated_text"][-1]["content"]}] for r in got]


def test_return_full_text_false_gives_the_new_text_only(pipe, model, tok):
    got = pipe(PROMPTS[1], return_full_text=False, **GREEDY)
    texts, _ = new_texts(model, tok, tok(PROMPTS[1], return_tensors="np"), **GREEDY)
    assert got == [{"generated_text": texts[0]}], f"expected {texts}, got {got}"


def test_return_tensors_gives_the_whole_sequence_ids(pipe, model, tok):
    got = pipe(PROMPTS[0], return_tensors=True, **GREEDY)
    _, sequences = new_texts(model, tok, tok(PROMPTS[0], return_tensors="np"), **GREEDY)
    assert got == [{"generated_token_ids": sequences[0].tolist()}]
    assert all(type(i) is int for i in got[0]["generated_token_ids"])


def test_decoding_options_reach_decode(pipe, model, tok):
    prompt = "x = [1 , 2 ] ; y = f ( x ) ."
    for clean in (True, False):
        texts, _ = new_texts(model, tok, tok(prompt, return_tensors="np"), clean=clean, **GREEDY)
        got = pipe(prompt, return_full_text=False, clean_up_tokenization_spaces=clean, **GREEDY)
        assert got == [{"generated_text": texts[0]}], f"clean_up_tokenization_spaces={clean}: {got} != {texts}"
    # unless passed, the tokenizer's own setting (Transformers 5), not True (Transformers 4's pipeline)
    texts, _ = new_texts(model, tok, tok(prompt, return_tensors="np"), clean=tok.clean_up_tokenization_spaces, **GREEDY)
    got = pipe(prompt, return_full_text=False, **GREEDY)
    assert got == [{"generated_text": texts[0]}], f"the default clean-up: {got} != {texts}"
    texts, _ = new_texts(model, tok, tok(prompt, return_tensors="np"), skip=False, **GREEDY)
    assert pipe(prompt, return_full_text=False, skip_special_tokens=False, **GREEDY) == [{"generated_text": texts[0]}]


def test_add_special_tokens_false_reaches_the_tokenizer(pipe, model, tok):
    enc = tok(PROMPTS[0], add_special_tokens=False, return_tensors="np")
    assert enc["input_ids"][0, 0] != tok.bos_token_id
    texts, _ = new_texts(model, tok, enc, **GREEDY)
    assert pipe(PROMPTS[0], add_special_tokens=False, **GREEDY) == [{"generated_text": PROMPTS[0] + texts[0]}]


def test_return_dict_in_generate_adds_each_rows_scores(pipe, model, tok):
    got = pipe(PROMPTS[0], return_dict_in_generate=True, output_scores=True, **GREEDY)
    enc = tok(PROMPTS[0], return_tensors="np")
    res = model.generate(**enc, return_dict_in_generate=True, output_scores=True, **GREEDY)
    assert np.array_equal(np.array(got[0]["scores"]), np.stack(res.scores, axis=1)[0])
    assert got[0]["token_sources"] == res.token_sources[0].tolist()


# ---- generation arguments ----------------------------------------------------------------------------------


def test_sampled_return_sequences_equal_generate_with_the_same_seed(pipe, model, tok):
    gen = dict(max_new_tokens=10, do_sample=True, num_return_sequences=3, seed=7)
    got = pipe(PROMPTS[0], **gen)
    # the pipeline's default temperature (0.7) is part of what it stands for
    want = expected_text(model, tok, PROMPTS[0], temperature=0.7, **gen)
    assert got == want, f"expected {want}, got {got}"
    assert len({r["generated_text"] for r in got}) > 1, "three samples all alike: num_return_sequences lost?"


def test_set_seed_makes_a_sampled_call_repeat(pipe, model, tok):
    ha.set_seed(3)
    first = pipe(PROMPTS[2], max_new_tokens=10)
    ha.set_seed(3)
    assert pipe(PROMPTS[2], max_new_tokens=10) == first
    ha.set_seed(3)
    assert first == expected_text(model, tok, PROMPTS[2], max_new_tokens=10, do_sample=True, temperature=0.7)


def test_batch_size_pads_left_and_changes_no_output(model, tok):
    prompts = PROMPTS + ["def f(", "while True:\n    break\n"]
    one = pipeline("text-generation", model=model, tokenizer=tok)(prompts, **GREEDY)
    for batch_size in (2, 5):
        got = pipeline("text-generation", model=model, tokenizer=tok, batch_size=batch_size)(prompts, **GREEDY)
        assert got == one, f"batch_size={batch_size} changed the outputs: {got} != {one}"
    assert pipeline("text-generation", model=model, tokenizer=tok)(prompts, batch_size=3, **GREEDY) == one
    # the ids too: each prompt's own, without the batch's left padding (only rows that ended early are padded
    # on the right, to the batch's longest, as generate() pads them)
    p = pipeline("text-generation", model=model, tokenizer=tok)
    batched = p(prompts, batch_size=5, return_tensors=True, **GREEDY)
    for prompt, got in zip(prompts, batched):
        alone = p(prompt, return_tensors=True, **GREEDY)[0]["generated_token_ids"]
        ids = got[0]["generated_token_ids"]
        assert ids[: len(alone)] == alone and set(ids[len(alone) :]) <= {tok.pad_token_id}, f"{ids} vs {alone}"


def test_the_tokenizer_pads_on_the_left_as_transformers_sets_it(model, target_dir):
    tok = ha.AutoTokenizer.from_pretrained(target_dir, padding_side="right")
    pipeline("text-generation", model=model, tokenizer=tok)
    assert tok.padding_side == "left"


def test_batch_size_needs_a_pad_token(model, target_dir):
    tok = ha.AutoTokenizer.from_pretrained(target_dir)
    tok.pad_token = None
    with pytest.raises(InvalidInputError, match="without pad_token cannot do batching"):
        pipeline("text-generation", model=model, tokenizer=tok)(PROMPTS, batch_size=2, **GREEDY)


def test_prefix_is_prepended_and_cut_from_the_text(pipe, model, tok):
    prefix = "# utilities\n"
    texts, _ = new_texts(model, tok, tok(prefix + PROMPTS[0], return_tensors="np"), **GREEDY)
    assert pipe(PROMPTS[0], prefix=prefix, **GREEDY) == [{"generated_text": PROMPTS[0] + texts[0]}]
    assert pipe(PROMPTS[0], prefix=prefix, return_full_text=False, **GREEDY) == [{"generated_text": texts[0]}]
    prefixed = pipeline("text-generation", model=model, tokenizer=tok, prefix=prefix)
    assert prefixed(PROMPTS[0], **GREEDY) == [{"generated_text": PROMPTS[0] + texts[0]}]


def test_stop_sequence_becomes_eos_token_id(pipe, model, tok):
    stop = "\n"
    ids = tok.encode(stop, add_special_tokens=False)
    texts, _ = new_texts(model, tok, tok(PROMPTS[1], return_tensors="np"), eos_token_id=ids, **GREEDY)
    assert pipe(PROMPTS[1], stop_sequence=stop, return_full_text=False, **GREEDY) == [{"generated_text": texts[0]}]


def test_stop_strings_work_without_passing_the_tokenizer(pipe, model, tok):
    enc = tok(PROMPTS[1], return_tensors="np")
    texts, _ = new_texts(model, tok, enc, stop_strings=["e"], tokenizer=tok, **GREEDY)
    assert pipe(PROMPTS[1], stop_strings=["e"], return_full_text=False, **GREEDY) == [{"generated_text": texts[0]}]


def test_generation_config_passes_through(pipe, model, tok):
    config = ha.GenerationConfig(max_new_tokens=5, do_sample=False, repetition_penalty=1.3)
    want = expected_text(model, tok, PROMPTS[2], generation_config=config)
    assert pipe(PROMPTS[2], generation_config=config) == want


def test_arguments_given_at_construction_are_the_calls_defaults(model, tok):
    p = pipeline(
        "text-generation", model=model, tokenizer=tok, max_new_tokens=6, do_sample=False, return_full_text=False
    )
    texts, _ = new_texts(model, tok, tok(PROMPTS[0], return_tensors="np"), max_new_tokens=6, do_sample=False)
    assert p(PROMPTS[0]) == [{"generated_text": texts[0]}]
    assert p.generation_config.max_new_tokens == 6 and model.generation_config.max_new_tokens is None
    texts, _ = new_texts(model, tok, tok(PROMPTS[0], return_tensors="np"), max_new_tokens=3, do_sample=False)
    assert p(PROMPTS[0], max_new_tokens=3) == [{"generated_text": texts[0]}]  # a call's argument wins


def test_the_pipelines_generation_defaults_are_transformers(model, tok):
    """TextGenerationPipeline._default_generation_config: max_new_tokens=256, do_sample=True, temperature=0.7,
    where the model's generation_config.json does not set the key; pad_token_id from the tokenizer."""
    gc = pipeline("text-generation", model=model, tokenizer=tok).generation_config
    assert (gc.max_new_tokens, gc.do_sample, gc.temperature, gc.pad_token_id) == (256, True, 0.7, tok.pad_token_id)
    shipped = pipeline("text-generation", model="habana-assist/pycode").generation_config
    assert shipped.max_new_tokens == 128, "the shipped model's generation_config.json sets max_new_tokens=128"
    assert (
        pipeline("text-generation", model=model, tokenizer=tok, max_length=40).generation_config.max_new_tokens is None
    ), "a max_length set on purpose is honoured in place of the default max_new_tokens"


def test_a_max_length_the_user_sets_decides_the_length(model, tok):
    _, sequences = new_texts(model, tok, tok(PROMPTS[0], return_tensors="np"), max_length=15, do_sample=False)
    want = [{"generated_token_ids": sequences[0].tolist()}]
    assert (
        pipeline("text-generation", model=model, tokenizer=tok)(
            PROMPTS[0], max_length=15, do_sample=False, return_tensors=True
        )
        == want
    )
    assert (
        pipeline("text-generation", model=model, tokenizer=tok, max_length=15, do_sample=False)(
            PROMPTS[0], return_tensors=True
        )
        == want
    )


def test_a_checkpoints_prefix_and_task_specific_params_apply(tmp_path, tok):
    """model.config.prefix is every str prompt's prefix; task_specific_params["text-generation"] (GPT-2's
    config.json has one) are generation defaults, below the user's arguments."""
    directory = write_checkpoint(str(tmp_path), seed=0)
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    config["task_specific_params"] = {
        "text-generation": {"do_sample": False, "max_new_tokens": 7, "prefix": "# tools\n"}
    }
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f)
    p = pipeline("text-generation", model=directory)
    assert p.prefix == "# tools\n" and p.generation_config.max_new_tokens == 7
    texts, _ = new_texts(
        p.model, tok, tok("# tools\n" + PROMPTS[0], return_tensors="np"), max_new_tokens=7, do_sample=False
    )
    assert p(PROMPTS[0]) == [{"generated_text": PROMPTS[0] + texts[0]}]
    assert pipeline("text-generation", model=directory, max_new_tokens=3).generation_config.max_new_tokens == 3
    texts, _ = new_texts(p.model, tok, tok(PROMPTS[0], return_tensors="np"), max_new_tokens=7, do_sample=False)
    assert p(PROMPTS[0], prefix="") == [{"generated_text": PROMPTS[0] + texts[0]}], "prefix='' turns it off"


def test_a_config_name_is_where_the_tokenizer_comes_from(model, tok, target_dir):
    p = pipeline("text-generation", model=model, config=target_dir)
    assert p.tokenizer.get_vocab() == tok.get_vocab()


def test_a_greedy_call_does_not_warn_about_the_default_temperature(pipe):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe(PROMPTS[0], **GREEDY)
        pipeline("text-generation", model=pipe.model, tokenizer=pipe.tokenizer, do_sample=False)


def test_handle_long_generation_hole_keeps_the_prompts_end(target_dir, tok):
    p = pipeline("text-generation", model=target_dir, model_kwargs={"max_cache_len": 40})
    assert p.model.max_cache_len == 40, "model_kwargs did not reach from_pretrained"
    prompt = " ".join(f"v{i} = {i}" for i in range(30))
    enc = tok(prompt, return_tensors="np")
    assert enc["input_ids"].shape[1] + 8 > 40
    with pytest.raises(CacheCapacityError):
        p(prompt, max_new_tokens=8, do_sample=False)
    got = p(prompt, handle_long_generation="hole", max_new_tokens=8, do_sample=False, return_full_text=False)
    kept = {k: v[:, -32:] for k, v in enc.items()}
    texts, _ = new_texts(p.model, tok, kept, max_new_tokens=8, do_sample=False)
    assert got == [{"generated_text": texts[0]}]


# ---- loading -----------------------------------------------------------------------------------------------


def test_names_load_the_model_and_the_tokenizer(target_dir, model, tok):
    p = pipeline("text-generation", model=target_dir)
    assert isinstance(p, TextGenerationPipeline) and isinstance(p, ha.TextGenerationPipeline)
    assert p.model.name_or_path == model.name_or_path and p.tokenizer.get_vocab() == tok.get_vocab()
    assert p(PROMPTS[0], **GREEDY) == expected_text(model, tok, PROMPTS[0], **GREEDY)
    inferred = pipeline(model=target_dir, tokenizer=target_dir, trust_remote_code=False)
    assert inferred.task == "text-generation", "task=None is inferred as the only task"
    assert pipeline("text-generation", model=model, tokenizer=target_dir)(PROMPTS[0], **GREEDY) == expected_text(
        model, tok, PROMPTS[0], **GREEDY
    )


def test_dtype_reaches_from_pretrained(target_dir):
    torch = pytest.importorskip("torch")
    assert pipeline("text-generation", model=target_dir).model.dtype == torch.float32  # "auto": as stored
    assert pipeline("text-generation", model=target_dir, dtype="bfloat16").model.dtype == torch.bfloat16
    assert pipeline("text-generation", model=target_dir, torch_dtype=torch.float16).model.dtype == torch.float16
    assert pipeline("text-generation", model=target_dir, model_kwargs={"dtype": "int8"}).model.weight_dtype == "int8"
    with pytest.raises(InvalidInputError, match="both"):
        pipeline("text-generation", model=target_dir, dtype="bfloat16", model_kwargs={"dtype": "float16"})


@pytest.mark.parametrize("device", [None, "cpu", -1, "auto", "torch-cpu"])
def test_the_cpu_is_accepted_as_device_and_device_map(model, tok, device):
    if device == "torch-cpu":
        device = pytest.importorskip("torch").device("cpu")
    assert pipeline("text-generation", model=model, tokenizer=tok, device=device) is not None
    assert pipeline("text-generation", model=model, tokenizer=tok, device_map=device if device != -1 else "cpu")


# ---- assisted generation -----------------------------------------------------------------------------------


def spy_on_generate(model):
    """Records the keyword arguments of each model.generate call (the instance's, for this test only)."""
    calls = []
    original = model.generate

    def generate(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    model.generate = generate
    return calls


def test_assistant_model_as_a_name_or_a_model_gives_the_plain_output(target_dir, draft_dir, tok):
    model = ha.AutoModelForCausalLM.from_pretrained(target_dir)
    plain = pipeline("text-generation", model=model, tokenizer=tok)(PROMPTS, **GREEDY)
    draft = ha.AutoModelForCausalLM.from_pretrained(draft_dir)
    for assistant in (draft_dir, draft):
        p = pipeline("text-generation", model=model, tokenizer=tok, assistant_model=assistant)
        assert isinstance(p.assistant_model, ha.PreTrainedCausalLM) and p.assistant_tokenizer is None
        calls = spy_on_generate(model)
        try:
            got = p(PROMPTS, **GREEDY)
        finally:
            del model.generate
        assert got == plain, f"assisted greedy output differs from plain: {got} != {plain}"
        assert calls and all(c["assistant_model"] is p.assistant_model for c in calls), (
            "the draft never reached generate()"
        )
    # a model given to one call drafts for that call
    assert (
        pipeline("text-generation", model=model, tokenizer=tok)(PROMPTS[0], assistant_model=draft, **GREEDY) == plain[0]
    )


def test_shipped_pair_assisted_pipeline_equals_plain():
    plain = pipeline("text-generation", model="habana-assist/pycode")
    assisted = pipeline("text-generation", model="habana-assist/pycode", assistant_model="habana-assist/pycode-draft")
    assert assisted.assistant_model.weight_dtype == plain.model.weight_dtype, "a named assistant: the model's dtype"
    prompts = ["def fib(n):", "class Stack:\n    def __init__(self):"]
    got = assisted(prompts, max_new_tokens=16, do_sample=False, batch_size=2)
    assert got == plain(prompts, max_new_tokens=16, do_sample=False)
    tok = plain.tokenizer
    assert got[0] == expected_text(plain.model, tok, prompts[0], max_new_tokens=16, do_sample=False)


def test_a_draft_with_another_tokenizer_gets_both_tokenizers(target_dir, tok):
    model = ha.AutoModelForCausalLM.from_pretrained(target_dir)
    shipped_draft = "habana-assist/pycode-draft"  # a vocabulary of 4096, the tiny model's is 500
    with pytest.raises(InvalidInputError, match="assistant_tokenizer"):
        TextGenerationPipeline(
            model=model, tokenizer=tok, assistant_model=ha.AutoModelForCausalLM.from_pretrained(shipped_draft)
        )
    p = pipeline("text-generation", model=model, tokenizer=tok, assistant_model=shipped_draft)
    assert p.assistant_tokenizer is not None, "a named assistant brings its own tokenizer"
    calls = spy_on_generate(model)
    try:
        got = p(PROMPTS[0], max_new_tokens=6, do_sample=False)
    finally:
        del model.generate
    assert calls[0]["tokenizer"] is tok and calls[0]["assistant_tokenizer"] is p.assistant_tokenizer
    assert got == expected_text(model, tok, PROMPTS[0], max_new_tokens=6, do_sample=False)


# ---- refusals ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["summarization", "text2text-generation", "fill-mask", ""])
def test_another_task_is_refused(model, tok, task):
    with pytest.raises(InvalidInputError, match="only 'text-generation'"):
        pipeline(task, model=model, tokenizer=tok)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", 0, 1, "mps", True])
def test_a_device_other_than_the_cpu_is_refused(model, tok, device):
    with pytest.raises(InvalidInputError, match="CPU"):
        pipeline("text-generation", model=model, tokenizer=tok, device=device)
    with pytest.raises(InvalidInputError, match="CPU"):
        pipeline("text-generation", model=model, tokenizer=tok, device_map=device)


def test_a_cuda_torch_device_is_refused(model, tok):
    torch = pytest.importorskip("torch")
    with pytest.raises(InvalidInputError, match="CPU"):
        pipeline("text-generation", model=model, tokenizer=tok, device=torch.device("cuda", 0))
    with pytest.raises(InvalidInputError, match="CPU"):
        pipeline("text-generation", model=model, tokenizer=tok, device_map={"": "cuda:0"})


def test_an_unknown_handle_long_generation_is_refused(pipe):
    with pytest.raises(InvalidInputError, match=r"\[None, 'hole'\]"):
        pipe(PROMPTS[0], handle_long_generation="chunk")


def test_unknown_arguments_are_refused_by_name(model, tok, pipe):
    with pytest.raises(InvalidInputError, match="max_new_token:"):
        pipeline("text-generation", model=model, tokenizer=tok, max_new_token=5)
    with pytest.raises(InvalidInputError, match="tempreature"):
        pipe(PROMPTS[0], tempreature=0.5)
    with pytest.raises(InvalidInputError, match="positional"):
        pipe(PROMPTS[0], 12)
    with pytest.raises(InvalidInputError, match="num_beams"):
        pipe(PROMPTS[0], num_beams=4)  # generate()'s own refusal, reached through the pipeline


def test_a_model_object_without_a_tokenizer_is_refused(model):
    with pytest.raises(InvalidInputError, match="Impossible to guess which tokenizer"):
        pipeline("text-generation", model=model)
    with pytest.raises(InvalidInputError, match="needs a tokenizer"):
        TextGenerationPipeline(model=model)


def test_other_misuses_are_refused(model, tok, pipe):
    with pytest.raises(InvalidInputError, match="needs a task or a model"):
        pipeline()
    with pytest.raises(InvalidInputError, match="needs model="):
        pipeline("text-generation")
    with pytest.raises(InvalidInputError, match="already loaded"):
        pipeline("text-generation", model=model, tokenizer=tok, dtype="bfloat16")
    with pytest.raises(InvalidInputError, match="mutually exclusive"):
        pipe(PROMPTS[0], return_full_text=False, return_tensors=True)
    with pytest.raises(InvalidInputError, match="chats only"):
        pipe(PROMPTS[0], continue_final_message=True)
    with pytest.raises(InvalidInputError, match="'role' and 'content'"):
        pipe([{"role": "user"}])
    with pytest.raises(InvalidInputError, match="each input must be"):
        pipe(["ok", 3])
    with pytest.raises(InvalidInputError, match="assistant_model"):
        pipeline("text-generation", model=model, tokenizer=tok, assistant_tokenizer=tok)
    with pytest.raises(InvalidInputError, match="feature_extractor"):
        pipeline("text-generation", model=model, tokenizer=tok, feature_extractor="x")
    with pytest.raises(InvalidInputError, match="video_processor"):
        pipeline("text-generation", model=model, tokenizer=tok, video_processor="x")
    assert pipeline("text-generation", model=model, tokenizer=tok, video_processor=None).model is model


def test_names_and_exports():
    import habana_assist.pipelines as pipelines

    assert ha.pipeline is pipelines.pipeline is pipeline
    assert ha.TextGenerationPipeline is pipelines.TextGenerationPipeline
    assert "pipeline" in ha.__all__ and "TextGenerationPipeline" in ha.__all__
    assert pipelines.get_supported_tasks() == ["text-generation"]
