"""translate.py's own flags (its input, output and modes) and the validator that checks them
together; the model, search and sampling flags are cli/search_flags.py's."""

import re

from absl import flags

from cli import search_flags

TAG_PATTERN = re.compile(r"[A-Za-z0-9_]+")


def define_translate_flags():
    """Defines translate.py's flags in absl's global FLAGS: the shared model, search and sampling
    flags, then its own."""
    search_flags.define_model_and_search_flags()
    search_flags.define_sampling_flags()
    flags.DEFINE_string("input", "-", "Sentences to translate, one per line ('-': stdin).")
    flags.DEFINE_string("output", "-", "Where the translations go, one per line ('-': stdout).")
    _define_large_file_flags()
    flags.DEFINE_integer(
        "window", 1000, "Piped input: lines read, sorted by length and translated together.", lower_bound=1
    )
    flags.DEFINE_integer(
        "n_best", None, "Print the K best hypotheses per line as `line_index ||| hypothesis ||| score`.", lower_bound=1
    )
    flags.DEFINE_boolean("with_scores", False, "Print `translation ||| score` (the search's length-penalised score).")
    flags.DEFINE_boolean(
        "score",
        False,
        "Score given translations instead of translating: read `source<TAB>target` lines (or --src/--tgt) and "
        "print `log_prob<TAB>per_token<TAB>perplexity<TAB>tokens` per pair.",
    )
    flags.DEFINE_boolean(
        "prefix",
        False,
        "Read `source<TAB>target prefix` lines: each translation (each of --n_best, each sample) starts with its "
        "prefix's SentencePiece pieces, forced, and goes on as the search chooses; scores count the whole "
        "translation. An empty prefix: the search without one.",
    )
    flags.DEFINE_string(
        "constraints",
        None,
        "Terminology constraints: a file with one line per input line, the target phrases that line's translation "
        "must contain, separated by tabs (an empty line: none). Searched by lexically constrained beam search "
        "(dynamic beam allocation); a line whose phrases the search cannot all place is translated without them, "
        "with a warning on stderr.",
    )
    flags.DEFINE_string("src", None, "--score: the sources, one per line (with --tgt, instead of TSV input).")
    flags.DEFINE_string("tgt", None, "--score: the targets, line-aligned with --src.")
    flags.DEFINE_boolean(
        "alignments",
        False,
        "After each output line (each hypothesis of --n_best), a TAB and the translation's word alignment in Pharaoh "
        "format, `source-target` word indices from 0 (`0-0 1-2 2-1`): each target word linked to the source word "
        "it attends to most in the encoder-decoder attention (the matrix --plot_attention draws). Words are "
        "space-separated, not SentencePiece pieces.",
    )
    flags.DEFINE_string(
        "tag",
        None,
        "Back-translation: write each line as a synthetic training pair for the reverse direction, "
        "`<TAG> translation<TAB>input line` (e.g. --tag=bt with --sampling_topk=10 on monolingual target-language "
        "text); train on it beside real pairs with --train_tsv=real.tsv:1,bt.tsv:W and --user_defined_symbols='<TAG>'.",
    )
    flags.DEFINE_integer(
        "alignment_layer",
        None,
        "--alignments: the decoder layer whose attention is read, from 0, or negative from the last (-1) "
        "(default: the penultimate, or the only one).",
    )
    flags.DEFINE_integer(
        "alignment_head",
        None,
        "--alignments: read this attention head, from 0 (default: the mean over heads).",
        lower_bound=0,
    )

    _define_document_flags()
    flags.register_multi_flags_validator(
        ["n_best", "beam_size", "score", "prefix", "sampling_topk", "sampling_topp"]
        + ["src", "tgt", "input", "export_dir", "alignments", "alignment_layer", "alignment_head", "constraints"]
        + ["tag", "with_scores"],
        _check_modes,
        message="",
    )


def _define_document_flags():
    """--split_sentences, --markup and --format, and the validator of their combinations."""
    flags.DEFINE_boolean(
        "split_sentences",
        True,
        "Translate each line sentence by sentence (a sentence longer than the maximum input length cut further "
        "at clause punctuation, then by length, never truncated) and join the translations as the line was "
        "spaced; --nosplit_sentences: each line whole (pre-segmented text), cut to the maximum input length. "
        "With --export_dir, default: the export's own setting.",
    )
    flags.DEFINE_boolean(
        "markup",
        False,
        "Keep inline tags (<b>, <a href=...>, <br/>), placeholders (%1, %s, {0}, $[officename]), URLs and e-mail "
        "addresses: taken out before the search and put back around the words they align to; what is put back "
        "without the alignment's help is reported on stderr.",
    )
    flags.DEFINE_enum(
        "format",
        "text",
        ["text", "jsonl"],
        "text: a translation per line (the modes' formats); jsonl: one JSON object per line with the "
        "translation, score, confidence, tokens and token_scores (and alignment, notes, n_best as asked).",
    )
    flags.register_multi_flags_validator(
        ["format", "markup", "tag", "with_scores", "score", "n_best", "constraints", "sampling_topk", "sampling_topp"],
        _check_document_flags,
        message="",
    )


