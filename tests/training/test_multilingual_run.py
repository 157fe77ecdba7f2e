"""A multilingual run end to end on the deb-en-de sample and sample deb-en-ja packages: training with
the tags and a dev BLEU per pair, then translating, scoring, evaluating and exporting into a chosen
target language, and each refusal of a language the model was not trained for.

benchmarks/multilingual.py's smoke run scores this run as its multilingual model, beside bilingual
runs it trains.

The run has separate source and target vocabularies (--vocabulary=separate, the choice for targets
in other scripts), so the same tests hold them too: the tags are symbols of the source vocabulary
only, and every tool reads each side with its own."""

import dataclasses
import json
import os

import pytest

from data import multilingual
from models.search_config import SearchConfig
from tests.helpers import (
    assert_train_refuses,
    build_sample_multilingual,
    load_benchmark,
    small_run_config,
    tool_flags,
    warmup_requests,
)

PAIRS = "deb-en-de,deb-en-ja"
SENTENCES = ["Save the document.", "", "Choose Format - Page Style."]
TEMPERATURE = 2.0


@pytest.fixture(scope="module")
def multilingual_run(tmp_path_factory):
    """`(model_dir, summary, cache_dir)` of a small model trained a few steps on both pairs, with
    separate vocabularies, at pair sampling temperature 2."""
    from training.trainer import train

    root = tmp_path_factory.mktemp("multilingual")
    cache, debs = str(root / "cache"), str(root / "debs")
    german = build_sample_multilingual(cache, debs)["deb-en-de"]
    config = small_run_config(root / "run", german, train_steps=2, checkpoint_every=2)
    config = dataclasses.replace(
        config,
        data=dataclasses.replace(
            config.data,
            corpus=PAIRS,
            deb_dir=debs,
            user_defined_symbols=("<bt>",),
            vocabulary="separate",
            pair_sampling_temperature=TEMPERATURE,
        ),
        train=dataclasses.replace(config.train, eval_every=2, eval_sentences=2),
    )
    return str(root / "run"), train(config), cache


def test_training_tags_each_pair_and_scores_each_on_its_dev_split(multilingual_run):
    from training.run_dir import RunDir

    model_dir, summary, _ = multilingual_run
    history = summary["history"]
    per_pair = [history[f"val_bleu_{name}"][-1] for name in PAIRS.split(",")]
    assert history["val_bleu"][-1] == pytest.approx(sum(per_pair) / 2)
    run = RunDir(model_dir)
    source, target = run.load_source_tokenizer(), run.load_tokenizer()
    assert source.id_to_piece([4, 5, 6]).numpy().tolist() == [b"<2de>", b"<2ja>", b"<bt>"]
    assert target.id_to_piece([4]).numpy().tolist() == [b"<bt>"]  # The tags are the source's alone.
    # Japanese characters are pieces of the target vocabulary, not of the English source's.
    japanese = target.tokenize(["ファイル"]).to_list()[0]
    assert len(japanese) < len(source.tokenize(["ファイル"]).to_list()[0])
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        mix = {entry["corpus"]: entry for entry in json.load(f)["training_corpora"]}
    assert set(mix) == {"deb-en-de", "deb-en-ja"}
    assert mix["deb-en-ja"]["share"] > mix["deb-en-ja"]["pairs"] / (
        mix["deb-en-ja"]["pairs"] + mix["deb-en-de"]["pairs"]
    )


def test_translating_into_a_language_puts_its_tag_first(multilingual_run):
    """The translator's tokens are those of the tagged text the model trained on; an empty line
    stays empty; a cut line keeps its tag; the tag is no word of the alignment."""
    from inference.alignment import pieces_of, word_indices
    from inference.loading import load_translator
    from inference.translator import Translator

    model_dir, _, _ = multilingual_run
    japanese = load_translator(model_dir, target_language="ja", quiet=True)
    assert japanese.source_tokenizer is not japanese.tokenizer
    tagged = japanese.source_tokenizer.tokenize(["<2ja> Save the document."]).to_list()[0]
    rows = japanese.encode(SENTENCES)
    assert rows[0] == tagged + [2] and rows[1] == [2]
    plain = Translator(japanese.model, japanese.tokenizer, japanese.search, source_tokenizer=japanese.source_tokenizer)
    texts, scores, alignments = japanese.translate(SENTENCES, alignments=True)
    assert (texts[1], scores[1]) == ("", 0.0)
    expected = plain.translate([f"<2ja> {SENTENCES[0]}", f"<2ja> {SENTENCES[2]}"])
    assert (texts[0], texts[2]) == tuple(expected[0]) and (scores[0], scores[2]) == pytest.approx(tuple(expected[1]))
    german = load_translator(model_dir, target_language="de", quiet=True)
    assert german.encode(SENTENCES[:1])[0][: len(german.tag_ids)] != rows[0][: len(german.tag_ids)]
    short = load_translator(model_dir, target_language="ja", quiet=True, search=SearchConfig(max_input_length=4))
    assert short.encode(SENTENCES[:1]) == [tagged[:3] + [2]] and short.truncated_indices == [0]
    words = word_indices(rows[0], pieces_of(japanese.source_tokenizer, rows[0]))
    tag_length = len(japanese.tag_ids)  # The tag and the word marker before it: no word.
    assert words[:tag_length] == [-1] * tag_length and words[tag_length] == 0 and max(words) == 2
    assert {int(link.split("-")[0]) for link in alignments[0].split()} <= {0, 1, 2}
    assert japanese.score(SENTENCES[:1], ["x"]) == plain.score([f"<2ja> {SENTENCES[0]}"], ["x"])


