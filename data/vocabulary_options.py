"""The vocabulary's options, checked without TensorFlow (train.py's flags, the run's config, data.prepare):
subword regularization's settings and user-defined symbols, and the cached vocabulary's file name."""

import hashlib
import re
from collections.abc import Iterable

from common.errors import UserError
from common.special_ids import SPECIAL_PIECES


class SymbolError(UserError, ValueError):
    """A user-defined symbol the vocabulary cannot hold."""


# SentencePiece's bound on the n-best list it samples from.
MAX_NBEST = 512
SUBWORD_MODELS = ("bpe", "unigram")
# One SentencePiece model for both sides, or one per side (the source's and the target's).
VOCABULARIES = ("shared", "separate")
# Pairs sampled for a vocabulary (data.prepare's --vocab_sample_lines, train.py's own): two million
# sentences for a shared one, SentencePiece's own default sample; one million for one side's.
VOCAB_SAMPLE_LINES = 1_000_000


def sampling_refusal(alpha: float, nbest_size: int) -> str | None:
    """Why (alpha, nbest_size) cannot be subword regularization's settings, naming train.py's flags,
    or None (BPE-dropout, Provilkov et al. 2020, for BPE; Kudo 2018 for unigram)."""
    if not 0 < alpha <= 1:
        return f"--subword_alpha={alpha} must lie in (0, 1] (leave it out, or pass 0, to sample no segmentation)"
    if nbest_size in (0, 1) or nbest_size < -1:
        return (
            f"--subword_nbest={nbest_size} leaves no segmentation to sample from: pass -1 (sample from all) or "
            f"2 to {MAX_NBEST} (sample from that many best)"
        )
    if nbest_size > MAX_NBEST:
        return f"--subword_nbest={nbest_size}: SentencePiece samples from at most the {MAX_NBEST} best (or -1: all)"
    return None


_BYTE_PIECE = re.compile(r"^<0x[0-9A-F]{2}>$")


def check_user_defined_symbols(symbols: Iterable[str]) -> tuple[str, ...]:
    """The symbols as a tuple, each non-empty, without whitespace, given once, not a special or byte
    piece (`<pad>`, `<0x41>`). Raises `SymbolError` on the first bad symbol, named."""
    symbols = tuple(symbols)
    special = {piece: piece_id for piece_id, piece in SPECIAL_PIECES.items()}
    seen = set()
    for symbol in symbols:
        if not symbol or any(character.isspace() for character in symbol):
            raise SymbolError(f"user-defined symbol {symbol!r}: a symbol must be non-empty and hold no whitespace")
        if symbol in special:
            raise SymbolError(
                f"user-defined symbol {symbol!r} collides with the special piece of id {special[symbol]} "
                f"({', '.join(f'{p}={i}' for p, i in special.items())} are reserved)"
            )
        if _BYTE_PIECE.match(symbol):
            raise SymbolError(f"user-defined symbol {symbol!r} collides with a byte-fallback piece (<0x00>-<0xFF>)")
        if symbol in seen:
            raise SymbolError(f"user-defined symbol {symbol!r} is given twice")
        seen.add(symbol)
    return symbols


def vocabulary_stem(
    vocab_size: int, user_defined_symbols: Iterable[str] = (), model_type: str = "bpe", column: int | None = None
) -> str:
    """The cached vocabulary's file name without `.model`: `spm-bpe-8000`, plus a digest of the
    user-defined symbols if any, plus `-col0`/`-col1` for one side of separate vocabularies."""
    stem = f"spm-{model_type}-{vocab_size}"
    symbols = tuple(user_defined_symbols)
    if symbols:
        stem += "-sym" + hashlib.sha256("\n".join(symbols).encode("utf-8")).hexdigest()[:8]
    if column is not None:
        stem += f"-col{column}"
    return stem