def _check_document_flags(values):
    if values["format"] == "jsonl":
        given = [f"--{name}" for name in ("tag", "with_scores") if values[name] not in (None, False)]
        if given:
            raise flags.ValidationError(
                f"--format=jsonl writes each line's score in its record: not with {', '.join(given)}"
            )
    if values["markup"]:
        sampling = values["sampling_topk"] is not None or values["sampling_topp"] is not None
        given = [f"--{name}" for name in ("score", "n_best", "constraints") if values[name] not in (None, False)]
        given += ["--sampling_topk/--sampling_topp"] if sampling else []
        if given:
            raise flags.ValidationError(
                "--markup puts tags back on the best searched translation of each line by its alignment: not with "
                + ", ".join(given)
            )
    return True


def _define_large_file_flags():
    """--resume and --progress (cli/resumable_output.py, cli/translate_progress.py)."""
    flags.DEFINE_boolean(
        "resume",
        True,
        "--output=FILE: go on from where a killed or interrupted run into FILE stopped (its record FILE.progress), "
        "if it had the same flags and its input lines are the same; --noresume translates from the start.",
    )
    flags.DEFINE_boolean(
        "progress",
        True,
        "A progress line on stderr (lines done, sentences/s and lines/s, time left for a file's input): rewritten at a terminal, "
        "a plain line a minute into a file or pipe. Not while lines are typed, or translations printed, at the "
        "terminal.",
    )


def _check_modes(values):
    if values["n_best"] is not None and values["n_best"] > values["beam_size"]:
        raise flags.ValidationError(
            f"--n_best={values['n_best']} is larger than --beam_size={values['beam_size']}: the search keeps "
            "beam_size hypotheses per line"
        )
    sampling = values["sampling_topk"] is not None or values["sampling_topp"] is not None
    if sampling and values["n_best"] not in (None, 1):
        raise flags.ValidationError("--n_best needs a beam search; sampling draws one translation per line")
    if values["score"] and (sampling or values["n_best"] is not None):
        raise flags.ValidationError(
            "--score scores given translations; it takes no --n_best, --sampling_topk or --sampling_topp"
        )
    if values["score"] and values["prefix"]:
        raise flags.ValidationError("--score scores given translations; --prefix is for translating")
    _check_alignments(values)
    _check_tag(values)
    if values["constraints"] and (values["score"] or sampling):
        raise flags.ValidationError(
            "--constraints steer the beam search: not with --score, --sampling_topk or --sampling_topp"
        )
    if bool(values["src"]) != bool(values["tgt"]):
        raise flags.ValidationError("--src and --tgt go together (or neither: TSV lines on --input)")
    if values["src"] and not values["score"]:
        raise flags.ValidationError("--src/--tgt are for --score; translate with --input")
    if values["src"] and values["input"] != "-":
        raise flags.ValidationError("pass --src/--tgt or --input, not both")
    return True


def _check_tag(values):
    tag = values["tag"]
    if tag is None:
        return
    if not TAG_PATTERN.fullmatch(tag):
        raise flags.ValidationError(
            f"--tag={tag!r} must be letters, digits or _ (the pair's source starts with <{tag}>, one vocabulary piece)"
        )
    given = ("n_best", "with_scores", "score", "prefix", "alignments")
    others = [f"--{name}" for name in given if values[name] not in (None, False)]
    if others:
        raise flags.ValidationError(
            f"--tag writes each line as a pair of its translation and the input line: not with {', '.join(others)}"
        )


def _check_alignments(values):
    if values["alignments"] and (values["sampling_topk"] is not None or values["sampling_topp"] is not None):
        raise flags.ValidationError(
            "--alignments aligns searched translations (greedy, beam, --n_best, --prefix, --constraints), not "
            "samples: leave out --sampling_topk and --sampling_topp"
        )
    if values["alignments"] and values["score"]:
        raise flags.ValidationError("--score scores given translations; --alignments is for translating")
    if not values["alignments"] and (values["alignment_layer"] is not None or values["alignment_head"] is not None):
        raise flags.ValidationError("--alignment_layer and --alignment_head choose the attention of --alignments")
