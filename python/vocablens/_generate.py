"""model.generate with TransformerLens's signature and semantics (docs/python.md, "Coming from TransformerLens").

Sampling follows TransformerLens's documented rules: logits / temperature (temperature 0: the argmax), minus
freq_penalty times each token's count so far, then top_k, then top_p (the smallest set of most likely tokens
whose probability reaches top_p), then a draw from torch's global generator (torch.manual_seed makes it
repeatable). Every step runs a full forward pass with this thread's hooks (model.hooks blocks, add_hook), so
steering hooks apply to the generation; greedy generation without hooks takes the library's loop, which keeps
the keys and values of earlier positions (the same tokens, faster).
"""
import numbers

import torch

from ._hooks import _state
from ._tokens import texts as _texts, to_tokens

_RETURN_TYPES = ("input", "str", "tokens")


def _number(fn, arg, v, low=None, low_open=False, high=None, optional=False):
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError("{}(): {} must be a number, not {}".format(fn, arg, type(v).__name__))
    v = float(v)
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError("{}(): {} must be {} {} (got {})".format(fn, arg, ">" if low_open else ">=", low, v))
    if high is not None and v > high:
        raise ValueError("{}(): {} must be <= {} (got {})".format(fn, arg, high, v))
    return v


def _integer(fn, arg, v, low, optional=False):
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError("{}(): {} must be an int, not {}".format(fn, arg, type(v).__name__))
    if v < low:
        raise ValueError("{}(): {} must be >= {} (got {})".format(fn, arg, low, v))
    return int(v)


def sample(logits, tokens, top_k=None, top_p=None, temperature=1.0, freq_penalty=0.0):
    """One token per row of logits [batch, d_vocab]; tokens [batch, pos] are the sequences so far (for
    freq_penalty)."""
    if temperature == 0.0:
        return logits.argmax(-1)
    logits = logits.to(torch.float32) / temperature
    if freq_penalty:
        counts = torch.stack([torch.bincount(row, minlength=logits.shape[-1]) for row in tokens])
        logits = logits - freq_penalty * counts.to(logits.dtype)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        order = logits.argsort(dim=-1, descending=True)
        sorted_logits = logits.gather(-1, order)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        # drop a token once the more likely ones already reach top_p (the first one is always kept)
        drop_sorted = torch.zeros_like(cum, dtype=torch.bool)
        drop_sorted[..., 1:] = cum[..., :-1] >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return torch.multinomial(logits.softmax(-1), 1)[:, 0]


