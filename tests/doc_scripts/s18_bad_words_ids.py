# Transformers docs: internal/generation_utils.md, NoBadWordsLogitsProcessor example.
# Changed from the doc: the import line (habana_assist for transformers), the checkpoint name
# (os.environ["HA_MODEL"]) and the banned word, "list" for "mess" (a word this code model writes here).
# What follows "# Checks" is ours: the documented properties.
import os

from habana_assist import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained(os.environ["HA_MODEL"])
tokenizer = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"])
inputs = tokenizer(["In a word, the cake is a"], return_tensors="pt")

output_ids = model.generate(inputs["input_ids"], max_new_tokens=5, pad_token_id=tokenizer.eos_token_id)
print(tokenizer.batch_decode(output_ids, skip_special_tokens=True)[0])

# Now let's take the bad words out. Please note that the tokenizer is initialized differently
tokenizer_with_prefix_space = AutoTokenizer.from_pretrained(os.environ["HA_MODEL"], add_prefix_space=True)


def get_tokens_as_list(word_list):
    "Converts a sequence of words into a list of tokens"
    tokens_list = []
    for word in word_list:
        tokenized_word = tokenizer_with_prefix_space([word], add_special_tokens=False).input_ids[0]
        tokens_list.append(tokenized_word)
    return tokens_list


bad_words_ids = get_tokens_as_list(word_list=["list"])
output_ids_banned = model.generate(
    inputs["input_ids"], max_new_tokens=5, bad_words_ids=bad_words_ids, pad_token_id=tokenizer.eos_token_id
)
print(tokenizer.batch_decode(output_ids_banned, skip_special_tokens=True)[0])

# Checks: the prefix-space tokenizer gives the token the model writes (" list"); without the ban the greedy
# output contains it, with the ban it never appears; the banned output is 5 new tokens.
prompt_len = inputs["input_ids"].shape[1]
assert bad_words_ids == [tokenizer([" list"], add_special_tokens=False).input_ids[0]], bad_words_ids
bad = bad_words_ids[0]
plain_new = output_ids[0, prompt_len:].tolist()
banned_new = output_ids_banned[0, prompt_len:].tolist()
assert len(bad) == 1 and bad[0] in plain_new, (bad, plain_new)
assert bad[0] not in banned_new, (bad, banned_new)
assert len(banned_new) == 5 or banned_new[-1] == tokenizer.eos_token_id
