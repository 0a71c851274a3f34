"""The public API used as a user would, for the type checker (scripts/lint.sh runs mypy over this file, strict:
every function annotated, no call to an unannotated one) and run by test_public_api_annotated.py with the shipped
pair, so that what type-checks here also works.

Each function takes what a user has (a path, a model, a tokenizer) and returns what a user reads from the results,
annotated with the types the package declares; mypy fails if a public signature stops accepting these calls or
stops returning these types."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

import habana_assist as ha


def load(target: str, draft: str) -> tuple[ha.PreTrainedCausalLM, ha.PreTrainedCausalLM, ha.LlamaTokenizer]:
    model = ha.AutoModelForCausalLM.from_pretrained(target, dtype="float32", max_cache_len=256)
    assistant = ha.AutoModelForCausalLM.from_pretrained(draft, max_cache_len=256)
    tokenizer = ha.LlamaTokenizer.from_pretrained(target)  # the class's own from_pretrained gives its type
    auto = ha.AutoTokenizer.from_pretrained(target)
    assert isinstance(auto, ha.LlamaTokenizer), f"expected the shipped pair's LlamaTokenizer, got {type(auto)}"
    return model, assistant, tokenizer


def tokenize(tokenizer: ha.LlamaTokenizer, prompts: list[str]) -> ha.BatchEncoding:
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    batch = tokenizer(prompts, padding=True, return_tensors="np")
    ids: list[int] = tokenizer.encode(prompts[0])
    pieces: list[str] = tokenizer.tokenize(prompts[0])
    assert tokenizer.convert_tokens_to_string(pieces).strip() == prompts[0].strip(), (pieces, prompts[0])
    assert ids[-len(pieces) :] == [tokenizer.convert_tokens_to_ids(p) for p in pieces], (ids, pieces)
    return batch


def generate(
    model: ha.PreTrainedCausalLM,
    assistant: ha.PreTrainedCausalLM,
    tokenizer: ha.LlamaTokenizer,
    batch: ha.BatchEncoding,
) -> list[str]:
    config = ha.GenerationConfig(max_new_tokens=8, do_sample=False)
    config.num_assistant_tokens = 4
    plain = model.generate(**batch, generation_config=config)
    assisted = model.generate(
        batch["input_ids"], attention_mask=batch["attention_mask"], generation_config=config, assistant_model=assistant
    )
    assert isinstance(plain, np.ndarray) and isinstance(assisted, np.ndarray), (type(plain), type(assisted))
    assert (plain == assisted).all(), "assisted greedy generation differs from plain greedy generation"
    out = model.generate(
        batch["input_ids"][:1],
        max_new_tokens=4,
        return_dict_in_generate=True,
        output_scores=True,
        assistant_model=assistant,
        streamer=ha.TextStreamer(tokenizer, skip_prompt=True),
    )
    assert isinstance(out, ha.GenerateDecoderOnlyOutput), type(out)
    scores = model.compute_transition_scores(out.sequences, out.scores or ())
    assert scores.shape == (1, 4), scores.shape
    accepted: int = out.num_accepted_tokens or 0
    assert 0 <= accepted <= 4, accepted
    trees = model.generate(
        batch["input_ids"][:1],
        max_new_tokens=4,
        return_dict_in_generate=True,
        assistant_model=assistant,
        assistant_tree_width=2,
    )
    assert isinstance(trees, ha.GenerateDecoderOnlyOutput) and trees.token_trees is not None, type(trees)
    first: ha.TokenTree = trees.token_trees[0][0]
    path = first.tokens[first.path]
    assert first.num_accepted == len(path) - first.catch_up, (first, path)
    texts: list[str] = tokenizer.batch_decode(plain, skip_special_tokens=True)
    return texts


def forward(model: ha.PreTrainedCausalLM, ids: NDArray[np.int64]) -> NDArray[np.float32]:
    cache = ha.DynamicCache()
    output = model(ids, past_key_values=cache, use_cache=True)
    assert isinstance(output, ha.CausalLMOutput) and output.logits is not None, type(output)
    assert cache.get_seq_length() == ids.shape[1], (cache.get_seq_length(), ids.shape)
    static = model.create_cache(batch_size=ids.shape[0])
    assert isinstance(static, ha.StaticCache) and static.get_max_cache_shape() == model.max_cache_len
    return output.logits


def pipe(target: str, draft: str) -> str:
    generator = ha.pipeline("text-generation", model=target, assistant_model=draft)
    records = generator("def fib(n):", max_new_tokens=4, do_sample=False)
    text: str = records[0]["generated_text"]
    return text


def criteria(tokenizer: ha.LlamaTokenizer, ids: NDArray[np.int64]) -> NDArray[np.bool_]:
    stop = ha.StoppingCriteriaList(
        [ha.MaxLengthCriteria(max_length=ids.shape[1]), ha.StopStringCriteria(tokenizer, ["\n"])]
    )
    processors = ha.LogitsProcessorList()
    scores = processors(ids, np.zeros((ids.shape[0], len(tokenizer)), dtype=np.float32))
    assert scores.shape == (ids.shape[0], len(tokenizer)), scores.shape
    return stop(ids, scores)


def main(target: str = "habana-assist/pycode", draft: str = "habana-assist/pycode-draft") -> list[str]:
    ha.set_seed(0)
    ha.set_num_threads(ha.get_num_threads())
    assert ha.kernels_name(), "expected the kernel variant's name"
    model, assistant, tokenizer = load(target, draft)
    batch = tokenize(tokenizer, ["def add(a, b):", "import os"])
    texts = generate(model, assistant, tokenizer, batch)
    logits = forward(model, np.asarray(batch["input_ids"]))
    assert logits.shape[-1] == model.vocab_size, (logits.shape, model.vocab_size)
    done = criteria(tokenizer, np.asarray(batch["input_ids"]))
    assert done.all(), done  # MaxLengthCriteria(max_length=the prompt's length) ends every row
    texts.append(pipe(target, draft))
    return texts
