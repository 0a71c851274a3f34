# Transformers docs: internal/generation_utils.md, NoRepeatNGramLogitsProcessor example.
# Changed from the doc: the import line (habana_assist for transformers) and the checkpoint name
# (os.environ["HA_MODEL"]). What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer(["Today I"], return_tensors="pt")

output = model.generate(**inputs)
print(tokenizer.decode(output[0], skip_special_tokens=True))

# Now let's add ngram size using `no_repeat_ngram_size`. This stops the repetitions ("I'm") in the output.
output = model.generate(**inputs, no_repeat_ngram_size=2)
print(tokenizer.decode(output[0], skip_special_tokens=True))


# Checks: no 2-gram occurs twice in the whole sequence (the prompt counts, as in Transformers), while the
# unconstrained greedy output does repeat one.
def repeated_ngrams(tokens, n):
    seen, repeats = set(), []
    for i in range(len(tokens) - n + 1):
        gram = tuple(tokens[i : i + n])
        if gram in seen:
            repeats.append(gram)
        seen.add(gram)
    return repeats


assert repeated_ngrams(output[0].tolist(), 2) == [], repeated_ngrams(output[0].tolist(), 2)
assert repeated_ngrams(model.generate(**inputs)[0].tolist(), 2), "the plain output has no repeat to prevent"
assert output.shape[1] > inputs["input_ids"].shape[1]