def test_a_fine_tuning_starts_from_both_vocabularies_and_the_weights(multilingual_run, tmp_path):
    """--init_from a run with separate vocabularies: the child copies both models and takes every
    weight, the source embedding's included."""
    import keras
    import numpy as np

    from training import init_from
    from training.config import DataConfig, TrainConfig
    from training.model_building import build_model
    from training.run_dir import RunDir
    from training.trainer import TrainingError, resolve_tokenizer

    model_dir, _, _ = multilingual_run
    parent_run = RunDir(model_dir)
    config = parent_run.read_config()
    parent = init_from.load_parent(model_dir, "last", config["model"], config["data"]["vocab_size"])
    data = DataConfig(corpus=PAIRS, vocab_size=500, vocabulary="separate", user_defined_symbols=("<bt>",))
    child = RunDir(str(tmp_path / "child"))
    target = resolve_tokenizer(child.path, None, data, parent=parent)
    assert target.model_proto == parent_run.load_tokenizer().model_proto
    assert child.load_source_tokenizer().model_proto == parent_run.load_source_tokenizer().model_proto
    with pytest.raises(TrainingError, match="--vocabulary=shared differs from its separate vocabularies"):
        resolve_tokenizer(str(tmp_path / "shared"), None, dataclasses.replace(data, vocabulary="shared"), parent=parent)
    model = build_model(config["model"], 500, TrainConfig(), source_vocabulary_size=500)
    init_from.assign(model, parent)
    assert all(np.array_equal(keras.ops.convert_to_numpy(w), v) for w, v in zip(model.weights, parent.values))


def test_a_copy_without_the_source_vocabulary_is_refused(multilingual_run, tmp_path):
    import shutil

    from inference.loading import load_translator
    from inference.runs import ModelDirError

    model_dir, _, _ = multilingual_run
    copy = shutil.copytree(model_dir, tmp_path / "copy", ignore=shutil.ignore_patterns("spm.source.model", "logs"))
    with pytest.raises(ModelDirError, match="separate vocabularies .* but has no spm.source.model, the source's"):
        load_translator(str(copy), target_language="ja", quiet=True)


def test_a_target_language_the_model_has_not_learnt_is_refused(multilingual_run):
    from evaluation import evaluator
    from inference.loading import load_translator

    model_dir, _, _ = multilingual_run
    with pytest.raises(
        multilingual.TargetLanguageError, match="is a multilingual model: pass --target_language, one of de, ja"
    ):
        load_translator(model_dir, quiet=True)
    with pytest.raises(multilingual.TargetLanguageError, match="--target_language=fr: .* into de, ja only"):
        load_translator(model_dir, target_language="fr", quiet=True)
    result = evaluator.evaluate(
        evaluator.EvalConfig(model_dir=model_dir, split="dev", target_language="ja", progress=False)
    )
    assert result["sentences"] == 2 and "bleu" in result
    with pytest.raises(multilingual.TargetLanguageError, match="pass --target_language"):
        evaluator.evaluate(evaluator.EvalConfig(model_dir=model_dir, split="dev", progress=False))


def _train_flags_refusal(*argv):
    """What train.py's flag checks (its validators, then the run configuration of the flags) say
    of `argv`, run in this process; None for no refusal."""
    from absl import app, flags

    from training import train_flags

    with tool_flags() as flag_values:
        train_flags.define_train_flags()
        try:
            flag_values(["train.py", "--model_dir=unused", *argv])
            train_flags.config_from_flags()
        except (flags.Error, app.UsageError) as error:
            return str(error)
    return None


