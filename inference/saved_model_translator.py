"""Translating with a SavedModel written by `export/`: its `serving_default` signature maps
`inputs` string `[batch]` to `translations` string `[batch]` and `scores` float32 `[batch]`, with
tokenization, search and detokenization inside the graph; `n_best`, `prefix` (target prefixes),
`constrain` (terminology constraints), `align` (word alignments, token scores) and `markup` (inline
tags kept) do the same with more, and `score` scores given translations (the signatures:
docs/serving.md). An export made with `split_sentences` (the default) translates the inputs of
`serving_default`, `align` and `markup` sentence by sentence in its graph; the others take each
input whole."""

import os

import tensorflow as tf

from common.errors import UserError
from common.json_files import read_json
from common.progress import ProgressLine
from data import multilingual
from data.tokenizer import Tokenizer
from inference import documents as documents_step
from inference import segmentation, steering
from inference.batching import translate_in_order
from inference.protocol import (
    DEFAULT_ALIGNMENT,
    AlignmentConfig,
    AlignmentError,
    ConstraintError,
    DocumentError,
    PairScore,
    TextTranslator,
    Translation,
)
from models.presets import decoder_layers
from models.search_config import DEFAULT_SEARCH, SEARCH_SETTINGS, SearchConfig, SearchConfigError

SIGNATURE = "serving_default"
# What `export.exporter` writes beside the graph.
EXPORT_CONFIG = os.path.join("assets.extra", "export_config.json")
VOCABULARY = os.path.join("assets", "spm.model")
SOURCE_VOCABULARY = os.path.join("assets", "spm.source.model")  # With separate vocabularies only.


class ExportDirError(UserError, RuntimeError):
    """An export_dir without a loadable SavedModel, or without the signature a request needs (the
    message names the path)."""


class ExportRequestError(UserError, ValueError):
    """A request that no signature of an export serves (n-best lists of prefixed or constrained
    translations, prefixes and constraints together); the message says what to use instead."""


