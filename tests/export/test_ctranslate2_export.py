"""The CTranslate2 conversion (export/ctranslate2_export.py, `python -m export --format=ctranslate2`):
CTranslate2 running the converted model translates and scores as the project's own search does
(each input whole: the project's translator with split_sentences=False)."""

import collections
import json
import os
import time

import ctranslate2
import keras
import numpy as np
import pytest
import sentencepiece

from common.errors import UserError
from export import ctranslate2_export
from inference.runs import RunDir
from inference.translator import Translator
from models.search_config import SearchConfig
from models.transformer import Transformer
from tests.export.helpers import run_export
from tests.helpers import STARTUP_NOISE, TINY_MODEL

# Sentences compared: the test split, then the dev split, up to this many (the project's translator
# takes them in one batch: its search traced for one shape).
SENTENCES = 50
# A sentence of n source tokens (EOS included) gets at most n + this many output tokens, in both.
MAX_EXTRA_LENGTH = 50
ALPHA = 0.6


def _read_pairs(corpus, limit=SENTENCES):
    pairs = []
    for path in (corpus.test, corpus.dev):
        with open(path, encoding="utf-8") as handle:
            pairs.extend(tuple(line.rstrip("\n").split("\t")) for line in handle)
    return pairs[:limit]


@pytest.fixture(scope="module")
def converted(tiny_run, tmp_path_factory):
    """`(ct2_dir, seconds)`: the shared tiny run converted in this process (float32)."""
    output = str(tmp_path_factory.mktemp("ct2") / "tiny-ct2")
    start = time.monotonic()
    ctranslate2_export.convert_run(tiny_run[0], output)
    seconds = time.monotonic() - start
    print(f"\nconverted the tiny run to CTranslate2 in {seconds:.2f} s")
    return output, seconds


def _ct2_translate(ct2_dir, sentences, *, beam_size, max_extra_length=MAX_EXTRA_LENGTH, prefixes=None, **options):
    """`[(text, score, pieces)]` per sentence from CTranslate2, each sentence limited to its source
    length (EOS included) + max_extra_length output tokens as the project's search is; with
    `prefixes` (a string per sentence), each output starts with its prefix (`target_prefix`)."""
    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(ct2_dir, "spm.model"))
    # One thread: OpenMP threads beyond the free cores of a shared machine slow CTranslate2 down.
    translator = ctranslate2.Translator(
        ct2_dir, device="cpu", compute_type=options.pop("compute_type", "float32"), intra_threads=1
    )
    pieces = [processor.encode(sentence, out_type=str) for sentence in sentences]
    prefix_pieces = None if prefixes is None else [processor.encode(prefix, out_type=str) for prefix in prefixes]
    by_length = collections.defaultdict(list)
    for index, row in enumerate(pieces):
        by_length[len(row)].append(index)
    results = [None] * len(sentences)
    for length, indices in by_length.items():
        if prefix_pieces is not None:
            options["target_prefix"] = [prefix_pieces[i] for i in indices]
        outputs = translator.translate_batch(
            [pieces[i] for i in indices],
            beam_size=beam_size,
            max_decoding_length=length + 1 + max_extra_length,
            min_decoding_length=0,  # CTranslate2's default, 1, bars EOS as the first token; the project does not.
            return_scores=True,
            **options,
        )
        for index, output in zip(indices, outputs):
            hypothesis = output.hypotheses[0]
            results[index] = (processor.decode(hypothesis), output.scores[0], hypothesis)
    return results


def _ct2_forced_log_probs(ct2_dir, sources, targets):
    """CTranslate2's log-probability of each target (its pieces and EOS) given its source."""
    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(ct2_dir, "spm.model"))
    translator = ctranslate2.Translator(ct2_dir, device="cpu", compute_type="float32", intra_threads=1)
    results = translator.score_batch(
        [processor.encode(source, out_type=str) for source in sources],
        [processor.encode(target, out_type=str) for target in targets],
    )
    return [float(np.sum(result.log_probs, dtype=np.float64)) for result in results]


