"""What the export tests share: the export settings and sentences, runs of fresh Python processes (one
of them running saved_model_cli), and the ops a SavedModel must and must not hold."""

import json
import os
import subprocess
import sys

from tensorflow.core.protobuf import saved_model_pb2

from inference.segmentation import Segments, segment
from tests.helpers import REPO_ROOT, run_logged

# Sentences of one line, and the length rule's stage 2 (export.graph_documents.LENGTH_PASSES).
LENGTH_PASSES = 2


def run_export(*arguments, timeout=300, **options):
    """`python -m export *arguments` in a new process from the repository root, its output into
    files (`run_logged`: the CompletedProcess, its text output checked plain); `options` go to
    subprocess.run (env, preexec_fn)."""
    return run_logged(
        [sys.executable, "-m", "export", *arguments], cwd=REPO_ROOT, text=True, timeout=timeout, **options
    )


def padded(rows, fill, width=None):
    """Lists `rows` each filled with `fill` to `width` (default: the longest row's length)."""
    width = max(len(row) for row in rows) if width is None else width
    return [list(row) + [fill] * (width - len(row)) for row in rows]


SENTENCES = [
    "Open the file.",
    "Click OK to save your changes.",
    "The selected cells are copied to the clipboard.",
    "Choose Format - Cells and click the Numbers tab to change the number format of the selected cells.",
    "Select the text that you want to print.",
    "Help",
    "If you do not want to print the comments, select the option None in the Comments list box.",
]


# What the int8 export translates with saved_model_cli in a fresh process, against the Python
# translator (tests/export/test_fresh_process.py): the first test-split sentences, then an empty one
# and one beyond the maximum input length (the cut).
COMPARED_SENTENCES = 50
EDGE_SENTENCES = ["", "Click " * 60]
# The Python translator's batch for them: more than their pieces (a long sentence is split in
# several), so that its search is traced for one shape.
COMPARED_BATCH_SIZE = 128


def compared_sentences(summary):
    """The sentences both exports translate, from the test split of the run `summary` describes."""
    from evaluation import reference_sets

    sources, _ = reference_sets.read_tsv_pairs(summary["corpus"]["test"])
    return sources[:COMPARED_SENTENCES] + EDGE_SENTENCES


