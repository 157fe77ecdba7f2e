"""The pieces of target prefixes and terminology constraints, checked the same way by both
translators before any search: one longer than its sentence's maximum output, or an empty phrase,
is refused."""

from inference.protocol import ConstraintError, PrefixError


def _limit_reason(what, pieces, source_length, max_extra_length):
    limit = source_length + max_extra_length
    return (
        f"{what} has {pieces} SentencePiece pieces, more than the maximum output length of {limit} tokens "
        f"({source_length} source tokens, EOS included, + max_extra_length={max_extra_length})"
    )


def prefix_pieces(tokenizer, prefixes, source_lengths, max_extra_length):
    """The pieces (lists of ids) of each sentence's target prefix, `[]` for None or "" (for all
    when `prefixes` is None). `source_lengths`: each sentence's source tokens, EOS included.

    Raises:
        PrefixError: a prefix longer than its sentence's maximum output length, named by position.
        ValueError: not one prefix per sentence.
    """
    prefixes = prefix_list(prefixes, len(source_lengths))
    if prefixes is None:
        return [[] for _ in source_lengths]
    rows = tokenizer.tokenize(prefixes).to_list()
    for index, (row, source_length) in enumerate(zip(rows, source_lengths)):
        if len(row) > source_length + max_extra_length:
            raise PrefixError(_limit_reason("the target prefix", len(row), source_length, max_extra_length), index)
    return rows


def constraint_pieces(tokenizer, constraints, source_lengths, max_extra_length):
    """The pieces (lists of ids) of each sentence's phrases, a list per sentence (`[]` for None,
    for all when `constraints` is None); other arguments as `prefix_pieces`'s.

    Raises:
        ConstraintError: an empty phrase or one longer than its sentence's maximum output, named by
            sentence and number.
        ValueError: not one list per sentence, or a string in place of a list.
    """
    constraints = constraint_lists(constraints, len(source_lengths))
    if constraints is None:
        return [[] for _ in source_lengths]
    phrases = [phrase for sentence in constraints for phrase in sentence]
    pieces = iter(tokenizer.tokenize(phrases).to_list() if phrases else [])
    rows = []
    for index, (sentence, source_length) in enumerate(zip(constraints, source_lengths)):
        rows.append([next(pieces) for _ in sentence])
        for number, (phrase, row) in enumerate(zip(sentence, rows[-1]), start=1):
            if not row:
                raise ConstraintError(f"phrase {number} ({phrase!r}) is empty: it has no SentencePiece pieces", index)
            if len(row) > source_length + max_extra_length:
                reason = _limit_reason(f"phrase {number}", len(row), source_length, max_extra_length)
                raise ConstraintError(reason, index)
    return rows


def prefix_list(prefixes, count):
    """`prefixes` as a list of `count` strings ("" for None), or None when no prefix has text.

    Raises:
        ValueError: not one prefix per sentence.
    """
    if prefixes is None:
        return None
    prefixes = ["" if prefix is None else prefix for prefix in prefixes]
    if len(prefixes) != count:
        raise ValueError(f"prefixes must have one string (or None) per sentence: {len(prefixes)} for {count} sentences")
    return prefixes if any(prefixes) else None


def constraint_lists(constraints, count):
    """`constraints` as `count` lists of phrases (`[]` for None), or None when no sentence has one.

    Raises:
        ValueError: not one list per sentence, or a string in place of a list.
    """
    if constraints is None:
        return None
    if any(isinstance(phrases, str) for phrases in constraints):
        raise ValueError("constraints must be lists of phrases, one per sentence, not strings")
    constraints = [[] if phrases is None else list(phrases) for phrases in constraints]
    if len(constraints) != count:
        raise ValueError(
            f"constraints must have one list of phrases (or None) per sentence: {len(constraints)} for {count} sentences"
        )
    return constraints if any(constraints) else None
