"""Ensembles of runs (`models.ensemble.Ensemble` through `load_translator` and translate.py's
--model_dir=a,b): a run with itself translates as the run; two different members are searched and
scored on the mean of their log-probabilities; runs with different vocabularies are refused."""

import os
import shutil

import keras
import numpy as np
import pytest
from sentencepiece import sentencepiece_model_pb2

from common.special_ids import BOS_ID, EOS_ID
from inference.loading import load_translator, vocabulary_difference
from inference.runs import ModelDirError, RunDir
from inference.translator import Translator
from models.ensemble import Ensemble
from models.search_config import SearchConfig

SENTENCES = ["Open the file.", "Click OK to close the dialog.", "Select the cells that you want to delete."]


def _nbest(lines):
    """translate.py's n-best lines `i ||| hypothesis ||| score` -> [(i, hypothesis)], [score]."""
    fields = [line.split(" ||| ") for line in lines]
    return [(index, text) for index, text, _ in fields], [float(score) for _, _, score in fields]


def test_a_run_with_itself_translates_as_the_run(tiny_run, translate_here):
    model_dir, _ = tiny_run
    stdin = "".join(f"{sentence}\n" for sentence in SENTENCES).encode()
    alone, error, _ = translate_here(f"--model_dir={model_dir}", "--n_best=2", "--beam_size=3", stdin=stdin)
    assert error is None
    twice, error, _ = translate_here(f"--model_dir={model_dir},{model_dir}", "--n_best=2", "--beam_size=3", stdin=stdin)
    assert error is None
    (alone_hypotheses, alone_scores), (twice_hypotheses, twice_scores) = _nbest(alone), _nbest(twice)
    assert twice_hypotheses == alone_hypotheses and len(alone_hypotheses) == 2 * len(SENTENCES)
    np.testing.assert_allclose(twice_scores, alone_scores, atol=1e-4)


@pytest.mark.slow  # A second member trained.
def test_two_members_are_searched_and_scored_on_the_mean_of_their_log_probabilities(tiny_run):
    model_dir, _ = tiny_run
    run = RunDir(model_dir)
    last, tokenizer, _ = run.load_model("last", quiet=True)
    averaged, _, _ = run.load_model("average:2", quiet=True)  # Other weights, the same vocabulary.
    translator = Translator(
        Ensemble([last, averaged]), tokenizer, search=SearchConfig(beam_size=3, alpha=0.0), batch_size=4
    )
    translations, search_scores = translator.translate(SENTENCES)
    scored = translator.score(SENTENCES, translations)
    # The search's score of its own output (alpha 0: the sum of log-probabilities) is forced decoding's,
    # which reads every member's cache-free decode: the cached search decoded both members too.
    np.testing.assert_allclose(search_scores, [pair.log_prob for pair in scored], atol=1e-4)
    # The constrained search runs on the ensemble's scores too.
    constrained, constrained_scores = translator.translate(SENTENCES, constraints=[["Datei"], None, ["Zellen"]])
    assert "Datei" in constrained[0] and "Zellen" in constrained[2] and translator.unmet_indices == []
    rescored = translator.score(SENTENCES, constrained)
    np.testing.assert_allclose(constrained_scores, [pair.log_prob for pair in rescored], atol=1e-4)
    alone = Translator(last, tokenizer, search=SearchConfig(beam_size=3, alpha=0.0), batch_size=4).score(
        SENTENCES, translations
    )
    assert not np.allclose([pair.log_prob for pair in alone], [pair.log_prob for pair in scored], atol=1e-3)

    # The mean of the members' log-softmax, renormalized, at every target position.
    source = np.array([tokenizer.tokenize(SENTENCES[:1]).to_list()[0] + [EOS_ID]], "int32")
    target = tokenizer.tokenize([str(translations[0])]).to_list()[0] + [EOS_ID]
    decoder_input = np.array([[BOS_ID] + target[:-1]], "int32")
    member_log_probs = [
        keras.ops.convert_to_numpy(keras.ops.log_softmax(model((source, decoder_input)), axis=-1))
        for model in (last, averaged)
    ]
    mean = np.mean(member_log_probs, axis=0)
    expected = mean - np.log(np.sum(np.exp(mean), axis=-1, keepdims=True))
    want = sum(expected[0, position, token] for position, token in enumerate(target))
    assert scored[0].log_prob == pytest.approx(want, abs=1e-4)


def test_runs_with_different_vocabularies_are_refused_naming_the_difference(tiny_run, tmp_path):
    model_dir, _ = tiny_run
    other = tmp_path / "other"
    shutil.copytree(model_dir, other)
    proto = sentencepiece_model_pb2.ModelProto()
    with open(os.path.join(model_dir, "spm.model"), "rb") as handle:
        original = handle.read()
    proto.ParseFromString(original)
    index = next(i for i, piece in enumerate(proto.pieces) if piece.type == piece.NORMAL)
    replaced = proto.pieces[index].piece
    proto.pieces[index].piece = "▁zzzq"
    (other / "spm.model").write_bytes(proto.SerializeToString())
    assert vocabulary_difference(original, original) is None
    assert vocabulary_difference(original, proto.SerializeToString()) == f"id {index} is {replaced!r} against '▁zzzq'"
    with pytest.raises(ModelDirError, match=rf"one vocabulary: {model_dir} and {other} .*id {index} is"):
        load_translator(f"{model_dir},{other}", quiet=True)
    with pytest.raises(ModelDirError, match="is not a directory"):
        load_translator([model_dir, str(tmp_path / "missing")], quiet=True)
    with pytest.raises(ValueError, match="two or more models"):
        Ensemble([RunDir(model_dir).load_model(quiet=True)[0]])
