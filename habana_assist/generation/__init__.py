"""Generation, laid out as Transformers' generation/: configuration_utils.py (GenerationConfig), utils.py (generate()
and its outputs), candidate_generator.py (the drafter), logits_process.py, stopping_criteria.py, streamers.py; ours
beside them: options.py (a call's options as the core reads them), assisted_costs.py (the cost schedule),
universal.py (a draft with another tokenizer), display.py (the notebook view)."""