def _texts(values):
    return [value.decode("utf-8") if isinstance(value, bytes) else str(value) for value in values]


def test_directory_holds_the_model_vocabulary_and_sentencepiece_model(converted, tiny_run):
    ct2_dir, _ = converted
    assert sorted(os.listdir(ct2_dir)) == [
        "config.json",
        "export_config.json",
        "model.bin",
        "shared_vocabulary.json",
        "spm.model",
    ]
    with open(os.path.join(tiny_run[0], "spm.model"), "rb") as original:
        assert open(os.path.join(ct2_dir, "spm.model"), "rb").read() == original.read()
    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(ct2_dir, "spm.model"))
    with open(os.path.join(ct2_dir, "shared_vocabulary.json"), encoding="utf-8") as handle:
        vocabulary = json.load(handle)
    assert vocabulary == [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    with open(os.path.join(ct2_dir, "config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == ("<s>", "</s>", "<unk>")
    assert config["add_source_eos"] and not config["add_source_bos"]
    assert config["layer_norm_epsilon"] == pytest.approx(1e-6)
    with open(os.path.join(ct2_dir, "export_config.json"), encoding="utf-8") as handle:
        settings = json.load(handle)
    with open(os.path.join(tiny_run[0], "config.json"), encoding="utf-8") as handle:
        assert settings["model"] == json.load(handle)["model"]
    assert settings["export"]["format"] == "ctranslate2"


def test_position_table_is_the_models_interleaved_encoding():
    table = ctranslate2_export.position_table(4, length=3)
    positions = np.arange(3)[:, None]
    expected = np.concatenate(
        [np.sin(positions), np.cos(positions), np.sin(positions / 100.0), np.cos(positions / 100.0)], axis=1
    )
    np.testing.assert_allclose(table, expected, atol=1e-6)


def test_a_shallow_decoders_spec_has_its_own_layer_count():
    """A distilled student's stacks (3 encoder layers, 1 decoder layer) in CTranslate2's spec: each
    stack as deep as the model's, the decoder layer holding the model's decoder weights
    (test_a_pre_norm_model_converts_and_matches translates with such a model)."""
    model = Transformer(20, **dict(TINY_MODEL, num_layers=3), num_decoder_layers=1)
    model.build()
    pieces = ["<pad>", "<s>", "</s>", "<unk>", *(f"piece{i}" for i in range(16))]
    spec = ctranslate2_export.build_spec(model, pieces)
    assert (len(spec.encoder.layer), len(spec.decoder.layer)) == (3, 1)
    feed_forward = model.decoder.decoder_layers[0].feed_forward
    np.testing.assert_array_equal(spec.decoder.layer[0].ffn.linear_0.weight, feed_forward.inner_dense.kernel.numpy().T)
    spec.validate()  # Every weight of the spec is set (and wrapped as CTranslate2's variables).


def test_greedy_outputs_equal_the_projects(converted, tiny_model_and_tokenizer, corpus):
    ct2_dir, _ = converted
    model, tokenizer = tiny_model_and_tokenizer
    sources = [source for source, _ in _read_pairs(corpus)]
    ours, _ = Translator(
        model, tokenizer, search=SearchConfig(beam_size=1, max_extra_length=MAX_EXTRA_LENGTH), batch_size=SENTENCES
    ).translate(sources, split_sentences=False)
    theirs = _ct2_translate(ct2_dir, sources, beam_size=1)
    equal = sum(text == ct2_text for text, (ct2_text, _, _) in zip(_texts(ours), theirs))
    print(f"\ngreedy: {equal} of {len(sources)} CTranslate2 translations equal the project's")
    assert len(sources) == SENTENCES
    assert equal >= 0.99 * len(sources)


def test_target_prefixes_give_the_projects_outputs(converted, tiny_model_and_tokenizer, corpus):
    """Greedy with each reference's first two words forced (the project's `prefixes`, CTranslate2's
    `target_prefix`): the same translations, each starting with its prefix."""
    ct2_dir, _ = converted
    model, tokenizer = tiny_model_and_tokenizer
    pairs = [(source, target) for source, target in _read_pairs(corpus) if len(target.split()) > 2]
    sources, prefixes = [source for source, _ in pairs], [" ".join(target.split()[:2]) for _, target in pairs]
    translator = Translator(
        model, tokenizer, search=SearchConfig(beam_size=1, max_extra_length=MAX_EXTRA_LENGTH), batch_size=SENTENCES
    )
    ours, _ = translator.translate(sources, prefixes=prefixes, split_sentences=False)
    theirs = _ct2_translate(ct2_dir, sources, beam_size=1, prefixes=prefixes)
    # Each starts with its prefix as the vocabulary normalizes it (NFKC: "…" becomes "...").
    normalized = _texts(tokenizer.detokenize(tokenizer.tokenize(prefixes)).numpy())
    assert all(text.startswith(prefix) for text, prefix in zip(_texts(ours), normalized))
    equal = sum(text == ct2_text for text, (ct2_text, _, _) in zip(_texts(ours), theirs))
    print(f"\ngreedy with a target prefix: {equal} of {len(sources)} CTranslate2 translations equal the project's")
    assert len(sources) >= SENTENCES // 2
    assert equal >= 0.99 * len(sources)


@pytest.mark.slow  # a beam search in each; the fast tier's: test_forced_log_probs_agree_with_translator_score
def test_beam_scores_agree_with_the_projects(converted, tiny_model_and_tokenizer, corpus):
    """Beam 4 without a length penalty in both (CTranslate2's `length_penalty` is not the GNMT
    penalty of the project's search): the same best hypotheses with the same log-probabilities."""
    ct2_dir, _ = converted
    model, tokenizer = tiny_model_and_tokenizer
    sources = [source for source, _ in _read_pairs(corpus)]
    translator = Translator(
        model,
        tokenizer,
        search=SearchConfig(beam_size=4, alpha=0.0, max_extra_length=MAX_EXTRA_LENGTH),
        batch_size=SENTENCES,
    )
    ours, our_scores = translator.translate(sources, split_sentences=False)
    theirs = _ct2_translate(ct2_dir, sources, beam_size=4, length_penalty=0.0)
    differences = [
        abs(float(score) - ct2_score)
        for text, score, (ct2_text, ct2_score, _) in zip(_texts(ours), our_scores, theirs)
        if text == ct2_text
    ]
    print(
        f"\nbeam 4: {len(differences)} of {len(sources)} best hypotheses equal, score difference at most "
        f"{max(differences):.2e}"
    )
    assert len(differences) >= 0.95 * len(sources)
    assert max(differences) < 2e-3


@pytest.mark.slow  # The greedy, prefix and beam comparisons run in both tiers.
def test_forced_log_probs_agree_with_translator_score(converted, tiny_model_and_tokenizer, corpus):
    """The references and the project's beam-4 translations (alpha 0.6) scored by both. A search
    score is the forced log-probability over the GNMT penalty ((5 + length) / 6) ** alpha, so
    CTranslate2's forced log-probabilities give the project's beam-4 scores back."""
    ct2_dir, _ = converted
    model, tokenizer = tiny_model_and_tokenizer
    pairs = _read_pairs(corpus)
    sources, references = [source for source, _ in pairs], [target for _, target in pairs]
    translator = Translator(
        model,
        tokenizer,
        search=SearchConfig(beam_size=4, alpha=ALPHA, max_extra_length=MAX_EXTRA_LENGTH),
        batch_size=SENTENCES,
    )
    translations, search_scores = translator.translate(sources, split_sentences=False)
    translations = _texts(translations)
    largest = 0.0
    for targets in (references, translations):
        ours = translator.score(sources, targets)
        theirs = _ct2_forced_log_probs(ct2_dir, sources, targets)
        for pair, log_prob in zip(ours, theirs):
            largest = max(largest, abs(pair.log_prob - log_prob))
            assert abs(pair.log_prob - log_prob) < 1e-4 * max(1.0, abs(pair.log_prob)), (pair, log_prob)
    print(f"\nforced log-probabilities of {2 * len(sources)} pairs: largest difference {largest:.2e}")
    # `ours` and `theirs` now score the translations. Where the output, tokenized again, is the
    # searched pieces with the EOS that ended it (the project's own forced score gives its search
    # score back), CTranslate2's forced score gives it back too.
    penalties = [((5 + pair.tokens) / 6) ** ALPHA for pair in ours]
    same_pieces = [
        i for i, pair in enumerate(ours) if abs(pair.log_prob / penalties[i] - float(search_scores[i])) < 1e-3
    ]
    assert len(same_pieces) >= 0.9 * len(sources)
    differences = [abs(theirs[i] / penalties[i] - float(search_scores[i])) for i in same_pieces]
    print(
        f"beam 4, alpha {ALPHA}: search scores from CTranslate2's forced log-probabilities within {max(differences):.2e}"
    )
    assert max(differences) < 2e-3


def _save_run(directory, model, vocabulary_path, model_config):
    os.makedirs(directory)
    with open(vocabulary_path, "rb") as source, open(os.path.join(directory, "spm.model"), "wb") as target:
        target.write(source.read())
    model.save(os.path.join(directory, "model.keras"))
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as handle:
        json.dump({"model": model_config, "data": {}, "train": {}}, handle)
    return str(directory)


@pytest.mark.slow  # a second model converted
def test_a_pre_norm_model_converts_and_matches(tiny_run, tiny_model_and_tokenizer, corpus, tmp_path):
    """Random weights, never trained: its greedy outputs are deterministic all the same, and every
    target position's log-probability is compared through forced scoring. (Post-norm, the paper's
    layout: the shared run's, compared position by position on the references by
    test_forced_log_probs_agree_with_translator_score.)"""
    _, tokenizer = tiny_model_and_tokenizer
    # A shallow decoder, as a distilled student's (models/presets.py): CTranslate2's decoder spec takes its depth.
    model_config = dict(TINY_MODEL, normalize_first=True, layer_norm_epsilon=1e-5, num_decoder_layers=1)
    model = Transformer(tokenizer.vocabulary_size, **model_config)
    model.build()
    # Weights from a fixed NumPy generator (keras.utils.set_random_seed would also reseed TensorFlow,
    # which breaks the loaded tokenizer: tests/export/conftest.py), LayerNorms away from ones and zeros.
    generator = np.random.default_rng(7)
    for variable in model.weights:
        if variable.path.endswith("gamma"):
            variable.assign(generator.uniform(0.5, 1.5, variable.shape))
        else:
            variable.assign(generator.normal(0.0, 0.1, variable.shape))
    run = _save_run(tmp_path / "pre-norm", model, os.path.join(tiny_run[0], "spm.model"), model_config)
    ct2_dir = ctranslate2_export.convert_run(run, str(tmp_path / "pre-norm-ct2"), checkpoint="last")
    with open(os.path.join(ct2_dir, "config.json"), encoding="utf-8") as handle:
        assert json.load(handle)["layer_norm_epsilon"] == pytest.approx(1e-5)

    pairs = _read_pairs(corpus, limit=24)
    sources, references = [source for source, _ in pairs], [target for _, target in pairs]
    translator = Translator(model, tokenizer, search=SearchConfig(beam_size=1, max_extra_length=8))
    ours, _ = translator.translate(sources, split_sentences=False)
    theirs = _ct2_translate(ct2_dir, sources, beam_size=1, max_extra_length=8)
    assert [text for text, _, _ in theirs] == _texts(ours)
    forced = translator.score(sources, references)
    differences = [
        abs(pair.log_prob - log_prob)
        for pair, log_prob in zip(forced, _ct2_forced_log_probs(ct2_dir, sources, references))
    ]
    assert max(differences) < 1e-3


def test_int8_conversion_stores_smaller_weights_and_translates(converted, tiny_run, corpus, tmp_path):
    ct2_dir = ctranslate2_export.convert_run(tiny_run[0], str(tmp_path / "int8"), quantization="int8")
    with open(os.path.join(ct2_dir, "export_config.json"), encoding="utf-8") as handle:
        assert json.load(handle)["export"]["quantization"] == "int8"
    float_size = os.path.getsize(os.path.join(converted[0], "model.bin"))
    assert os.path.getsize(os.path.join(ct2_dir, "model.bin")) < 0.6 * float_size
    # An undertrained model may end a translation at once (an empty output): int8 is checked against
    # float32, not against non-empty outputs.
    sentences = [source for source, _ in _read_pairs(corpus, 50)]
    int8 = _ct2_translate(ct2_dir, sentences, beam_size=4, compute_type="int8")
    float32 = _ct2_translate(converted[0], sentences, beam_size=4)
    assert len(int8) == len(sentences) and all(np.isfinite(score) for _, score, _ in int8)
    assert sum(a[0] == b[0] for a, b in zip(int8, float32)) >= 0.7 * len(sentences)


def test_refusals_name_the_reason_and_write_nothing(tiny_run, tmp_path):
    model, _, _ = ctranslate2_export.exporter.load_trained(tiny_run[0])
    pieces = ctranslate2_export.sentencepiece_pieces(os.path.join(tiny_run[0], "spm.model"))
    with pytest.raises(ctranslate2_export.ConversionError, match=r"has \d+ pieces but the model was built for"):
        ctranslate2_export.check_convertible(model, pieces[:-1])
    layer = model.encoder.encoder_layers[0].feed_forward
    relu = layer.activation
    layer.activation = keras.activations.gelu
    try:
        with pytest.raises(ctranslate2_export.ConversionError, match=r"feed_forward uses the activation 'gelu'"):
            ctranslate2_export.check_convertible(model, pieces)
    finally:
        layer.activation = relu

    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(ctranslate2_export.ConversionError, match="already exists"):
        ctranslate2_export.convert_run(tiny_run[0], str(existing))
    with pytest.raises(ctranslate2_export.ConversionError, match="--ct2_quantization=int4: expected one of"):
        ctranslate2_export.convert_run(tiny_run[0], str(tmp_path / "out"), quantization="int4")
    assert sorted(os.listdir(tmp_path)) == ["existing"]


def test_a_failed_conversion_leaves_no_directory_and_a_killed_ones_leftover_goes(tiny_run, tmp_path, monkeypatch):
    from ctranslate2.specs import model_spec

    leftover = tmp_path / ".tmp-ct2-out-k1ll3d_x"
    (leftover / "out").mkdir(parents=True)
    (leftover / "out" / "model.bin").write_bytes(b"partial")

    def full_disk(spec, path):
        with open(path, "wb") as handle:
            handle.write(b"partial")
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(model_spec.ModelSpec, "_serialize", full_disk)
        with pytest.raises(OSError, match="No space left"):
            ctranslate2_export.convert_run(tiny_run[0], str(tmp_path / "out"))
    assert os.listdir(tmp_path) == []  # the leftover removed, the failed conversion's own as well


@pytest.mark.slow  # a conversion in a fresh process
def test_command_converts_quietly(tiny_run, tmp_path):
    output = tmp_path / "exports" / "tiny-ct2"
    start = time.monotonic()
    result = run_export("--format=ctranslate2", f"--model_dir={tiny_run[0]}", f"--export_dir={output}")
    print(f"\npython -m export --format=ctranslate2 took {time.monotonic() - start:.1f} s")
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip() == str(output)
    assert sorted(os.listdir(output.parent)) == ["tiny-ct2"]
    assert os.path.isfile(output / "model.bin") and os.path.isfile(output / "spm.model")
    for noise in STARTUP_NOISE:
        assert noise not in result.stderr, result.stderr[-4000:]


@pytest.mark.slow  # A subprocess.
def test_command_refuses_with_one_line_and_status_2(tiny_run, tmp_path):
    not_a_transformer = tmp_path / "dense"
    not_a_transformer.mkdir()
    dense = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    dense.save(not_a_transformer / "model.keras")
    for name in ("spm.model", "config.json"):
        (not_a_transformer / name).write_bytes(open(os.path.join(tiny_run[0], name), "rb").read())
    # Through the command: a refusal of the conversion (exit 2, one line) and the flags' refusals.
    for arguments, expected in [
        (
            ["--format=ctranslate2", f"--model_dir={tmp_path}", f"--export_dir={tmp_path / 'out'}"],
            f"export: error: {tmp_path} holds no model",
        ),
        (
            ["--format=ctranslate2", f"--model_dir={tiny_run[0]}", f"--export_dir={tmp_path / 'out'}", "--beam_size=2"],
            "export: error: --beam_size set the SavedModel's graph and do not apply to --format=ctranslate2",
        ),
        (
            [f"--model_dir={tiny_run[0]}", f"--export_dir={tmp_path / 'out'}", "--ct2_quantization=int8"],
            "export: error: --ct2_quantization only applies to --format=ctranslate2",
        ),
    ]:
        result = run_export(*arguments)
        assert result.returncode == 2, result.stderr[-4000:]
        assert "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines() == [result.stderr.strip().splitlines()[-1]], result.stderr[-2000:]
        assert result.stderr.strip().startswith(expected), result.stderr[-2000:]
    # Another refusal of the conversion, the same UserError path, in this process.
    with pytest.raises(UserError) as refused:
        ctranslate2_export.convert_run(str(not_a_transformer), str(tmp_path / "out"), checkpoint="last")
    expected = f"{not_a_transformer / 'model.keras'} holds a Sequential, not the Transformer train.py saves"
    assert str(refused.value).startswith(expected)
    assert not os.path.exists(tmp_path / "out")


def test_the_shortlist_is_the_vocabulary_map_and_searches_as_the_projects(tiny_run, tiny_model_and_tokenizer, tmp_path):
    """`shortlist=K` writes the run's lexical table as vmap.txt: CTranslate2 with `use_vmap=True`
    translates each sentence as the project's translator with the shortlist does (greedy, one
    sentence a batch, so that each searches over its own candidates)."""
    import shutil

    from training.shortlist import TableOptions, build_table

    run = str(tmp_path / "run")
    shutil.copytree(tiny_run[0], run)
    # From the first training pairs only: a table all the same, read by both sides.
    build_table(run, TableOptions(candidates=4, frequent=20, max_pairs=1000), log=open(os.devnull, "w"))
    ct2_dir = ctranslate2_export.convert_run(run, str(tmp_path / "ct2"), checkpoint="last", shortlist=3)
    with open(os.path.join(ct2_dir, "vmap.txt"), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    assert lines[0].startswith("\t") and len(lines[0].split(" ")) == 20 and all(line.count("\t") == 1 for line in lines)
    assert max(len(line.split("\t")[1].split(" ")) for line in lines[1:]) == 3
    model, tokenizer = tiny_model_and_tokenizer
    sentences = ["Open the file.", "Click OK to close the dialog.", "Select the cells that you want to delete."]
    search = SearchConfig(beam_size=1, max_extra_length=MAX_EXTRA_LENGTH, shortlist=3)
    translator = Translator(model, tokenizer, search, batch_size=1, shortlist=RunDir(run).load_shortlist())
    ours, _ = translator.translate(sentences, split_sentences=False)
    theirs = [_ct2_translate(ct2_dir, [sentence], beam_size=1, use_vmap=True)[0][0] for sentence in sentences]
    assert _texts(ours) == theirs
    with pytest.raises(UserError, match="--shortlist=5: .*shortlist.tsv holds 4 candidates per source piece"):
        ctranslate2_export.convert_run(run, str(tmp_path / "ct2-5"), checkpoint="last", shortlist=5)
