"""`python -m training.shortlist`'s table built for a copy of the shared tiny run, read back by the
run, and searched with by its translator; a table of another vocabulary or corpus is refused, and
a build that fails leaves the table in place."""

import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from common.special_ids import SPECIAL_PIECES
from data.sources import parallel_files
from inference import lexical_table
from inference.lexical_table import ShortlistError
from inference.loading import load_translator
from inference.runs import RunDir
from models.search_config import SearchConfig
from training import shortlist
from training.shortlist import TableOptions, build_table, training_files

SENTENCES = ["Open the file.", "Click OK to close the dialog.", "Select the cells that you want to delete."]
# The first 5000 pairs of the training split (two chunks of CHUNK_PAIRS) are counted; what
# max_pairs=0 reads, the whole split, is checked by reading it, without the counting.
OPTIONS = TableOptions(candidates=6, frequent=30, max_pairs=5000)


@pytest.fixture(scope="module")
def shortlisted_run(tiny_run, tmp_path_factory):
    """A copy of the shared tiny run with its lexical table, and the table's header."""
    run = str(tmp_path_factory.mktemp("shortlist") / "run")
    shutil.copytree(tiny_run[0], run)
    return run, build_table(run, OPTIONS, log=open(os.devnull, "w"))


def test_the_table_counts_the_training_split_and_the_translator_keeps_to_it(shortlisted_run):
    run, header = shortlisted_run
    assert (header["candidates"], header["frequent"], header["corpus"]) == (6, 30, "deb-en-de")
    paths, reverse, _ = training_files(RunDir(run))
    split_pairs = sum(len(sources) for sources, _ in shortlist._pairs(paths, reverse, 0))
    assert split_pairs == sum(1 for _ in parallel_files.read_tsv(paths))
    assert header["pairs"] == min(OPTIONS.max_pairs, split_pairs)
    assert not [name for name in os.listdir(run) if ".tmp-" in name]
    table = RunDir(run).load_shortlist()
    assert table.candidates.shape[1] == 6 and len(table.frequent) == 30
    assert table.candidates.shape[0] == header["source_pieces"] and table.candidates.max() > len(SPECIAL_PIECES)
    search = SearchConfig(shortlist=4, beam_size=2, min_length_ratio=1.0)  # Outputs of some length.
    translator = load_translator(run, search=search, quiet=True, batch_size=4)
    searched = {}
    translator.translate_sentences(SENTENCES, searched=searched)
    sources = [piece for row in translator.encode(SENTENCES) for piece in row]
    allowed = {*SPECIAL_PIECES, *table.frequent.tolist(), *table.candidates[sources, :4].ravel().tolist()}
    output = {int(piece) for _, ids in searched.values() for piece in ids}
    assert len(searched) == len(SENTENCES) and output - set(SPECIAL_PIECES) and output <= allowed
    with pytest.raises(ShortlistError, match=r"shortlist=7: the lexical table holds 6 candidates per source piece"):
        translator.translate(SENTENCES, search=SearchConfig(shortlist=7))


def _copy(run, directory, edit_header=None, edit_config=None):
    shutil.copytree(run, directory)
    if edit_header:
        path = os.path.join(directory, "shortlist.tsv")
        with open(path) as handle:
            lines = handle.readlines()
        name, text = lines[0].rstrip("\n").split("\t")
        lines[0] = f"{name}\t{json.dumps(edit_header(json.loads(text)))}\n"
        with open(path, "w") as handle:
            handle.writelines(lines)
    if edit_config:
        path = os.path.join(directory, "config.json")
        with open(path) as handle:
            config = json.load(handle)
        edit_config(config)
        with open(path, "w") as handle:
            json.dump(config, handle)
    return str(directory)


def test_a_table_of_another_vocabulary_or_corpus_or_none_is_refused_naming_both(shortlisted_run, tmp_path):
    run, header = shortlisted_run
    other = _copy(run, tmp_path / "vocabulary", edit_header=lambda h: {**h, "target_vocabulary": "0123456789abcdef"})
    with pytest.raises(ShortlistError) as refused:
        load_translator(other, search=SearchConfig(shortlist=2), quiet=True)
    message = str(refused.value)
    assert (
        "shortlist.tsv was built for the vocabulary" in message
        and "target vocabulary '0123456789abcdef' against" in message
    )
    assert repr(header["source_vocabulary"]) in message and "python -m training.shortlist" in message
    other = _copy(run, tmp_path / "corpus", edit_config=lambda c: c["data"].update(corpus="deb-en-fr"))
    with pytest.raises(ShortlistError, match="corpus 'deb-en-de' against 'deb-en-fr'"):
        RunDir(other).load_shortlist()
    missing = _copy(run, tmp_path / "none")
    os.remove(os.path.join(missing, "shortlist.tsv"))
    with pytest.raises(ShortlistError, match=f"{missing} has no shortlist.tsv.*--model_dir={missing}"):
        load_translator(missing, search=SearchConfig(shortlist=2), quiet=True)
    assert load_translator(missing, quiet=True).search.shortlist == 0  # No shortlist asked: no table read.


def test_a_build_that_fails_leaves_the_table_as_it_was(shortlisted_run, tmp_path, monkeypatch):
    run = _copy(shortlisted_run[0], tmp_path / "run")
    path = os.path.join(run, "shortlist.tsv")
    before = open(path).read()

    def failing(header, frequent, candidates):
        yield "#shortlist\t{}"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lexical_table, "table_lines", failing)
    # The write fails whatever was counted: a few pairs are enough.
    with pytest.raises(Exception, match=f"cannot write {path}: No space left on device"):
        build_table(run, dataclasses.replace(OPTIONS, max_pairs=100), log=open(os.devnull, "w"))
    assert open(path).read() == before and sorted(os.listdir(run)) == sorted(os.listdir(shortlisted_run[0]))
    np.testing.assert_array_equal(
        RunDir(run).load_shortlist().frequent, RunDir(shortlisted_run[0]).load_shortlist().frequent
    )