def resolve_saved_model(export_dir):
    """The SavedModel directory: `export_dir` itself if it holds `saved_model.pb`, else its
    highest integer version subdirectory (the layout TensorFlow Serving watches)."""
    if not os.path.isdir(export_dir):
        raise ExportDirError(f"--export_dir {export_dir!r} is not a directory")
    if os.path.exists(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    versions = sorted(int(name) for name in os.listdir(export_dir) if name.isdigit())
    for version in reversed(versions):
        candidate = os.path.join(export_dir, str(version))
        if os.path.exists(os.path.join(candidate, "saved_model.pb")):
            return candidate
    raise ExportDirError(
        f"{export_dir} holds no SavedModel: no saved_model.pb in it nor in an integer version "
        "subdirectory (write one with `python -m export`)"
    )


def read_export_config(saved_model_path):
    """`assets.extra/export_config.json` of a SavedModel directory (the training run's config.json
    sections plus an "export" section of the export settings), or None if it has none."""
    return read_json(os.path.join(saved_model_path, EXPORT_CONFIG), ExportDirError)


def export_settings(config):
    """The "export" section of an export_config.json (`config`, parsed; {} for none), with the
    settings an older export did not record filled in as it has them built in: a search setting
    added later defaults to off (an export written before the repetition guard has
    no_repeat_ngram_size=0), and one written before documents takes each input whole
    (split_sentences=False)."""
    settings = (config or {}).get("export", {})
    if settings:
        defaults = {name: value for name, value in DEFAULT_SEARCH.search_settings().items() if value is not None}
        settings = {**defaults, "split_sentences": False, **settings}
    return settings


def describe_search_settings(export_dir):
    """The search settings built into the export, e.g. "beam_size=4, alpha=0.6, ... (from
    <path>/assets.extra/export_config.json)", for messages; says so when the export lacks them."""
    path = resolve_saved_model(export_dir)
    settings = export_settings(read_export_config(path))
    known = [f"{name}={settings[name]}" for name in SEARCH_SETTINGS if name in settings]
    if not known:
        return f"{path} records no export settings (no {EXPORT_CONFIG})"
    return f"{', '.join(known)} (from {os.path.join(path, EXPORT_CONFIG)})"


class SavedModelTranslator(TextTranslator):
    """Calls an exported model's `serving_default` signature in batches of `batch_size` (or its
    `n_best`, `prefix`, `constrain` or `align` signature, for what `translate` is asked).

    Sentences are sorted by length before batching (the graph pads a batch to its longest
    sentence) and returned in input order. Empty lines are sent as they are (the export translates
    a sentence with no tokens to "").

    When the export holds its vocabulary (`assets/spm.model`) and its settings
    (`assets.extra/export_config.json`), as `export/` writes them, `translate` also records which
    inputs had no tokens (`empty_indices`) and which were longer than the export's
    `max_input_length` and so were cut by the graph (`truncated_indices`), as `Translator` does,
    and `search` is the `SearchConfig` built into the graph (None when the export records none).
    """

    def __init__(self, export_dir, batch_size=32, target_language=None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, received {batch_size}")
        self.path = resolve_saved_model(export_dir)
        config = read_export_config(self.path) or {}
        # A multilingual export needs its target language: refused before the load, which takes seconds.
        tag = multilingual.target_tag(config.get("data", {}), target_language, self.path)
        try:
            loaded = tf.saved_model.load(self.path)
        except (ValueError, OSError, tf.errors.OpError) as error:
            raise ExportDirError(
                f"{self.path} could not be loaded as a SavedModel (is its saved_model.pb empty or corrupt?): "
                f"{type(error).__name__}: {error}; export it again with `python -m export`"
            ) from error
        if SIGNATURE not in loaded.signatures:
            raise ExportDirError(f"{self.path} has no {SIGNATURE!r} signature (found {sorted(loaded.signatures)})")
        self._loaded = loaded  # Keeps the variables alive.
        self._signature = loaded.signatures[SIGNATURE]
        self.batch_size = batch_size
        self.settings = export_settings(config)
        self._model_config = config.get("model", {})
        self.max_input_length = self.settings.get("max_input_length")
        self.search = _recorded_search(self.settings, self.path)
        vocabulary = os.path.join(self.path, VOCABULARY)
        self.tokenizer = Tokenizer.from_file(vocabulary) if os.path.exists(vocabulary) else None
        source_vocabulary = os.path.join(self.path, SOURCE_VOCABULARY)
        self.source_tokenizer = (
            Tokenizer.from_file(source_vocabulary) if os.path.exists(source_vocabulary) else self.tokenizer
        )
        self._languages = {}  # The target_language input of a multilingual export's signatures.
        self._tag_length = 0  # Its tag's tokens before each sentence's.
        if tag is not None:
            self._languages = {"target_language": target_language}
            self._tag_length = (
                len(multilingual.tag_ids(self.source_tokenizer, tag)) if self.source_tokenizer is not None else 0
            )
        self.truncated_indices = []
        self.empty_indices = []
        self.unmet_indices = []

    def _signature_named(self, name, what):
        """The export's signature `name`; ExportDirError for an export of other signatures
        (`python -m export --signatures`) or written before it existed (`what`: what it serves)."""
        if name not in self._loaded.signatures:
            if "signatures" in self.settings:
                raise ExportDirError(
                    f"{self.path} has no {name!r} signature, which {what} need: it was exported with "
                    f"--signatures={','.join(self.settings['signatures'])}; export it again with {name} among them"
                )
            raise ExportDirError(
                f"{self.path} has no {name!r} signature (found {sorted(self._loaded.signatures)}): it was "
                f"written before {what} were exported; export it again with `python -m export`"
            )
        return self._loaded.signatures[name]

    def _check_search(self, search):
        """Raises ValueError for a search other than the one built into the export (a setting it
        records with another value, or sampling); a `max_input_length` of None is the export's."""
        if search.sampling is not None:
            raise ValueError("sampling needs a run directory (--model_dir): an export has its search built in")
        for name, value in search.search_settings().items():
            if value is not None and name in self.settings and value != self.settings[name]:
                raise ValueError(
                    f"{name}={value} differs from the export's built-in {name}={self.settings[name]} "
                    f"({describe_search_settings(self.path)}); export again to change it"
                )

    def translate(
        self,
        sentences,
        progress=False,
        *,
        search=None,
        n_best=None,
        keys=None,
        prefixes=None,
        constraints=None,
        alignments=False,
        split_sentences=True,
        markup=False,
    ):
        """`TextTranslator.translate` through the export's signatures: `n_best`, `prefix`,
        `constrain`, `align` or `markup` for what is asked (one of them per call), else
        `serving_default`. `split_sentences` must be the export's setting (its graph splits, or
        not); `n_best`, prefixes and constraints, whose signatures take each input whole, need one
        sentence per input while splitting.

        The search is the export's: a `search` given must hold its settings, and sampling is
        refused. Resets `truncated_indices` and `empty_indices` (left empty without the export's
        vocabulary) and `unmet_indices` (sentences whose phrases `constrain` could not place).

        Raises:
            PrefixError, ConstraintError: as `Translator` raises them, before any call of the graph.
            AlignmentError: another attention than the export's, or alignments with `n_best`,
                `prefixes` or `constraints`.
            ExportRequestError: `prefixes` or `constraints` with `n_best`, or together.
            ExportDirError: an export written before the signature that the request needs.
            ExportRequestError: `split_sentences` other than the export's; markup with n-best
                lists, prefixes, constraints or alignments.
            DocumentError: n-best lists, prefixes or constraints for an input of several sentences
                while splitting.
        """
        del keys  # Searches do not draw; keys only matter to sampling.
        if search is not None:
            self._check_search(search)
        beam = self.settings.get("beam_size")
        if n_best is not None and (n_best < 1 or (beam is not None and n_best > beam)):
            raise ValueError(f"n_best must be in [1, beam_size={beam}] (the export's beam), received {n_best}")
        sentences = list(sentences)
        self.unmet_indices = []
        prefixes = steering.prefix_list(prefixes, len(sentences))
        constraints = steering.constraint_lists(constraints, len(sentences))
        whole = n_best is not None or prefixes is not None or constraints is not None
        by_prefix = self._check_documents(split_sentences, whole or not (markup or alignments))
        if markup:
            signature = self._markup_signature(n_best, prefixes, constraints, alignments)
        else:
            signature = self._steered_signature(n_best, prefixes, constraints, alignments)
        if by_prefix and not whole:  # the prefix signature, without prefixes, takes each input whole
            signature = self._signature_named("prefix", "target prefixes")
        given_prefixes = [""] * len(sentences) if by_prefix and not whole else prefixes
        if split_sentences and whole:
            self._check_one_sentence(sentences, n_best, prefixes)
        self.truncated_indices, self.empty_indices = [], []
        if self.tokenizer is not None and sentences:
            self._check_steering(sentences, prefixes, constraints)
            if split_sentences and not whole and self.max_input_length:
                self.truncated_indices = self._still_too_long(sentences)
        unmet = []
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        aligned = [""] * len(sentences)

        def translate_batch(indices):
            inputs = {
                "inputs": tf.constant([sentences[i] for i in indices], tf.string),
                **self._language_inputs(indices),
            }
            if given_prefixes is not None:
                inputs["prefixes"] = tf.constant([given_prefixes[i] for i in indices], tf.string)
            if constraints is not None:
                inputs["constraints"] = tf.constant(["\t".join(constraints[i]) for i in indices], tf.string)
            outputs = signature(**inputs)
            texts, scores = outputs["translations"].numpy(), outputs["scores"].numpy()
            if alignments:
                for index, alignment in zip(indices, outputs["alignments"].numpy()):
                    aligned[index] = alignment.decode("utf-8")
            if constraints is not None:
                unmet.extend(index for index, met in zip(indices, outputs["constraints_met"].numpy()) if not met)
            return (texts, scores) if n_best is None else (texts[:, :n_best], scores[:, :n_best])

        translations, scores = translate_in_order(
            len(sentences), order, self.batch_size, translate_batch, progress, n_best
        )
        self.unmet_indices = sorted(unmet)
        return (translations, scores, aligned) if alignments else (translations, scores)

    def translate_lines(
        self,
        lines,
        progress=False,
        *,
        search=None,
        keys=None,
        prefixes=None,
        alignments=False,
        split_sentences=True,
        markup=False,
    ):
        """`TextTranslator.translate_lines` through the export's `align` signature (`markup` with
        `markup`), which give each line's confidence, tokens and token scores.

        Raises:
            ExportRequestError: prefixes (the `prefix` signature gives no token scores), alignments
                with markup, `split_sentences` other than the export's.
            ExportDirError: an export written before these signatures or their outputs.
            AlignmentError: as `translate`.
        """
        del keys  # Searches do not draw.
        if search is not None:
            self._check_search(search)
        lines = list(lines)
        if steering.prefix_list(prefixes, len(lines)) is not None:
            raise ExportRequestError(
                "translate_lines with prefixes: the export's prefix signature gives no token scores; use "
                "translate(prefixes=...) or a run directory (--model_dir)"
            )
        self._check_documents(split_sentences)
        if markup:
            signature = self._markup_signature(None, None, None, alignments)
        else:
            signature = self._align_signature(alignments or True, None, None)
        missing = {"confidence", "token_scores", "token_counts", "tokens"} - set(signature.structured_outputs)
        if missing:
            raise ExportDirError(
                f"{self.path} gives no {', '.join(sorted(missing))} (written before confidences and token scores were "
                "exported); export it again with `python -m export`"
            )
        self.unmet_indices, self.empty_indices, self.truncated_indices = [], [], []
        if self.tokenizer is not None and lines:
            self.empty_indices = [index for index, length in enumerate(self._source_lengths(lines)) if length == 1]
            if self.max_input_length:
                self.truncated_indices = self._still_too_long(lines) if split_sentences else self._too_long(lines)
        records = [None] * len(lines)

        def translate_batch(indices):
            inputs = tf.constant([lines[i] for i in indices], tf.string)
            outputs = {
                name: value.numpy()
                for name, value in signature(inputs=inputs, **self._language_inputs(indices)).items()
            }
            for row, index in enumerate(indices):
                records[index] = _translation(outputs, row, alignments and not markup)
            return outputs["translations"], outputs["scores"]

        order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
        translate_in_order(len(lines), order, self.batch_size, translate_batch, progress)
        return records

    def _check_documents(self, split_sentences, whole_served=False):
        """Whether a request to take each input whole goes to another signature than its own, of an
        export whose graph splits sentences (`whole_served`: one it serves that way, plain
        translations by `prefix` without prefixes, or n-best lists, prefixes and constraints, whose
        signatures take inputs whole). Raises ExportRequestError where the export cannot serve
        `split_sentences` as asked."""
        built = bool(self.settings.get("split_sentences", False))
        if bool(split_sentences) == built:
            return False
        recorded = f"split_sentences={str(built).lower()} in {os.path.join(self.path, EXPORT_CONFIG)}"
        if built and whole_served:
            return True
        if built:
            raise ExportRequestError(
                f"--nosplit_sentences (split_sentences=False) with alignments, markup or token scores: {self.path} "
                f"splits each input into sentences in its align and markup signatures ({recorded}); leave "
                "--nosplit_sentences out, or export again with `python -m export --nosplit_sentences`"
            )
        raise ExportRequestError(
            f"splitting sentences (split_sentences=True, the default): {self.path} translates each input whole "
            f"({recorded}: exported with --nosplit_sentences or before sentence splitting); pass "
            "--nosplit_sentences (split_sentences=False), or export it again without --nosplit_sentences"
        )

    def _check_one_sentence(self, sentences, n_best, prefixes):
        """Raises DocumentError for the first input of several sentences (`inference.segmentation`):
        the n_best, prefix and constrain signatures take each input whole."""
        option = "n_best" if n_best is not None else "prefix" if prefixes is not None else "constraints"
        for index, sentence in enumerate(sentences):
            count = len(segmentation.segment(sentence).pieces)
            if count > 1:
                raise DocumentError(
                    f"--{option} needs one sentence per line; this line has {count} sentences; pass "
                    "--nosplit_sentences (split_sentences=False) or one sentence per line",
                    index,
                )

    def _markup_signature(self, n_best, prefixes, constraints, alignments):
        """The `markup` signature; ExportRequestError for what it does not take with markup."""
        given = (("n-best lists", n_best), ("prefixes", prefixes), ("constraints", constraints))
        others = [name for name, value in given if value is not None] + (["alignments"] if alignments else [])
        if others:
            raise ExportRequestError(
                f"markup with {others[0]}: the export's markup signature gives the best translation without "
                f"{others[0]}; use a run directory (--model_dir)"
            )
        return self._signature_named("markup", "inline tags and placeholders (markup)")

    def _too_long(self, lines):
        """The positions of `lines` over `max_input_length` source tokens, taken whole."""
        return [index for index, length in enumerate(self._source_lengths(lines)) if length > self.max_input_length]

    def _still_too_long(self, lines):
        """The positions of `lines` with a piece that the graph still cuts to `max_input_length`
        after the length rule (`inference.documents.split_lines`, as `export.graph_documents`)."""
        lengths = lambda texts: self._source_lengths(texts) if texts else []  # noqa: E731
        documents = documents_step.split_lines(lines, lengths, self.max_input_length, self._tag_length)
        counts = iter(lengths([piece for document in documents for piece in document.pieces]))
        flagged = [any(next(counts) > self.max_input_length for _ in document.pieces) for document in documents]
        return [index for index, too_long in enumerate(flagged) if too_long]

    def _language_inputs(self, indices):
        """The target_language input of a multilingual export's signatures for these sentences ({}
        for a bilingual export)."""
        return {name: tf.constant([value] * len(indices), tf.string) for name, value in self._languages.items()}

    def _source_lengths(self, sentences):
        """Each sentence's source tokens as the graph counts them, EOS included (a multilingual
        export's tag included, before a sentence that has tokens)."""
        rows = self.source_tokenizer.tokenize(sentences).to_list()
        return [len(row) + 1 + (self._tag_length if row else 0) for row in rows]

    def _steered_signature(self, n_best, prefixes, constraints, alignments):
        """The signature a request goes to: `align`, `prefix`, `constrain`, `n_best` or the default.

        Raises:
            ExportRequestError: two of prefixes, constraints and n-best lists together.
            AlignmentError, ExportDirError: as `translate`.
        """
        steering = [name for name, given in (("prefixes", prefixes), ("constraints", constraints)) if given is not None]
        if alignments:
            if constraints is not None:
                raise AlignmentError(
                    "word alignments of constrained translations: the export's align signature searches without "
                    "constraints; use a run directory (--model_dir)"
                )
            return self._align_signature(alignments, n_best, prefixes)
        if steering and n_best is not None:
            raise ExportRequestError(
                f"n-best lists with {steering[0]}: the export's {steering[0]} signature returns the best translation "
                "only; use a run directory (--model_dir)"
            )
        if len(steering) == 2:
            raise ExportRequestError(
                "prefixes and constraints together: no signature of the export takes both; use a run directory "
                "(--model_dir)"
            )
        if prefixes is not None:
            return self._signature_named("prefix", "target prefixes")
        if constraints is not None:
            return self._signature_named("constrain", "terminology constraints")
        return self._signature if n_best is None else self._signature_named("n_best", "n-best lists")

    def _check_steering(self, sentences, prefixes, constraints):
        """Records `empty_indices` and `truncated_indices`, and raises PrefixError or
        ConstraintError as `Translator` does (where the export records its settings; else the
        graph's checks refuse the request)."""
        lengths = self._source_lengths(sentences)
        if self.max_input_length:
            # The graph keeps max_input_length - 1 tokens and appends EOS.
            self.truncated_indices = [index for index, length in enumerate(lengths) if length > self.max_input_length]
            lengths = [min(length, self.max_input_length) for length in lengths]
        extra = self.settings.get("max_extra_length")
        if extra is not None and self.max_input_length:
            for index, phrases in enumerate(constraints or []):
                if any("\t" in phrase for phrase in phrases):
                    raise ConstraintError("a phrase holds a tab, which separates the phrases of a line", index)
            prefix_rows = steering.prefix_pieces(self.tokenizer, prefixes, lengths, extra)
            phrase_rows = steering.constraint_pieces(self.tokenizer, constraints, lengths, extra)
        else:
            prefix_rows = [None if prefixes is None else prefixes[i] for i in range(len(sentences))]
            phrase_rows = [None if constraints is None else constraints[i] for i in range(len(sentences))]
        self.empty_indices = [
            index
            for index, length in enumerate(lengths)
            if length == 1 and not prefix_rows[index] and not phrase_rows[index]
        ]

    def _align_signature(self, alignments, n_best, prefixes):
        """The `align` signature, if it reads the attention `alignments` asks for.

        Raises:
            AlignmentError: another attention than the export's (or one the model does not have),
                or alignments with `n_best` or `prefixes`.
            ExportDirError: an export written before the `align` signature.
        """
        if alignments is not True and not isinstance(alignments, AlignmentConfig):
            raise ValueError(f"alignments must be True or an AlignmentConfig, received {alignments!r}")
        if n_best is not None:
            raise AlignmentError(
                "word alignments of n-best lists: the export's align signature aligns the best translation only; "
                "use a run directory (--model_dir)"
            )
        if prefixes is not None:
            raise AlignmentError(
                "word alignments of prefixed translations: the export's align signature searches without prefixes; "
                "use a run directory (--model_dir)"
            )
        signature = self._signature_named("align", "word alignments")
        config = DEFAULT_ALIGNMENT if alignments is True else alignments
        if config == DEFAULT_ALIGNMENT:
            return signature
        built = (self.settings.get("alignment_layer"), self.settings.get("alignment_head"))
        sizes = (decoder_layers(self._model_config), self._model_config.get("num_heads"))
        if "alignment_layer" in self.settings and None not in sizes and config.resolve(*sizes) == built:
            return signature
        reads = "the attention of the export's defaults"
        if "alignment_layer" in self.settings:
            heads = "the mean over heads" if built[1] is None else f"head {built[1]}"
            reads = f"decoder layer {built[0]}, {heads}"
        raise AlignmentError(
            f"alignments={config} differs from the attention the export's align signature reads ({reads}, built "
            "in at export); use a run directory (--model_dir) to read another"
        )

    def score(self, sources, targets, progress=False):
        """Forced decoding through the export's `score` signature: a `PairScore` per pair."""
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError(f"score needs one target per source: {len(sources)} sources, {len(targets)} targets")
        signature = self._signature_named("score", "scores of given translations")
        self.truncated_indices = []
        if self.tokenizer is not None and self.max_input_length and sources:
            lengths = self._source_lengths(sources)
            self.truncated_indices = [i for i, length in enumerate(lengths) if length > self.max_input_length]
        results, line = [], ProgressLine() if progress else None
        for start in range(0, len(sources), self.batch_size):
            batch = range(start, min(start + self.batch_size, len(sources)))
            outputs = signature(
                inputs=tf.constant(sources[start : start + self.batch_size], tf.string),
                targets=tf.constant(targets[start : start + self.batch_size], tf.string),
                **self._language_inputs(batch),
            )
            results += [
                PairScore(float(log_prob), int(length))
                for log_prob, length in zip(outputs["log_probs"].numpy(), outputs["lengths"].numpy())
            ]
            if line is not None:
                line.update(f"scored {len(results)}/{len(sources)} pairs", final=len(results) == len(sources))
        return results


def _translation(outputs, row, alignments):
    """The `Translation` of row `row` of the `align` or `markup` signature's `outputs` (NumPy)."""
    count = int(outputs["token_counts"][row])
    notes = outputs["notes"][row].decode("utf-8") if "notes" in outputs else ""
    return Translation(
        text=outputs["translations"][row].decode("utf-8"),
        score=float(outputs["scores"][row]),
        confidence=float(outputs["confidence"][row]),
        tokens=[token.decode("utf-8") for token in outputs["tokens"][row][:count]],
        token_scores=[float(value) for value in outputs["token_scores"][row][:count]],
        alignment=outputs["alignments"][row].decode("utf-8") if alignments else None,
        notes=tuple(notes.split("\n")) if notes else (),
    )


def _recorded_search(settings, path):
    """The `SearchConfig` of an export's settings, or None when it records no search."""
    recorded = {name: settings[name] for name in SEARCH_SETTINGS if name in settings}
    if not recorded:
        return None
    try:
        return SearchConfig(**recorded)
    except SearchConfigError as error:
        raise ExportDirError(f"{os.path.join(path, EXPORT_CONFIG)}: {error}") from error
