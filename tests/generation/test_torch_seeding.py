"""Seeding as Transformers users do it: a sampled generate() call without seed= takes its seed from torch's
default generator (torch.randint(0, 2**63 - 1, (1,))), so torch.manual_seed(s) before a call repeats it and
successive calls differ; seed= wins and leaves torch's generator alone; greedy calls draw nothing; assisted sampling
follows the same rule (coupled: the plain call's tokens for the same torch seed); ha.set_seed seeds torch too, as
transformers.set_seed; without torch, set_seed's own generator as before (generation/utils.py, call_seed)."""

import sys

import numpy as np
import pytest
import torch
from family_checkpoints import write_family_checkpoint

import habana_assist as ha

PROMPT = np.array([[5, 9, 33, 2, 71, 14]])
SAMPLED = dict(do_sample=True, temperature=2.0, top_k=None, max_new_tokens=12)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("seeding")
    write_family_checkpoint(str(root / "target"), "llama", seed=3)
    write_family_checkpoint(str(root / "draft"), "llama", seed=3, perturb=(1, 0.3))
    return (
        ha.AutoModelForCausalLM.from_pretrained(str(root / "target")),
        ha.AutoModelForCausalLM.from_pretrained(str(root / "draft")),
    )


def tokens(out):
    return out[0, PROMPT.shape[1] :].tolist()


def drawn(seed):
    """The seed a sampled call draws after torch.manual_seed(seed)."""
    torch.manual_seed(seed)
    return int(torch.randint(0, 2**63 - 1, (1,)).item())


def test_torch_manual_seed_repeats_a_sampled_call_and_successive_calls_differ(models):
    model, _ = models
    torch.manual_seed(0)
    first = [tokens(model.generate(PROMPT, **SAMPLED)) for _ in range(3)]
    torch.manual_seed(0)
    again = [tokens(model.generate(PROMPT, **SAMPLED)) for _ in range(3)]
    assert again == first, f"torch.manual_seed(0) then three sampled calls, twice: {first} then {again}"
    assert len({tuple(t) for t in first}) == 3, f"successive calls without reseeding gave equal outputs: {first}"


def test_the_seed_is_one_draw_from_torchs_default_generator(models):
    """The call's seed is torch.randint(0, 2**63 - 1, (1,)): seed= with that value gives the same tokens, and the
    generator moves on by exactly that draw."""
    model, _ = models
    torch.manual_seed(11)
    got = tokens(model.generate(PROMPT, **SAMPLED))
    after = torch.rand(3)
    assert got == tokens(model.generate(PROMPT, seed=drawn(11), **SAMPLED)), (
        "a sampled call after torch.manual_seed(11) must equal seed=<the draw torch.randint gives then>"
    )
    drawn(11)
    assert torch.equal(torch.rand(3), after), "the call must consume exactly one torch.randint draw"


def test_an_explicit_seed_wins_and_leaves_torchs_generator_alone(models):
    model, _ = models
    torch.manual_seed(1)
    state = torch.get_rng_state()
    a = tokens(model.generate(PROMPT, seed=5, **SAMPLED))
    assert torch.equal(torch.get_rng_state(), state), "seed=5 drew from torch's generator"
    torch.manual_seed(2)
    assert tokens(model.generate(PROMPT, seed=5, **SAMPLED)) == a, "seed=5 must not depend on torch's state"


def test_greedy_calls_draw_nothing(models):
    model, draft = models
    torch.manual_seed(4)
    state = torch.get_rng_state()
    model.generate(PROMPT, max_new_tokens=6)
    model.generate(PROMPT, max_new_tokens=6, assistant_model=draft)
    assert torch.equal(torch.get_rng_state(), state), "a greedy call moved torch's generator"
    ha.set_seed(9)
    sampled = tokens(model.generate(PROMPT, **SAMPLED))
    ha.set_seed(9)
    model.generate(PROMPT, max_new_tokens=6)
    assert tokens(model.generate(PROMPT, **SAMPLED)) == sampled, "a greedy call in between changed the next sample"


@pytest.mark.parametrize("mode", ["rejection", "coupled"])
def test_assisted_sampling_takes_its_seed_the_same_way(models, mode):
    model, draft = models
    assisted = dict(SAMPLED, assistant_model=draft, assisted_sampling=mode)
    torch.manual_seed(3)
    first = tokens(model.generate(PROMPT, **assisted))
    torch.manual_seed(3)
    assert tokens(model.generate(PROMPT, **assisted)) == first, f"{mode}: torch.manual_seed(3) did not repeat it"
    assert tokens(model.generate(PROMPT, seed=drawn(3), **assisted)) == first
    if mode == "coupled":  # the exactness promise: coupled assisted sampling gives the plain sample of its seed
        torch.manual_seed(3)
        assert tokens(model.generate(PROMPT, **SAMPLED)) == first, "coupled assisted != plain for one torch seed"


def test_set_seed_seeds_torch_as_transformers_set_seed_does(models):
    model, _ = models
    ha.set_seed(21)
    x = torch.rand(4)
    torch.manual_seed(21)
    assert torch.equal(torch.rand(4), x), "ha.set_seed(21) must seed torch's default generator"
    ha.set_seed(21)
    a = tokens(model.generate(PROMPT, **SAMPLED))
    torch.manual_seed(21)
    assert tokens(model.generate(PROMPT, **SAMPLED)) == a, "after set_seed, calls draw from torch's generator"
    try:
        ha.set_seed(0, deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def test_without_torch_set_seeds_generator_seeds_the_calls(models, monkeypatch):
    model, draft = models
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` sees where torch is not installed
    ha.set_seed(5)
    a = tokens(model.generate(PROMPT, **SAMPLED))
    b = tokens(model.generate(PROMPT, **SAMPLED))
    ha.set_seed(5)
    assert [tokens(model.generate(PROMPT, **SAMPLED)), tokens(model.generate(PROMPT, **SAMPLED))] == [a, b]
    assert a != b, "successive calls without reseeding gave equal outputs"
    assert a == tokens(model.generate(PROMPT, seed=int(np.random.default_rng(5).integers(0, 2**63)), **SAMPLED))
    ha.set_seed(5)
    coupled = tokens(model.generate(PROMPT, assistant_model=draft, assisted_sampling="coupled", **SAMPLED))
    assert coupled == a, "coupled assisted sampling after set_seed(5) != the plain call's"
