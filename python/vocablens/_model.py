"""vocablens.Model: the loaded model (C++), with a few Python conveniences added here."""
import os

from . import _vocablens as _core

Model = _core.Model


def load_model(path, tokenizer=None):
    """Loads a model: a Hugging Face directory (safetensors, sharded, pytorch_model.bin), a llama2.c .bin or a
    ckpt.pt. The tokenizer is found beside it (or given). Raises vocablens.FormatError naming the file."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("load_model(): path must be a str or os.PathLike, not " + type(path).__name__)
    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
        raise TypeError("load_model(): tokenizer must be a str or os.PathLike, not " + type(tokenizer).__name__)
    return _core.load_model(os.fspath(path), os.fspath(tokenizer) if tokenizer is not None else "")


def _decode(self, ids):
    """Token ids -> text (bytes that are not valid UTF-8 become U+FFFD; decode_bytes() gives the bytes)."""
    return self.decode_bytes(ids).decode("utf-8", errors="replace")


def _repr(self):
    c = self.config
    return "<vocablens.Model {} {} layers, d_model {}, {} heads, vocab {}: {}>".format(
        c["architecture"], c["n_layers"], c["d_model"], c["n_heads"], c["d_vocab"], self.source)


Model.decode = _decode
Model.__repr__ = _repr
