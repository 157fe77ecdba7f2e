"""Converts a trained run into a CTranslate2 model directory (`python -m export --format=ctranslate2`):
`KerasTransformerConverter` fills CTranslate2's `TransformerSpec` from a run's Keras weights; a model
outside the mapping (docs/serving.md, "CTranslate2") is refused before anything is written.
"""

import json
import os
import re
import shutil
import sys

import keras
import numpy as np
import sentencepiece

from common.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from export import exporter
from inference import lexical_table
from inference.runs import SOURCE_VOCABULARY_FILE, VOCABULARY_FILE, RunDir
from models.position_encoding import sinusoidal_position_encoding
from models.transformer import Transformer

# Rows of the position table: CTranslate2's default `max_input_length` for `translate_batch`, and
# more than any source plus `max_extra_length` the project's tools decode.
MAX_POSITIONS = 1024
# The weight types CTranslate2 stores (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`).
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16")
EXPORT_CONFIG_FILE = exporter.EXPORT_CONFIG_FILE
TEMPORARY_PREFIX = ".tmp-ct2-"
VOCABULARY_MAP_FILE = "vmap.txt"  # The name CTranslate2 gives a model's vocabulary map.


class ConversionError(exporter.ExportError):
    """A run CTranslate2 cannot represent, or an output directory it cannot be written to (names which)."""


def _import_ctranslate2():
    try:  # An optional package (requirements-dev.txt): a clear error where it is missing.
        import ctranslate2
        import ctranslate2.converters  # noqa: F401
        import ctranslate2.specs  # noqa: F401
    except ImportError as error:
        raise ConversionError(
            f"--format=ctranslate2 needs the ctranslate2 package ({error}); install requirements-dev.txt"
        ) from error
    return ctranslate2


def _array(variable):
    return np.asarray(variable.numpy(), dtype=np.float32)


def position_table(hidden_dim, length=MAX_POSITIONS):
    """`[length, hidden_dim]` float32: the model's own sinusoidal encoding of positions 0 .. length - 1."""

    return np.asarray(keras.ops.convert_to_numpy(sinusoidal_position_encoding(length, hidden_dim)), dtype=np.float32)


def check_convertible(model, pieces, source_pieces=None):
    """Raises `ConversionError` for a model or vocabulary the specification cannot express.
    `pieces`: in id order (the target's with separate vocabularies); `source_pieces`: the source's, or None."""
    if not isinstance(model, Transformer):
        raise ConversionError(f"the model is a {type(model).__name__}, not models.transformer.Transformer")
    vocabularies = [("", pieces, model.vocabulary_size)]
    if source_pieces is not None or model.source_vocabulary_size is not None:
        vocabularies.append(("source ", source_pieces or [], model.source_vocabulary_size))
    for side, side_pieces, size in vocabularies:
        if len(side_pieces) != size:
            raise ConversionError(
                f"the {side}SentencePiece model has {len(side_pieces)} pieces but the model was built for {size}"
            )
        if len(set(side_pieces)) != len(side_pieces):
            raise ConversionError(
                f"the {side}SentencePiece model has duplicate pieces, and CTranslate2 looks tokens up by text"
            )
    if model.pad_id != PAD_ID:
        raise ConversionError(f"the model pads with id {model.pad_id}, the vocabulary with {PAD_ID}")
    for dense in _dense_layers(model):
        if dense.quantization_mode or dense.lora_enabled:
            what = f"quantized ({dense.quantization_mode})" if dense.quantization_mode else "LoRA-enabled"
            raise ConversionError(
                f"layer {dense.path} is {what}; the conversion reads plain float kernels "
                "(--ct2_quantization quantizes in the conversion)"
            )
    for layer in model.encoder.encoder_layers + model.decoder.decoder_layers:
        activation = getattr(layer.feed_forward.activation, "__name__", layer.feed_forward.activation)
        if activation != "relu":
            raise ConversionError(
                f"layer {layer.feed_forward.path} uses the activation {activation!r}; the conversion maps the "
                "paper's ReLU only"
            )


def _dense_layers(model):
    """Every Dense layer of the encoder and decoder layers (attention and feed-forward projections)."""
    for layer in model.encoder.encoder_layers + model.decoder.decoder_layers:
        attentions = [layer.self_attention] + ([layer.cross_attention] if hasattr(layer, "cross_attention") else [])
        for attention in attentions:
            yield from (attention.query_dense, attention.key_value_dense, attention.output_dense)
        yield from (layer.feed_forward.inner_dense, layer.feed_forward.output_dense)


def _linear(spec, dense_layers):
    """Fills the linear `spec` with the Keras Dense layers' kernels (transposed), stacked on the output axis."""
    spec.weight = np.concatenate([_array(layer.kernel).T for layer in dense_layers], axis=0)
    spec.bias = np.concatenate([_array(layer.bias) for layer in dense_layers], axis=0)


