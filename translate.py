"""Translates text from stdin or a file to stdout or a file, one line per line, in input order.

    echo "Open the file." | python translate.py --model_dir=runs/demo
    python translate.py --export_dir=runs/demo/export --input=doc.en --output=doc.de
    python translate.py --model_dir=runs/demo --checkpoint=last < doc.en      # the newest weights, not the best
    python translate.py --model_dir=runs/demo --n_best=4 < doc.en            # i ||| hypothesis ||| score
    python translate.py --model_dir=runs/demo --score < pairs.tsv             # source<TAB>target lines
    python translate.py --model_dir=runs/demo --score --src=doc.en --tgt=doc.de
    python translate.py --model_dir=runs/de-en --sampling_topk=0 --seed=1 < mono.de   # back-translation
    python translate.py --model_dir=runs/de-en --sampling_topp=0.9 --seed=1 < mono.de # nucleus sampling
    python translate.py --model_dir=runs/demo --prefix < pairs.tsv            # source<TAB>target prefix lines
    python translate.py --model_dir=runs/demo --constraints=terms.tsv < doc.en  # tab-separated phrases per line
    python translate.py --model_dir=runs/demo --alignments < doc.en           # translation<TAB>0-0 1-2 2-1
    python translate.py --model_dir=runs/a,runs/b < doc.en                    # an ensemble of two runs

Piped input is read in windows of --window lines, sorted by length and batched; at a terminal every
line is answered as soon as it is entered. Only translations (or scores) go to stdout; what went
wrong with a line (invalid UTF-8, a line cut to the maximum input length) goes to stderr with its
line number. Exit status: 0 done, 2 bad flags or input, 1 a failure during the work (an output not
written), 130 interrupted (Ctrl-C), 141 the reader of stdout went away (as `head` does; what it read
is complete).
"""

import os
import re
import signal
import sys

from absl import flags

from cli import search_flags
from cli.search_flags import SEARCH_FLAGS
from common import quiet_logs
from common.errors import BAD_INPUT_STATUS, UserError, run_tool
from common.write_errors import WriteError
from inference.protocol import AlignmentConfig, ConstraintError, SteeringError

FLAGS = flags.FLAGS
EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = BAD_INPUT_STATUS, 130, 141

search_flags.define_model_and_search_flags()
search_flags.define_sampling_flags()
flags.adopt_module_key_flags(search_flags)  # listed by --help as this tool's own
flags.DEFINE_string("input", "-", "Sentences to translate, one per line ('-': stdin).")
flags.DEFINE_string("output", "-", "Where the translations go, one per line ('-': stdout).")
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


class InputError(UserError, ValueError):
    """Bad input, named by file and line."""


@flags.multi_flags_validator(
    ["n_best", "beam_size", "score", "prefix", "sampling_topk", "sampling_topp"]
    + ["src", "tgt", "input", "export_dir", "alignments", "alignment_layer", "alignment_head", "constraints"]
    + ["tag", "with_scores"],
    message="",
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


TAG_PATTERN = re.compile(r"[A-Za-z0-9_]+")


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


def translation_lines(translator, numbers, sentences, first_index, name, limit, prefixes=None, constraints=None):
    """The output lines for one window of input lines (with `prefixes`, their target prefixes, and
    `constraints`, their phrases); InputError for a prefix or phrase the search cannot follow,
    before any line of the window is translated."""
    alignments = AlignmentConfig(FLAGS.alignment_layer, FLAGS.alignment_head) if FLAGS.alignments else False
    try:
        texts, scores, *aligned = translator.translate(
            sentences,
            n_best=FLAGS.n_best,
            keys=range(first_index, first_index + len(sentences)),
            prefixes=prefixes,
            constraints=constraints,
            alignments=alignments,
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
    aligned = aligned[0] if aligned else [None] * len(texts)
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


def scored_pairs(window_size):
    """Windows of `(numbers, sources, targets)` from TSV input or --src/--tgt."""
    if not FLAGS.src:
        name = input_name(FLAGS.input)
        for window in windows(read_lines(FLAGS.input, name), window_size):
            yield split_pairs(window, name)
        return
    for window in windows(
        aligned_pairs(read_lines(FLAGS.src, FLAGS.src), read_lines(FLAGS.tgt, FLAGS.tgt)), window_size
    ):
        yield [p[0] for p in window], [p[1] for p in window], [p[2] for p in window]


def aligned_pairs(sources, targets):
    """`(number, source, target)` from two line streams read together; InputError when one
    ends before the other."""
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
        yield source[0], source[1], target[1]


def input_name(path):
    return "<stdin>" if path == "-" else path


def export_conflict():
    """The error for search or sampling flags given with --export_dir, or None."""
    given = [f"--{name}" for name in SEARCH_FLAGS + ("checkpoint",) if FLAGS[name].present]
    given += [f"--{name}" for name in ("sampling_topk", "sampling_topp") if FLAGS[name].value is not None]
    return search_flags.export_dir_refusal(FLAGS.export_dir, given) if given else None


def run(write):
    """Translates (or scores) the input, calling `write(line)` for every output line."""
    from inference.loading import load_translator  # Loads Keras: after the flag checks.

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
    limit = translator.max_input_length
    if FLAGS.score:
        for numbers, sources, targets in scored_pairs(1 if interactive else FLAGS.window):
            results = translator.score(sources, targets)
            report_truncated(translator, numbers, input_name(FLAGS.input) if not FLAGS.src else FLAGS.src, limit)
            for result in results:
                write(f"{result.log_prob:.6f}\t{result.average:.6f}\t{result.perplexity:.4f}\t{result.tokens}")
        return
    name = input_name(FLAGS.input)
    lines = read_lines(FLAGS.input, name)
    constraint_lines = None
    if FLAGS.constraints:
        constraint_lines = read_lines(FLAGS.constraints, FLAGS.constraints)
        if FLAGS.input != "-":  # Both files: a different line count is refused before any output.
            check_line_counts(FLAGS.input, FLAGS.constraints)
    first_index = 0
    for window in windows(lines, 1 if interactive else FLAGS.window):
        if FLAGS.prefix:
            numbers, sentences, prefixes = split_pairs(window, name, "target prefix")
        else:
            numbers, sentences, prefixes = [number for number, _ in window], [text for _, text in window], None
        constraints = None if constraint_lines is None else window_constraints(constraint_lines, numbers, name)
        for line in translation_lines(translator, numbers, sentences, first_index, name, limit, prefixes, constraints):
            write(line)
        first_index += len(window)
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


def main(argv):
    del argv
    quiet_logs.quiet_tool_output()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    output = sys.stdout if FLAGS.output == "-" else None
    try:
        if output is None:
            try:
                output = open(FLAGS.output, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
            except OSError as error:
                raise InputError(f"--output={FLAGS.output}: cannot write: {error.strerror}") from error

        def write(line):
            try:
                output.write(line + "\n")
                if output is sys.stdout:
                    output.flush()  # A reader (or a person at a terminal) sees each line at once.
            except BrokenPipeError:
                raise
            except OSError as error:
                raise WriteError(FLAGS.output, error) from None

        run(write)
        output.flush()
    except BrokenPipeError:
        return _broken_pipe()
    except UserError as error:
        print(f"translate.py: error: {error}", file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        print("translate.py: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if output is not None and output is not sys.stdout:
            output.close()
    return 0


def _broken_pipe():
    """The reader of stdout has gone: point stdout at /dev/null so that the interpreter's final
    flush does not fail again, and end quietly with the shell's SIGPIPE status."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_tool(main, "translate.py")
