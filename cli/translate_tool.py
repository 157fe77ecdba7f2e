"""What translate.py does once its flags are parsed: the input read as numbered lines in windows,
each window translated (or scored), and the output lines written in the formats of its modes
(translations, n-best `i ||| hypothesis ||| score`, scores, alignments, tagged pairs)."""

import contextlib
import os
import sys

from absl import flags

from cli import input_checks, resumable_output, search_flags, translation_records
from cli.resumable_output import ResumableOutput
from cli.search_flags import SEARCH_FLAGS
from cli.translate_progress import InputProgress, count_lines
from common import progress as progress_lines
from common.errors import BAD_INPUT_STATUS, UserError
from common.write_errors import WriteError
from inference import segmentation
from inference.protocol import AlignmentConfig, ConstraintError, SteeringError

FLAGS = flags.FLAGS
OUTPUT_FLAG_MODULES = ("cli.checkpoint_flag", "cli.search_flags", "cli.translate_flags")
NOT_OUTPUT_FLAGS = {"input", "output", "window", "batch_size", "resume", "progress"}
EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = BAD_INPUT_STATUS, 130, 141


class InputError(UserError, ValueError):
    """Bad input, named by file and line."""


def read_lines(path, name):
    """Yields `(line_number, text)` of a file ('-': stdin) read as bytes: the line ending is
    dropped, and invalid UTF-8 is replaced by U+FFFD and reported on stderr with its line number."""
    try:
        handle = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as error:
        raise InputError(f"--{name}={path}: cannot read: {error.strerror}") from None
    try:
        for number, raw in enumerate(iter(handle.readline, b""), start=1):
            raw = raw[:-1] if raw.endswith(b"\n") else raw
            raw = raw[:-1] if raw.endswith(b"\r") else raw
            raw = input_checks.checked_bytes(raw, number, name)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                text = raw.decode("utf-8", errors="replace")
                print(
                    f"translate.py: {name} line {number}: invalid UTF-8 ({error.reason} at byte {error.start}) "
                    "replaced by U+FFFD",
                    file=sys.stderr,
                )
            yield number, text
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()


def windows(lines, size):
    """Lists of up to `size` items of `lines`."""
    window = []
    for item in lines:
        window.append(item)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def splits_sentences():
    """Whether lines are split into sentences: --split_sentences, or an export's own setting when
    --export_dir is given without the flag."""
    if FLAGS.export_dir and not FLAGS["split_sentences"].present:
        return translation_records.export_splits(FLAGS.export_dir)
    return FLAGS.split_sentences


def sentence_count(texts):
    """The sentences `texts` are translated as (`inference.segmentation`; a line without one as one)."""
    return sum(max(1, len(segmentation.segment(text).pieces)) for text in texts)


def translation_lines(
    translator, numbers, sentences, first_index, name, limit, prefixes=None, constraints=None, split=True
):
    """The output lines for one window of input lines (with `prefixes`, their target prefixes, and
    `constraints`, their phrases), split into sentences with `split` (`splits_sentences`); InputError
    for a prefix or phrase the search cannot follow, before any line of the window is translated."""
    alignments = AlignmentConfig(FLAGS.alignment_layer, FLAGS.alignment_head) if FLAGS.alignments else False
    try:
        window = translation_records.translate_window(
            translator,
            sentences,
            records=FLAGS.format == "jsonl" or FLAGS.markup,
            n_best=FLAGS.n_best,
            keys=range(first_index, first_index + len(sentences)),
            prefixes=prefixes,
            constraints=constraints,
            alignments=alignments,
            split_sentences=split,
            markup=FLAGS.markup,
        )
    except SteeringError as error:
        source = FLAGS.constraints if isinstance(error, ConstraintError) else name
        raise InputError(f"{source} line {numbers[error.index]}: {error.reason}") from None
    report_truncated(translator, numbers, name, limit)
    for index in translator.unmet_indices:
        print(
            f"translate.py: {name} line {numbers[index]}: the search found no translation with all the phrases "
            f"of {FLAGS.constraints} line {numbers[index]}; translated without them",
            file=sys.stderr,
        )
    translation_records.report_notes(window, numbers, name)
    if FLAGS.format == "jsonl":
        return translation_records.jsonl_lines(translator, window, sentences, FLAGS.n_best)
    texts, scores = window.texts, window.scores
    aligned = window.alignments or [None] * len(texts)
    cut = set(translator.truncated_indices)
    output = []
    for offset, (text, score, alignment) in enumerate(zip(texts, scores, aligned)):
        if FLAGS.tag is not None:
            if offset not in cut:  # a translation of part of its line: no pair
                output.append(f"<{FLAGS.tag}> {clean(text)}\t{sentences[offset].replace(chr(9), ' ')}")
        elif FLAGS.n_best is None:
            line = clean(text)
            line = f"{line} ||| {score:.6f}" if FLAGS.with_scores else line
            output.append(line if alignment is None else f"{line}\t{alignment}")
        else:
            index = first_index + offset
            for rank, (hypothesis, value) in enumerate(zip(text, score)):
                line = f"{index} ||| {clean(hypothesis)} ||| {value:.6f}"
                output.append(line if alignment is None else f"{line}\t{alignment[rank]}")
    return output


