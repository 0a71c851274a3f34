"""A small SentencePiece tokenizer, and a complete model + tokenizer checkpoint, for the tokenizer, streamer and
command-line tests.

The tokenizer is trained the way training/train_pair.py trains the shipped one (BPE, byte fallback, text kept
as is, "\\n" a piece of its own, <unk> <s> </s> <pad> = 0 1 2 3), from a few standard-library files, with a
vocabulary of 500: small enough to train in a fraction of a second, large enough to hold real merges. The
trained model is kept per process, so every directory written in one test session holds the same tokenizer.

    write_tokenizer(directory)                       # tokenizer.model, tokenizer_config.json, special_tokens_map.json
    write_checkpoint(directory, seed=0)              # the same, plus config.json + model.safetensors (random Llama)
"""

import io
import json
import os
import string
import textwrap

from checkpoints import write_random_checkpoint

VOCAB_SIZE = 500
UNK_ID, BOS_ID, EOS_ID, PAD_ID = 0, 1, 2, 3
TOKENIZER_CONFIG = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                    "add_bos_token": True, "add_eos_token": False, "padding_side": "left"}
SPECIAL_TOKENS_MAP = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
# A small random Llama: fast enough that a test generates hundreds of tokens in well under a second.
MODEL = dict(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128,
             max_position_embeddings=2048)

_proto = None


def _training_text():
    files = [textwrap.__file__, string.__file__, os.path.join(os.path.dirname(json.__file__), "encoder.py"),
             os.path.join(os.path.dirname(json.__file__), "decoder.py")]
    text = ""
    for path in files:
        with open(path, encoding="utf-8") as f:
            text += f.read()
    return [text[i:i + 2000] for i in range(0, len(text), 2000)]


def tokenizer_proto():
    """-> bytes of the trained SentencePiece model (trained once per process)."""
    global _proto
    if _proto is None:
        import sentencepiece as spm
        writer = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(_training_text()), model_writer=writer, vocab_size=VOCAB_SIZE, model_type="bpe",
            byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
            add_dummy_prefix=False, user_defined_symbols=["\n"], allow_whitespace_only_pieces=True,
            split_digits=True, max_sentence_length=8192, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID, pad_id=PAD_ID,
            num_threads=1, minloglevel=2)
        _proto = writer.getvalue()
    return _proto


def sentencepiece_processor():
    """The trained model as a plain sentencepiece.SentencePieceProcessor (the reference for ids)."""
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_proto=tokenizer_proto())


def write_tokenizer(directory, config=None, special_tokens_map=None):
    """Writes tokenizer.model, tokenizer_config.json and special_tokens_map.json into directory.

    config / special_tokens_map replace the default JSON contents (pass {} for an empty object)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "tokenizer.model"), "wb") as f:
        f.write(tokenizer_proto())
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(TOKENIZER_CONFIG if config is None else config, f, indent=2)
    with open(os.path.join(directory, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump(SPECIAL_TOKENS_MAP if special_tokens_map is None else special_tokens_map, f, indent=2)
    return str(directory)


def write_checkpoint(directory, seed=0, **model_kwargs):
    """A complete checkpoint directory: the tokenizer above and a random LlamaForCausalLM over its vocabulary."""
    write_tokenizer(directory)
    write_random_checkpoint(directory, vocab_size=VOCAB_SIZE, eos_token_id=EOS_ID, bos_token_id=BOS_ID, seed=seed,
                            **{**MODEL, **model_kwargs})
    return str(directory)