@pytest.mark.slow  # A train.py process; the refusals themselves: tests/data/test_multilingual.py and
# tests/training/test_init_from.py.
def test_train_py_refuses_a_pair_given_twice_and_a_direction(multilingual_run, tmp_path):
    """train.py's checks of the command line (in a train.py process: the temperature's, which
    needs the command line itself) and of its flags (in this process)."""
    model_dir, _, cache = multilingual_run
    common = (f"--cache_dir={cache}", "--train_steps=2", "--checkpoint_every=2", "--eval_every=2")
    assert_train_refuses(
        tmp_path / "temperature",
        ["--corpus=deb-en-de", "--pair_sampling_temperature=2", *common],
        "--pair_sampling_temperature draws among several pairs",
    )
    refusals = {
        ("--corpus=deb-en-de,deb-en-ja,deb-en-de",): "deb-en-de is given twice",
        (f"--corpus={PAIRS}", "--direction=ja-en"): "--direction=ja-en: a multilingual model translates from English",
        ("--corpus=deb-en-de,deb-en-fr", f"--init_from={model_dir}"): (
            f"--init_from={model_dir}: its vocabulary has no <2fr>"
        ),
        ("--corpus=deb-en-de", "--direction=de-en", f"--init_from={model_dir}"): (
            "has separate vocabularies, its source one for en and its target one for several languages; this run "
            "translates de-en"
        ),
    }
    for argv, message in refusals.items():
        assert message in (_train_flags_refusal(*argv, *common) or ""), argv
    assert _train_flags_refusal(f"--corpus={PAIRS}", *common) is None


@pytest.mark.slow
def test_the_export_takes_the_target_language_as_an_input(multilingual_run, tmp_path):
    """The SavedModel's signatures take target_language; it translates and aligns as the run does
    with the export's search, each side read by its own vocabulary (both are assets); a language
    the model was not trained for fails the request. The export holds only the signatures asked
    for (`--signatures`) and refuses a request for another by name. The CTranslate2 conversion
    keeps the two vocabularies and scores as the run does."""
    import ctranslate2
    import numpy as np
    import sentencepiece
    import tensorflow as tf

    from export import ctranslate2_export, exporter
    from inference.loading import load_translator
    from inference.saved_model_translator import ExportDirError, SavedModelTranslator

    model_dir, _, _ = multilingual_run
    path = exporter.export_model(
        model_dir,
        str(tmp_path / "export"),
        length_buckets=(16,),
        checkpoint="last",
        search=SearchConfig(max_input_length=16),
        signatures=["align", "score", "serving_default"],
    )
    export = SavedModelTranslator(path, target_language="ja")
    assert sorted(export._loaded.signatures) == ["align", "score", "serving_default"]
    refused = "has no 'n_best' signature, which n-best lists need: it was exported with --signatures=serving_default,score,align"
    with pytest.raises(ExportDirError, match=refused):
        export.translate(SENTENCES, n_best=2)
    run = load_translator(model_dir, target_language="ja", quiet=True, search=export.search, checkpoint="last")
    assert sorted(os.listdir(os.path.join(path, "assets"))) == ["spm.model", "spm.source.model"]
    texts, scores, alignments = export.translate(SENTENCES, alignments=True)
    expected_texts, expected_scores, expected_alignments = run.translate(SENTENCES, alignments=True)
    assert texts == expected_texts and scores == pytest.approx(expected_scores, abs=1e-4)
    assert alignments == expected_alignments
    scored = [export.score(SENTENCES, ["ファイル"] * 3), run.score(SENTENCES, ["ファイル"] * 3)]
    assert [pair.tokens for pair in scored[0]] == [pair.tokens for pair in scored[1]]
    assert [pair.log_prob for pair in scored[0]] == pytest.approx([pair.log_prob for pair in scored[1]], abs=1e-3)
    signature = export._loaded.signatures["serving_default"]
    assert set(signature.structured_input_signature[1]) == {"inputs", "target_language"}
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a language the model was trained for \\(de, ja\\)"):
        signature(inputs=tf.constant(["Open."]), target_language=tf.constant(["fr"]))
    (request, *_) = warmup_requests(path)
    assert set(request.predict_log.request.inputs) == {"inputs", "target_language"}
    with pytest.raises(multilingual.TargetLanguageError, match="pass --target_language"):
        SavedModelTranslator(path)
    ct2_dir = ctranslate2_export.convert_run(model_dir, str(tmp_path / "ct2"), checkpoint="last")
    assert {"source_vocabulary.json", "target_vocabulary.json", "spm.source.model", "spm.model"} <= set(
        os.listdir(ct2_dir)
    )
    source, target = (
        sentencepiece.SentencePieceProcessor(model_file=os.path.join(ct2_dir, name))
        for name in ("spm.source.model", "spm.model")
    )
    sources, targets = [SENTENCES[0], "Open."], ["ファイルを保存", "x"]  # Not cut at the export's 16 tokens.
    results = ctranslate2.Translator(ct2_dir, device="cpu", intra_threads=1).score_batch(
        [source.encode(f"<2ja> {sentence}", out_type=str) for sentence in sources],
        [target.encode(sentence, out_type=str) for sentence in targets],
    )
    expected = [pair.log_prob for pair in run.score(sources, targets)]
    assert [float(np.sum(result.log_probs)) for result in results] == pytest.approx(expected, abs=1e-3)