def clean(text):
    """A translation as one output line: line breaks as spaces, and with --alignments or --tag tabs
    too (a tab separates the alignment, or the pair's columns)."""
    text = text.replace("\r", " ").replace("\n", " ")
    return text.replace("\t", " ") if FLAGS.alignments or FLAGS.tag is not None else text


def report_truncated(translator, numbers, name, limit):
    for index in translator.truncated_indices:
        done = "left out of the pairs" if FLAGS.tag is not None else "translated from its first tokens"
        print(
            f"translate.py: {name} line {numbers[index]}: longer than the maximum input length of {limit} tokens "
            f"(EOS included); {done}",
            file=sys.stderr,
        )


def split_pairs(numbers_and_lines, name, second="target"):
    """`(numbers, sources, seconds)` of TSV lines (`second`: what follows the tab, for the
    message); InputError for a line without a tab."""
    numbers, sources, targets = [], [], []
    for number, line in numbers_and_lines:
        if "\t" not in line:
            raise InputError(f"{name} line {number}: no tab between the source and the {second}: {line[:80]!r}")
        source, target = line.split("\t", 1)
        numbers.append(number)
        sources.append(source)
        targets.append(target.replace("\t", " "))
    return numbers, sources, targets


def score_pairs(translator, write, interactive):
    """--score: the input's pairs scored window by window, a resumed --output going on after the
    pairs its killed run did (as translations do)."""
    name = FLAGS.src or input_name(FLAGS.input)
    progress = input_progress(FLAGS.src or FLAGS.input, interactive)
    if FLAGS.src:
        items = aligned_pairs(read_lines(FLAGS.src, FLAGS.src), read_lines(FLAGS.tgt, FLAGS.tgt))
    else:
        items = read_lines(FLAGS.input, name)
    items, first_index, checkpoint = resumable_output.resumed(write, items, name)
    progress.skip(first_index)
    for window in windows(items, 1 if interactive else FLAGS.window):
        if FLAGS.src:
            numbers, sources, targets = [p[0] for p in window], [p[2] for p in window], [p[3] for p in window]
        else:
            numbers, sources, targets = split_pairs(window, name)
        results = translator.score(sources, targets)
        report_truncated(translator, numbers, name, translator.max_input_length)
        for result in results:
            write(translation_records.score_line(result, FLAGS.format))
        checkpoint()
        progress.advance(len(numbers))
    progress.finish()


def aligned_pairs(sources, targets):
    """`(number, "source<TAB>target", source, target)` from two line streams read together (the
    second item is what a resumed --output checks); InputError when one ends before the other."""
    while True:
        source, target = next(sources, None), next(targets, None)
        if source is None and target is None:
            return
        if source is None or target is None:
            longer, shorter = (FLAGS.tgt, FLAGS.src) if source is None else (FLAGS.src, FLAGS.tgt)
            number = (target or source)[0]
            raise InputError(
                f"{shorter} ends before line {number} of {longer}: --src and --tgt must have as many lines"
            )
        yield source[0], f"{source[1]}\t{target[1]}", source[1], target[1]


def input_name(path):
    return "<stdin>" if path == "-" else path


def input_progress(path, interactive):
    """The progress line of the input `path` (`cli.translate_progress`): on unless --noprogress,
    lines typed at a terminal, or translations printed on the terminal that stderr shows."""
    on_screen = FLAGS.output == "-" and progress_lines.is_terminal(sys.stdout)
    enabled = FLAGS.progress and not interactive and not (on_screen and progress_lines.is_terminal(sys.stderr))
    return InputProgress(count_lines(path) if enabled else None, enabled=enabled)


def output_settings():
    """The flags that shape the output, by name: what a resumed --output must have been written
    with (not those of where lines come from and go, or how many are batched)."""
    names = [flag.name for module in OUTPUT_FLAG_MODULES for flag in FLAGS.get_flags_for_module(module)]
    return {name: FLAGS[name].value for name in sorted(set(names) - NOT_OUTPUT_FLAGS)}


def export_conflict():
    """The error for search or sampling flags given with --export_dir, or None."""
    given = [f"--{name}" for name in SEARCH_FLAGS + ("checkpoint",) if FLAGS[name].present]
    given += [f"--{name}" for name in ("sampling_topk", "sampling_topp") if FLAGS[name].value is not None]
    return search_flags.export_dir_refusal(FLAGS.export_dir, given) if given else None