def run_fresh_python(code, *args, project=False, env=None, timeout=300):
    """Runs `code` in a new interpreter and returns the JSON object it prints last.

    With `project=False` the interpreter is isolated (`-I`, started in `/`): the repository is not
    importable, so the code sees only installed packages. With `project=True` the repository is on
    PYTHONPATH (for code that builds models under another Keras backend).
    """
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    environment.pop("PYTHONPATH", None)
    command = [sys.executable, "-I", "-c", code]
    if project:
        environment["PYTHONPATH"] = REPO_ROOT
        command = [sys.executable, "-c", code]
    result = subprocess.run(
        command + [str(arg) for arg in args], cwd="/", env=environment, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise AssertionError(f"subprocess failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# tensorflow-text ops that TensorFlow Serving links in (since its 2.2 release).
# tensorflow-text's ops the export uses: TensorFlow Serving links tensorflow-text's op library in
# (its SUPPORTED_TENSORFLOW_OPS), so the model server runs them.
TEXT_OPS = {
    "SentencepieceOp",
    "SentencepieceTokenizeOp",
    "SentencepieceDetokenizeOp",
    "SentencepieceIdToStringOp",
    "RegexSplitWithOffsets",
}
# Registered by TensorFlow itself but not allowed: Python callbacks, and XLA compilation.
FORBIDDEN_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc", "XlaLaunch", "_XlaCompile", "_XlaRun"}


def saved_model_ops(path):
    """Every op type of the graph and of its function library, and the functions' XLA attributes."""
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as handle:
        saved_model.ParseFromString(handle.read())
    op_types, jit_functions = set(), []
    for meta_graph in saved_model.meta_graphs:
        graph = meta_graph.graph_def
        op_types.update(node.op for node in graph.node)
        for function in graph.library.function:
            op_types.update(node.op for node in function.node_def)
            if function.attr["_XlaMustCompile"].b:
                jit_functions.append(function.signature.name)
            for node in function.node_def:
                if node.attr["_XlaMustCompile"].b:
                    jit_functions.append(f"{function.signature.name}/{node.name}")
    return op_types, jit_functions


# In an isolated interpreter: which of the op types argv[1]'s "op_types" names TensorFlow alone does
# not register (before tensorflow_text is imported); then its "saved_model_cli" request, `[SavedModel
# path, .npy file of sentences, output folder]`, run as docs/serving.md runs it (tensorflow_text
# imported first, then `saved_model_cli run` on serving_default: TensorFlow Serving's session
# loader), its printed output kept; and which of the project's modules the process imported (none).
FRESH_PROCESS = """
import contextlib, io, json, sys
import tensorflow
from tensorflow.python.framework import op_def_registry
assert "tensorflow_text" not in sys.modules
request = json.loads(sys.argv[1])
unknown_to_tensorflow = sorted(n for n in request["op_types"] if op_def_registry.get(n) is None)
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
from tensorflow.python.tools import saved_model_cli
path, inputs, outdir = request["saved_model_cli"]
sys.argv = ["saved_model_cli", "run", "--dir", path, "--tag_set", "serve", "--signature_def", "serving_default",
            "--inputs", f"inputs={inputs}", "--outdir", outdir]
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    try:
        saved_model_cli.main()
    except SystemExit as exit:
        assert not exit.code, exit.code
project = sorted(m for m in sys.modules if m.split(".")[0] in ("common", "models", "data", "inference", "export", "evaluation", "training"))
print(json.dumps({"unknown_to_tensorflow": unknown_to_tensorflow, "saved_model_cli": printed.getvalue(),
                  "project_modules": project}))
"""


def length_rule(text, count, limit, tags=0):
    """The `Segments` a splitting export translates of `text`, in Python (docs/translating.md,
    "Documents"): its sentences, each of n > `limit` source ids (`count(pieces) -> [n]`, `tags`
    target-language tag ids included) cut again by max(1, C * (limit - 1 - tags) * 9 // ((n - 1 -
    tags) * 10)) characters, twice."""
    pieces, separators = segment(text)
    for _ in range(LENGTH_PASSES):
        cut, between = [], []
        for piece, separator, n in zip(pieces, separators, count(pieces) if pieces else []):
            parts, inner = [piece], ["", ""]
            if n > limit:
                parts, inner = segment(piece, max(1, len(piece) * (limit - 1 - tags) * 9 // ((n - 1 - tags) * 10)))
            cut += parts
            between += [separator] + inner[1:-1]
        pieces, separators = cut, between + [separators[-1]]
    return Segments(pieces, separators)


def composed_documents(align, texts, count, limit):
    """What the `align` signature must give for `texts`, composed in Python: each text's pieces
    (`length_rule`) translated one by one by `align` (one piece is one sentence), joined, scores
    summed, confidence over all tokens, alignments offset by the words (`str.split`) before."""
    import numpy as np
    import tensorflow as tf

    documents = [length_rule(text, count, limit) for text in texts]
    pieces = [piece for document in documents for piece in document.pieces]
    outputs = align(inputs=tf.constant(pieces, tf.string)) if pieces else None
    results, at = [], 0
    for document in documents:
        rows = range(at, at + len(document.pieces))
        at += len(document.pieces)
        texts = [outputs["translations"][row].numpy().decode("utf-8") for row in rows]
        counts = [int(outputs["token_counts"][row]) for row in rows]
        token_scores = [float(x) for row, n in zip(rows, counts) for x in outputs["token_scores"][row][:n].numpy()]
        links, source_words, target_words = [], 0, 0
        for row, piece, text in zip(rows, document.pieces, texts):
            for link in outputs["alignments"][row].numpy().decode("utf-8").split():
                source, target = map(int, link.split("-"))
                links.append(f"{source + source_words}-{target + target_words}")
            source_words, target_words = source_words + len(piece.split()), target_words + len(text.split())
        results.append(
            dict(
                translations=document.join(texts),
                scores=sum(float(outputs["scores"][row]) for row in rows),
                confidence=float(np.exp(np.mean(token_scores))) if token_scores else 1.0,
                alignments=" ".join(links),
                token_scores=token_scores,
            )
        )
    return results