def _layer_norm(spec, layer_norm):
    spec.gamma = _array(layer_norm.gamma)
    spec.beta = _array(layer_norm.beta)


def _self_attention(spec, attention, residual):
    _linear(spec.linear[0], [attention.query_dense, attention.key_value_dense])
    _linear(spec.linear[1], [attention.output_dense])
    _layer_norm(spec.layer_norm, residual.layer_norm)


def _cross_attention(spec, attention, residual):
    _linear(spec.linear[0], [attention.query_dense])
    _linear(spec.linear[1], [attention.key_value_dense])
    _linear(spec.linear[2], [attention.output_dense])
    _layer_norm(spec.layer_norm, residual.layer_norm)


def _feed_forward(spec, feed_forward, residual):
    _linear(spec.linear_0, [feed_forward.inner_dense])
    _linear(spec.linear_1, [feed_forward.output_dense])
    _layer_norm(spec.layer_norm, residual.layer_norm)


def build_spec(model, pieces, source_pieces=None):
    """The `TransformerSpec` of a built `Transformer`, weights, vocabulary and config filled in;
    `pieces`, `source_pieces` and the ConversionError raised as `check_convertible`'s."""
    _import_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec  # Optional: checked by the line above.

    check_convertible(model, pieces, source_pieces)
    options = dict(pre_norm=bool(model.normalize_first), activation=common_spec.Activation.RELU)
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(model.num_layers, model.num_heads, **options),
        transformer_spec.TransformerDecoderSpec(model.num_decoder_layers, model.num_heads, **options),
    )
    embeddings = _array(model.embedding.embeddings)  # [vocabulary, d_model]
    positions = position_table(model.hidden_dim)  # [MAX_POSITIONS, d_model]
    for stack_spec, stack in ((spec.encoder, model.encoder), (spec.decoder, model.decoder)):
        stack_spec.scale_embeddings = True
        stack_spec.position_encodings.encodings = positions
        if model.normalize_first:
            _layer_norm(stack_spec.layer_norm, stack.final_layer_norm)
    spec.encoder.embeddings[0].weight = _array(model.source_embedding.embeddings)
    spec.decoder.embeddings.weight = embeddings
    spec.decoder.projection.weight = embeddings  # Tied, without a bias.
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder.encoder_layers, strict=True):
        _self_attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual)
        _feed_forward(layer_spec.ffn, layer.feed_forward, layer.feed_forward_residual)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder.decoder_layers, strict=True):
        _self_attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_residual)
        _cross_attention(layer_spec.attention, layer.cross_attention, layer.cross_attention_residual)
        _feed_forward(layer_spec.ffn, layer.feed_forward, layer.feed_forward_residual)

    config = spec.config
    config.unk_token, config.bos_token, config.eos_token = pieces[UNK_ID], pieces[BOS_ID], pieces[EOS_ID]
    config.decoder_start_token = pieces[BOS_ID]
    config.add_source_bos, config.add_source_eos = False, True
    config.layer_norm_epsilon = float(model.layer_norm_epsilon)
    spec.register_source_vocabulary(list(pieces if source_pieces is None else source_pieces))
    spec.register_target_vocabulary(list(pieces))
    return spec


def sentencepiece_pieces(vocabulary_path):
    """The pieces of the SentencePiece model at `vocabulary_path`, in id order."""

    processor = sentencepiece.SentencePieceProcessor(model_file=vocabulary_path)
    return [processor.id_to_piece(index) for index in range(processor.get_piece_size())]


def converter(model, vocabulary_path, source_vocabulary_path=None):
    """A `ctranslate2.converters.Converter` writing `model` with the SentencePiece model(s) beside it."""
    ctranslate2 = _import_ctranslate2()

    class KerasTransformerConverter(ctranslate2.converters.Converter):
        """Fills a `TransformerSpec` from a Keras `Transformer` (`build_spec`)."""

        def _load(self):
            source_pieces = None if source_vocabulary_path is None else sentencepiece_pieces(source_vocabulary_path)
            spec = build_spec(model, sentencepiece_pieces(vocabulary_path), source_pieces)
            spec.register_file(vocabulary_path, VOCABULARY_FILE)
            if source_vocabulary_path is not None:
                spec.register_file(source_vocabulary_path, SOURCE_VOCABULARY_FILE)
            return spec

    return KerasTransformerConverter()


def check_output_dir(output_dir):
    """Raises `ConversionError` unless `output_dir` is a new directory whose parent can hold it."""
    if os.path.lexists(output_dir):
        raise ConversionError(
            f"--export_dir {output_dir} already exists; the CTranslate2 model directory is written new, never "
            "over another"
        )
    parent = os.path.dirname(os.path.abspath(output_dir))
    existing = parent
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ConversionError(f"--export_dir {output_dir} lies under {existing}, which is a file, not a directory")