def run(write):
    """Translates (or scores) the input, calling `write(line)` for every output line."""
    from inference.loading import load_translator  # Loads Keras: after the flag checks.

    input_checks.refuse_nul_bytes(FLAGS.input, FLAGS.src, FLAGS.tgt, FLAGS.constraints)
    if FLAGS.export_dir:
        conflict = export_conflict()
        if conflict:
            raise InputError(conflict)
    else:
        search_note = search_flags.apply_run_search(FLAGS, FLAGS.model_dir)
        if search_note:
            print(search_note, file=sys.stderr)
    # At a terminal each line is translated alone: a batch of one, not one line padded to a full batch.
    interactive = FLAGS.input == "-" and not FLAGS.src and sys.stdin.isatty()
    translator = load_translator(
        FLAGS.model_dir or FLAGS.export_dir,
        kind="run" if FLAGS.model_dir else "export",
        batch_size=1 if interactive else FLAGS.batch_size,
        search=search_flags.search_from_flags(FLAGS),
        checkpoint=FLAGS.checkpoint if FLAGS.model_dir else None,
        quiet=True,
        target_language=FLAGS.target_language,
    )
    if FLAGS.export_dir and FLAGS.n_best is not None:
        beam = translator.search.beam_size if translator.search else None
        if beam is not None and FLAGS.n_best > beam:
            raise InputError(f"--n_best={FLAGS.n_best} is larger than the export's beam_size={beam}")
    if FLAGS.score:
        score_pairs(translator, write, interactive)
        return
    limit = translator.max_input_length
    name = input_name(FLAGS.input)
    lines = read_lines(FLAGS.input, name)
    constraint_lines = None
    if FLAGS.constraints:
        constraint_lines = read_lines(FLAGS.constraints, FLAGS.constraints)
        if FLAGS.input != "-":  # Both files: a different line count is refused before any output.
            check_line_counts(FLAGS.input, FLAGS.constraints)
    progress = input_progress(FLAGS.input, interactive)  # Its lines counted before stdin is read.
    # A resumed --output: the lines its killed run did are read past (and checked), not translated.
    lines, first_index, checkpoint = resumable_output.resumed(write, lines, name)
    for _ in range(first_index if constraint_lines is not None else 0):
        next(constraint_lines, None)
    progress.skip(first_index)
    split = splits_sentences()  # read once: an export's setting is in its files
    count_sentences = progress.enabled and split  # sentences/s beside lines/s
    for window in windows(lines, 1 if interactive else FLAGS.window):
        if FLAGS.prefix:
            numbers, sentences, prefixes = split_pairs(window, name, "target prefix")
        else:
            numbers, sentences, prefixes = [number for number, _ in window], [text for _, text in window], None
        constraints = None if constraint_lines is None else window_constraints(constraint_lines, numbers, name)
        window_lines = translation_lines(
            translator, numbers, sentences, first_index, name, limit, prefixes, constraints, split
        )
        for line in window_lines:
            write(line)
        first_index += len(window)
        checkpoint()
        progress.advance(len(window), sentence_count(sentences) if count_sentences else None)
    progress.finish()
    if constraint_lines is not None and next(constraint_lines, None) is not None:
        raise InputError(f"--constraints={FLAGS.constraints} has more lines than {name} ({first_index})")


def window_constraints(constraint_lines, numbers, name):
    """The phrases of each line of a window (numbered `numbers`), read from `constraint_lines`
    (`read_lines` of --constraints): tab-separated, none on an empty line; InputError where the
    file ends first."""
    constraints = []
    for number in numbers:
        line = next(constraint_lines, None)
        if line is None:
            raise InputError(
                f"--constraints={FLAGS.constraints} ends before line {number} of {name}: it needs one line (of "
                "tab-separated phrases, or empty) per input line"
            )
        constraints.append(line[1].split("\t") if line[1] else [])
    return constraints


def check_line_counts(input_path, constraints_path):
    """InputError unless the two files have as many lines (counted as `read_lines` counts them)."""
    counts = []
    for path, flag in ((input_path, "input"), (constraints_path, "constraints")):
        newlines, last = 0, b"\n"
        try:
            with open(path, "rb") as handle:
                for chunk in iter(lambda handle=handle: handle.read(1 << 20), b""):
                    newlines, last = newlines + chunk.count(b"\n"), chunk[-1:]
        except OSError as error:
            raise InputError(f"--{flag}={path}: cannot read: {error.strerror}") from None
        counts.append(newlines + (last != b"\n"))
    if counts[0] != counts[1]:
        raise InputError(
            f"--constraints={constraints_path} has {counts[1]} lines and --input={input_path} {counts[0]}: it needs "
            "one line (of tab-separated phrases, or empty) per input line"
        )


@contextlib.contextmanager
def output_lines(path):
    """`write(line)` into `path` ('-': stdout, flushed line by line; a file: a `ResumableOutput`,
    which goes on from a killed run's lines unless --noresume), flushed at the end of the block
    and closed after it; InputError where the file cannot be opened, WriteError where a line cannot
    be written (BrokenPipeError passes: the reader of stdout went away)."""
    if path != "-":
        output = ResumableOutput(path, output_settings(), resume=FLAGS.resume)
        try:
            yield output
            output.finish()
        finally:
            output.close()
        return

    def write(line):
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()  # A reader (or a person at a terminal) sees each line at once.
        except BrokenPipeError:
            raise
        except OSError as error:
            raise WriteError(path, error) from None

    yield write
    sys.stdout.flush()


def broken_pipe():
    """The reader of stdout has gone: point stdout at /dev/null so that the interpreter's final
    flush does not fail again, and end quietly with the shell's SIGPIPE status."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE
