"""TransformerLens's token helpers (to_tokens, to_str_tokens, to_string, to_single_token) and its rule for
text given to a forward: BOS first unless prepend_bos=False (docs/python.md, "Coming from TransformerLens")."""
import torch


def texts(input):
    """The texts of a str or a non-empty list of str, else None."""
    if isinstance(input, str):
        return [input]
    if isinstance(input, (list, tuple)) and input and all(isinstance(t, str) for t in input):
        return list(input)
    return None


def _shape(t):
    return "[" + ", ".join(str(s) for s in t.shape) + "]"


def _ids_1d(self, tokens, arg):
    if isinstance(tokens, (str, bytes)):
        raise TypeError("{} must be token ids (a list or an integer tensor), not {}".format(arg, type(tokens).__name__))
    if isinstance(tokens, torch.Tensor):
        if tokens.dim() == 2 and tokens.shape[0] == 1:
            tokens = tokens[0]
        if tokens.dim() != 1:
            raise ValueError("{} must be [pos] or [1, pos] token ids, got {}".format(arg, _shape(tokens)))
        return [int(t) for t in tokens.tolist()]
    return self.to_ids(tokens, bos=False)


def _encode(self, text, prepend_bos):
    """One text's ids as TransformerLens tokenises it: BOS first unless prepend_bos=False (TransformerLens's
    default_prepend_bos is True for every model, GPT-2 included); a tokenizer without a BOS token uses its EOS,
    as TransformerLens does."""
    if prepend_bos is False:
        return self.tokenize(text, bos=False)
    tok = self.tokenizer
    if tok is not None and tok.bos_id is not None and tok.bos_id >= 0:
        return self.tokenize(text, bos=True)
    if tok is not None and tok.eos_id is not None and tok.eos_id >= 0:
        return [tok.eos_id] + self.tokenize(text, bos=False)
    raise ValueError("prepend_bos: this model's tokenizer has no BOS or EOS token to prepend; pass prepend_bos=False")


def to_tokens(self, input, prepend_bos=None, *, padding_side="right", truncate=True):
    """Token ids as an int64 tensor [batch, pos]: a str gives [1, pos], a list of str [batch, pos] padded on
    `padding_side` with the EOS id (0 without one). prepend_bos=None is TransformerLens's default: BOS first
    for every model (GPT-2's <|endoftext|> too; a tokenizer without BOS gives its EOS); False leaves it out.
    The same rule tokenises text given to forward, run_with_hooks, run_with_cache, gradients and generate;
    model.tokenize() and the analyses (lens, patch, ...) follow the tokenizer's own convention instead, as
    the CLI does. truncate: cut to the model's context."""
    if padding_side is None:
        padding_side = "right"
    if padding_side not in ("right", "left"):
        raise ValueError("to_tokens(): padding_side must be 'right' or 'left', not {!r}".format(padding_side))
    if prepend_bos is not None and not isinstance(prepend_bos, bool):
        raise TypeError("to_tokens(): prepend_bos must be None, True or False, not " + type(prepend_bos).__name__)
    rows_of = texts(input)
    if rows_of is None:
        raise TypeError("to_tokens(): input must be a str or a non-empty list of str, not " + type(input).__name__)
    rows = [_encode(self, t, prepend_bos) for t in rows_of]
    n_ctx = self.config["n_ctx"]
    if truncate:
        rows = [r[:n_ctx] for r in rows]
    width = max(len(r) for r in rows)
    tok = self.tokenizer
    pad = tok.eos_id if tok is not None and tok.eos_id is not None and tok.eos_id >= 0 else 0
    out = torch.full((len(rows), width), pad, dtype=torch.int64)
    for i, r in enumerate(rows):
        if not r:
            continue
        if padding_side == "right":
            out[i, :len(r)] = torch.tensor(r, dtype=torch.int64)
        else:
            out[i, width - len(r):] = torch.tensor(r, dtype=torch.int64)
    return out


def to_str_tokens(self, input, prepend_bos=None):
    """The tokens as strings (each token's text, e.g. " Paris"; special tokens as "<s>", "<|endoftext|>";
    invalid UTF-8 pieces shown with U+FFFD):
    input is text (tokenised as to_tokens: BOS first unless prepend_bos=False), ids, a [pos] / [1, pos]
    tensor, or a list of texts / a [batch, pos] tensor (then a list of lists)."""
    if isinstance(input, (list, tuple)) and input and all(isinstance(t, str) for t in input):
        return [self.to_str_tokens(t, prepend_bos) for t in input]
    if isinstance(input, torch.Tensor) and input.dim() == 2 and input.shape[0] > 1:
        return [self.to_str_tokens(row) for row in input]
    if isinstance(input, str):
        ids = _encode(self, input, prepend_bos)
    else:
        ids = _ids_1d(self, input, "input")
    tok = self.tokenizer

    def one(i):
        if tok is not None and tok.is_special(i):
            return tok.display(i)  # "<s>", "<|endoftext|>" (SentencePiece decodes control tokens to "")
        return self.decode_bytes([i]).decode("utf-8", errors="replace")
    return [one(i) for i in ids]


def to_string(self, tokens):
    """Ids -> text: a [pos] tensor or list of ids gives a str, a [batch, pos] tensor a list of str."""
    if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and tokens.shape[0] > 1:
        return [self.to_string(row) for row in tokens]
    return self.decode(_ids_1d(self, tokens, "tokens"))


def to_single_token(self, string):
    """The id of a string that is one token (TransformerLens's to_single_token)."""
    return self.token_id(string)


def install(Model):
    Model.to_tokens = to_tokens
    Model.to_str_tokens = to_str_tokens
    Model.to_string = to_string
    Model.to_single_token = to_single_token