def generate(self, input="", max_new_tokens=10, stop_at_eos=True, eos_token_id=None, do_sample=True, top_k=None,
             top_p=None, temperature=1.0, freq_penalty=0.0, use_past_kv_cache=True, prepend_bos=None,
             padding_side=None, return_type="input", verbose=True, *, steps=None):
    """TransformerLens's generate: `input` (text, a list of texts of one token length, ids, or an integer
    tensor [T] / [batch, T]) continued by up to max_new_tokens tokens, sampled (do_sample=True, TransformerLens's
    default: temperature, top_k, top_p, freq_penalty) or greedy (do_sample=False); stops at EOS (eos_token_id: an
    id or a list of them; default the tokenizer's) with stop_at_eos. Text is tokenised as to_tokens (BOS first
    unless prepend_bos=False). Returns the prompt and the new tokens: return_type "str" (text without special
    tokens; a list for a batch), "tokens" ([batch, pos] int64) or "input" (str for text input, else tokens).
    use_past_kv_cache, padding_side and verbose are accepted for TransformerLens's code; steps= is the older
    spelling of max_new_tokens. No attention mask: texts that tokenise to different lengths are refused."""
    fn = "generate"
    if steps is not None:
        if max_new_tokens != 10:
            raise TypeError("generate(): give max_new_tokens or steps, not both")
        max_new_tokens = steps
    max_new_tokens = _integer(fn, "max_new_tokens", max_new_tokens, 0)
    top_k = _integer(fn, "top_k", top_k, 1, optional=True)
    top_p = _number(fn, "top_p", top_p, 0.0, True, 1.0, optional=True)
    temperature = _number(fn, "temperature", temperature, 0.0)
    freq_penalty = _number(fn, "freq_penalty", freq_penalty)
    for arg, v in (("stop_at_eos", stop_at_eos), ("do_sample", do_sample), ("use_past_kv_cache", use_past_kv_cache),
                   ("verbose", verbose)):
        if not isinstance(v, bool):
            raise TypeError("generate(): {} must be True or False, not {}".format(arg, type(v).__name__))
    if return_type == "embeds":
        raise ValueError("generate(): return_type='embeds' is not supported (vocablens generates from tokens); "
                         "use 'str', 'tokens' or 'input'")
    if return_type not in _RETURN_TYPES:
        raise ValueError("generate(): return_type must be 'input', 'str' or 'tokens', not {!r}".format(return_type))
    text_input = _texts(input) is not None
    if text_input:
        ids = to_tokens(self, input, prepend_bos, padding_side=padding_side, truncate=False)
        if len(_texts(input)) > 1:
            lengths = [len(self.to_str_tokens(t, prepend_bos)) for t in _texts(input)]
            if len(set(lengths)) > 1:
                raise ValueError("generate(): input: the texts tokenise to different lengths ({}); vocablens has no "
                                 "attention mask for padding, so generate them one at a time".format(
                                     ", ".join(map(str, lengths))))
    ids = self._batch_ids(ids if text_input else input, None)
    if return_type == "input":
        return_type = "str" if text_input else "tokens"
    tok = self.tokenizer
    if eos_token_id is None:
        stops = [tok.eos_id] if tok is not None and tok.eos_id is not None and tok.eos_id >= 0 else []
    elif isinstance(eos_token_id, (list, tuple)):
        stops = [_integer(fn, "eos_token_id", e, 0) for e in eos_token_id]
    else:
        stops = [_integer(fn, "eos_token_id", eos_token_id, 0)]
    if not stop_at_eos:
        stops = []
    n_ctx = self.config["n_ctx"]
    hooked = bool(_state(self))
    if not do_sample and not hooked and ids.shape[0] == 1 and len(stops) <= 1:
        out = self._generate_greedy(ids[0].tolist(), max_new_tokens, stops[0] if stops else -1)
        tokens = torch.tensor([out], dtype=torch.int64)
    else:
        tokens = ids
        finished = torch.zeros(ids.shape[0], dtype=torch.bool)
        stop_t = torch.tensor(stops, dtype=torch.int64)
        # As the library's loop (llama2.c's run.c): the token predicted at position n_ctx - 1 is kept.
        for _ in range(max_new_tokens):
            if tokens.shape[1] > n_ctx:
                break
            last = self.forward(tokens)[:, -1, :].detach()
            if do_sample:
                nxt = sample(last, tokens, top_k, top_p, temperature, freq_penalty)
            else:
                nxt = last.argmax(-1)
            if stops:
                nxt[finished] = stops[0]          # a finished sequence is padded with EOS, as TransformerLens does
                finished |= torch.isin(nxt, stop_t)
            tokens = torch.cat([tokens, nxt[:, None].to(torch.int64)], dim=1)
            if stops and bool(finished.all()):
                break
    if return_type == "tokens":
        return tokens
    texts = [_text(self, row.tolist(), tok) for row in tokens]
    return texts[0] if len(texts) == 1 else texts


def _text(model, ids, tok):
    """The text of ids without special tokens (TransformerLens decodes with skip_special_tokens). A leading BOS is
    decoded with the text and its own text cut off, so that a SentencePiece tokenizer drops the space it puts
    after BOS, as it does when decoding the whole sequence ("Once upon", not " Once upon")."""
    lead = None
    if tok is not None and ids and tok.is_special(ids[0]):
        lead = ids[0]
    rest = [i for i in ids if tok is None or not tok.is_special(i)]
    if not rest:
        return ""
    if lead is not None:
        full, pre = model.decode([lead] + rest), model.decode([lead])
        if full.startswith(pre):
            return full[len(pre):]
    return model.decode(rest)