def vocabulary_map_lines(table, source_pieces, target_pieces, candidates):
    """The lines of CTranslate2's vocabulary map (`vmap.txt`, read with `use_vmap=True`) of a
    `LexicalTable`: `<TAB>` then the frequent pieces (always candidates), then each source piece
    with candidates, `piece<TAB>` its best `candidates` target pieces (pieces, not ids)."""
    yield "\t" + " ".join(target_pieces[token] for token in table.frequent)
    for source, row in enumerate(table.candidates[:, :candidates]):
        kept = [target_pieces[token] for token in row if token != PAD_ID]
        if kept:
            yield f"{source_pieces[source]}\t{' '.join(kept)}"


def _shortlist_table(run, candidates):
    """The run's lexical table for `--shortlist=candidates` (None for 0); ShortlistError for a run
    without its table, with another vocabulary's, or with fewer candidates per source piece."""
    if not candidates:
        return None
    table = run.load_shortlist()
    held = table.candidates.shape[1]
    if candidates > held:
        raise lexical_table.ShortlistError(
            f"--shortlist={candidates}: {run.shortlist_path} holds {held} candidates per source piece"
        )
    return table


def _write_vocabulary_map(run, table, candidates, path):
    """Writes the run's lexical table `table` as CTranslate2's vocabulary map at `path`."""
    target_pieces = sentencepiece_pieces(run.vocabulary_path)
    separate = run.has_separate_vocabularies()
    source_pieces = sentencepiece_pieces(run.source_vocabulary_path) if separate else target_pieces
    with open(path, "w", encoding="utf-8") as handle:
        for line in vocabulary_map_lines(table, source_pieces, target_pieces, candidates):
            handle.write(line + "\n")


def convert_run(model_dir, output_dir, *, quantization="float32", checkpoint=exporter.DEFAULT_CHECKPOINT, shortlist=0):
    """Converts the run `model_dir` into the new directory `output_dir`; returns `output_dir`.

    Written under `<parent>/.tmp-ct2-<name>-*` and renamed when complete, so a failure leaves no
    `output_dir` (a kill leaves the temporary one, which the next conversion there removes).
    `quantization`: one of `QUANTIZATIONS`; `checkpoint`: as `inference.runs.parse_checkpoint`;
    `shortlist` > 0: the run's lexical table (`python -m training.shortlist`) with that many
    candidates per source piece, as `vmap.txt`, which `translate_batch(..., use_vmap=True)` reads.

    Raises:
        ConversionError, exporter.ExportError: naming the flag or file, before anything is written.
    """
    if quantization not in QUANTIZATIONS:
        raise ConversionError(f"--ct2_quantization={quantization}: expected one of {', '.join(QUANTIZATIONS)}")
    check_output_dir(output_dir)
    chosen = exporter.check_model_dir(model_dir, checkpoint)
    table = _shortlist_table(RunDir(model_dir), shortlist)
    _import_ctranslate2()
    model, _, run_config = exporter.load_trained(model_dir, checkpoint)
    run = RunDir(model_dir)
    source_vocabulary = run.source_vocabulary_path if run.has_separate_vocabularies() else None
    conversion = converter(model, run.vocabulary_path, source_vocabulary)
    parent = os.path.dirname(os.path.abspath(output_dir))
    name = os.path.basename(os.path.abspath(output_dir))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as error:
        raise ConversionError(f"--export_dir {output_dir}: its directory cannot be created ({error})") from error
    prefix = f"{TEMPORARY_PREFIX}{name}-"
    for stale in exporter.remove_stale_temporaries(parent, re.compile(re.escape(prefix) + r"[a-z0-9_]+")):
        print(f"removed {os.path.join(parent, stale)}, left by a conversion that did not finish", file=sys.stderr)
    temporary, lock = exporter.locked_temporary_directory(parent, prefix)
    try:
        written = os.path.join(temporary, name)  # Made by `convert` with os.makedirs' mode.
        vocabulary_map = None
        if shortlist:
            vocabulary_map = os.path.join(temporary, VOCABULARY_MAP_FILE)
            _write_vocabulary_map(run, table, shortlist, vocabulary_map)
        try:
            conversion.convert(written, quantization=quantization, vmap=vocabulary_map)
        except (ValueError, NotImplementedError) as error:
            raise ConversionError(f"CTranslate2 refused the model: {error}") from error
        settings = {
            "format": "ctranslate2",
            "quantization": quantization,
            "checkpoint": str(chosen.choice),
            "checkpoint_steps": list(chosen.steps),
            "max_positions": MAX_POSITIONS,
            "shortlist": shortlist,
            "ctranslate2": _import_ctranslate2().__version__,
        }
        with open(os.path.join(written, EXPORT_CONFIG_FILE), "w", encoding="utf-8") as handle:
            json.dump({"export": settings, **run_config}, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.rename(written, output_dir)  # Atomic on one file system; fails if output_dir appeared.
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
        os.close(lock)
    return output_dir