@pytest.mark.slow  # A train.py process, a training and four scorings: the full tier runs it.
def test_the_benchmark_trains_a_bilingual_run_per_pair_and_scores_each_beside_the_multilingual_run(
    multilingual_run, tmp_path, capsys
):
    """benchmarks/multilingual.py end to end: the bilingual run of deb-en-de trained through
    train.py; the bilingual run of deb-en-ja (trained here, in this process) and the multilingual
    run (this module's), each complete at the benchmark's steps, scored as they are; each run
    scored per pair on the dev split, and the JSON read back."""
    import shutil
    import types

    from training.trainer import train

    bench, _ = load_benchmark("multilingual")
    model_dir, _, cache = multilingual_run
    runs = tmp_path / "runs"
    shutil.copytree(model_dir, runs / "multi-de-ja")  # The benchmark's name for a run of both pairs.
    debs = os.path.join(os.path.dirname(cache), "debs")
    japanese = small_run_config(
        runs / "deb-en-ja", types.SimpleNamespace(root=os.path.join(cache, "deb-en-ja")), train_steps=1
    )
    train(
        dataclasses.replace(
            japanese,
            data=dataclasses.replace(japanese.data, corpus="deb-en-ja", deb_dir=debs),
            train=dataclasses.replace(japanese.train, checkpoint_every=1, eval_every=1, eval_sentences=0),
        )
    )
    output = tmp_path / "multilingual.json"
    # The deb-en-ja run's settings (small_run_config's), on top of the demo's recipe.
    train_flags = (
        "--checkpoint_every=1 --eval_sentences=0 --num_layers=1 --hidden_dim=32 --num_heads=2 --intermediate_dim=64 "
        "--vocab_size=500 --batch_tokens=512 --max_length=64"
    )
    bench.main(
        [
            f"--pairs={PAIRS}",
            "--steps_per_pair=1",  # The multilingual run's two steps in all.
            f"--temperature={TEMPERATURE:g}",
            "--split=dev",
            "--checkpoint=last",
            f"--cache_dir={cache}",
            f"--deb_dir={debs}",
            f"--output_dir={runs}",
            f"--train_flags={train_flags}",
            f"--json={output}",
        ]
    )
    printed = capsys.readouterr().out
    results = json.loads(output.read_text(encoding="utf-8"))["results"]
    multilingual_result = results["multilingual"]
    assert multilingual_result["steps"] == 2 and multilingual_result["model_dir"] == str(runs / "multi-de-ja")
    assert multilingual_result["train_seconds"] is None
    assert f"{runs / 'multi-de-ja'}: trained to step 2 already, scored as it is" in printed
    assert f"{runs / 'deb-en-ja'}: trained to step 1 already, scored as it is" in printed
    assert results["bilingual"]["deb-en-de"]["train_seconds"] >= 0
    assert results["bilingual"]["deb-en-ja"]["train_seconds"] is None
    for pair in PAIRS.split(","):
        bilingual = results["bilingual"][pair]
        assert bilingual["steps"] == 1
        for scored in (bilingual["dev"], multilingual_result["pairs"][pair]["dev"]):
            assert 0 <= scored["bleu"] <= 100 and "nrefs:1" in scored["bleu_signature"]
        with open(os.path.join(bilingual["model_dir"], "config.json"), encoding="utf-8") as f:
            recorded = json.load(f)
        assert recorded["data"]["corpus"] == pair and recorded["train"]["train_steps"] == 1
        assert f"{pair}: bilingual " in printed
    assert "training: bilingual unknown s in all, multilingual unknown s" in printed
