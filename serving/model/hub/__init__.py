"""Bring your own model: causal LMs from outside the project, exported into our contract.

`importer.run_import` loads a keras_hub preset directory (what `save_to_preset` writes) and
writes a version with the same signatures as our own model (`serving/model/generate.py`): the
preset's tokenizer in the graph (`Vocab`), its weights behind our `Decoder` protocol, and the
shared loop, sampling and stop sequences. One module per model family adapts it (`gpt2.py`,
`qwen.py`) on the shared cached decode (`cached.py`) and byte-level BPE vocabulary (`bpe.py`).
"""
