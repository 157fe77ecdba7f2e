"""A run's recorded search (config.json "search", written by train.py for a recipe): the default
of evaluate.py, translate.py, the export and `load_translator` for the search flags not given. The
export command's use of it is checked with its other wiring in tests/export/test_exporter.py."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest
from absl import flags

from cli import search_flags
from common.errors import UserError
from inference.loading import load_translator
from inference.runs import RunDir, search_settings
from models.search_config import (
    DEFAULT_SEARCH,
    SEARCH_SETTINGS,
    SETTING_CHOICES,
    SETTING_HELP,
    Sampling,
    SearchConfig,
    check_setting,
)
from tests.helpers import REPO_ROOT, TOOL_ENV

RECORDED = {"alpha": 1.0, "min_length_ratio": 0.8, "chosen_for": "recipe small_data"}
SENTENCES = ["Open the file.", "Click OK to close the dialog.", "Select the cells that you want to delete."]


def _with_search(tiny_run, directory, search):
    """A copy of the shared tiny run whose config.json records `search`."""
    shutil.copytree(tiny_run[0], directory)
    path = os.path.join(directory, "config.json")
    with open(path) as handle:
        config = json.load(handle)
    config["search"] = search
    with open(path, "w") as handle:
        json.dump(config, handle)
    return str(directory)


def _tool(*argv):
    return subprocess.run(
        [sys.executable, *argv], cwd=REPO_ROOT, env=TOOL_ENV, capture_output=True, text=True, timeout=300
    )


def _search_flag_values(argv, sampling=False):
    values = flags.FlagValues()
    search_flags.define_search_flags(flag_values=values)
    if sampling:
        search_flags.define_sampling_flags(flag_values=values)
    values(["tool", *argv])
    return values


def _settings(translator):
    search = translator.search
    return (search.beam_size, search.alpha, search.max_extra_length, search.min_length_ratio)


def test_the_recorded_search_sets_the_flags_not_given_and_says_so(tiny_run, tmp_path):
    run = _with_search(tiny_run, tmp_path / "run", RECORDED)
    values = _search_flag_values([])
    note = search_flags.apply_run_search(values, run)
    assert (values.alpha, values.min_length_ratio, values.beam_size, values.max_extra_length) == (1.0, 0.8, 4, 50)
    assert note == (
        f"search of {run} (recipe small_data): --alpha=1 --min_length_ratio=0.8; a flag on the command line overrides it"
    )

    values = _search_flag_values(["--alpha=0.6"])
    note = search_flags.apply_run_search(values, run)
    assert (values.alpha, values.min_length_ratio) == (0.6, 0.8)
    assert "--min_length_ratio=0.8" in note and "--alpha" not in note

    values = _search_flag_values(["--alpha=0.5", "--min_length_ratio=0"])
    assert search_flags.apply_run_search(values, run) is None
    assert (values.alpha, values.min_length_ratio) == (0.5, 0.0)
    assert search_flags.apply_run_search(_search_flag_values([]), tiny_run[0]) is None  # Records none.


def test_load_translator_searches_as_the_run_records_unless_told_otherwise(tiny_run, tmp_path):
    run = _with_search(tiny_run, tmp_path / "run", RECORDED)
    recorded = load_translator(run, quiet=True)
    assert _settings(recorded) == (4, 1.0, 50, 0.8)
    assert _settings(load_translator(run, search=recorded.search.override(alpha=0.6), quiet=True)) == (4, 0.6, 50, 0.8)
    assert _settings(load_translator(tiny_run[0], quiet=True)) == (4, 0.6, 50, 0.0)
    # The run's recorded search is the one the flags would give (that a translator searches with its
    # `search`: tests/inference/test_translator.py).
    explicit = load_translator(tiny_run[0], search=SearchConfig(alpha=1.0, min_length_ratio=0.8), quiet=True)
    assert recorded.search == explicit.search


def test_flags_then_record_then_default_make_one_search_config(tiny_run, tmp_path):
    run = _with_search(tiny_run, tmp_path / "run", RECORDED)
    values = _search_flag_values(["--beam_size=2", "--alpha=0.9"])
    search_flags.apply_run_search(values, run)
    search = search_flags.search_from_flags(values)
    # --alpha given beats the record's 1.0; min_length_ratio is the record's; the rest the defaults.
    assert search == SearchConfig(beam_size=2, alpha=0.9, min_length_ratio=0.8)
    translator = load_translator(run, search=search, quiet=True)
    max_length = RunDir(run).read_config()["data"]["max_length"]
    assert translator.search == dataclasses.replace(search, max_input_length=max_length)
    assert load_translator(run, search=search.override(beam_size=3), quiet=True).search.beam_size == 3


def test_the_sampling_flags_join_the_one_value_and_are_checked_by_it():
    assert search_flags.search_from_flags(_search_flag_values([], sampling=True)).sampling is None
    search = search_flags.search_from_flags(_search_flag_values(["--sampling_topp=0.9", "--seed=3"], sampling=True))
    assert search == SearchConfig(sampling=Sampling(top_p=0.9, seed=3))
    with pytest.raises(flags.IllegalFlagValueError, match=r"--sampling_temperature must be > 0, received -1\.0"):
        _search_flag_values(["--sampling_topk=2", "--sampling_temperature=-1"], sampling=True)


def test_the_repetition_guard_is_a_search_flag_and_a_recorded_setting():
    assert search_flags.search_from_flags(_search_flag_values([])).no_repeat_ngram_size == 0
    search = search_flags.search_from_flags(_search_flag_values(["--no_repeat_ngram_size=3"]))
    assert search == SearchConfig(no_repeat_ngram_size=3)
    with pytest.raises(flags.IllegalFlagValueError, match="no_repeat_ngram_size must be >= 0"):
        _search_flag_values(["--no_repeat_ngram_size=-1"])
    assert search_settings({"no_repeat_ngram_size": 2, "chosen_for": "a recipe"}, "config.json") == {
        "no_repeat_ngram_size": 2
    }
    with pytest.raises(UserError, match=r'config.json: "search" has no_repeat_ngram_size=-1; it must be int >= 0'):
        search_settings({"no_repeat_ngram_size": -1}, "config.json")


@pytest.mark.parametrize(
    "search, message",
    [
        ({"alpha": -1.0}, '"search" has alpha=-1.0; it must be float >= 0.0'),
        ({"beam_size": 2.5}, '"search" has beam_size=2.5; it must be int >= 1'),
        ({"alpha": "1.0"}, "\"search\" has alpha='1.0'; it must be float >= 0.0"),
        ({"stopping": "early"}, "\"search\" has stopping='early'; it must be one of 'exact', 'heuristic'"),
        ({"length_penalty": 1.0}, "\"search\" has 'length_penalty', which is not one of beam_size, alpha, "),
        ([1.0, 0.8], '"search" must be an object of search settings, found [1.0, 0.8]'),
    ],
)
def test_a_bad_recorded_search_is_one_clear_error_naming_the_file(tiny_run, tmp_path, search, message):
    run = _with_search(tiny_run, tmp_path / "run", search)
    with pytest.raises(UserError) as refused:
        search_flags.apply_run_search(_search_flag_values([]), run)
    assert str(refused.value).startswith(f"{os.path.join(run, 'config.json')}: {message}")


@pytest.mark.slow  # A subprocess.
def test_translate_py_refuses_a_bad_recorded_search_in_one_line(tiny_run, tmp_path):
    """The tools' wiring of the refusals above (evaluate.py and the export call the same
    `apply_run_search`): status 2, the message, no traceback."""
    run = _with_search(tiny_run, tmp_path / "run", {"alpha": -1.0})
    completed = _tool("translate.py", f"--model_dir={run}", f"--input={os.devnull}")
    assert completed.returncode == 2
    message = '"search" has alpha=-1.0; it must be float >= 0.0'
    assert f"translate.py: error: {os.path.join(run, 'config.json')}: {message}" in completed.stderr
    assert "Traceback" not in completed.stderr


def _other_value(name):
    """A valid value of setting `name` other than its default."""
    default = getattr(DEFAULT_SEARCH, name)
    if name in SETTING_CHOICES:
        return next(choice for choice in SETTING_CHOICES[name] if choice != default)
    return check_setting(name, 3 if default is None else default + (1 if isinstance(default, int) else 0.5))


class _Handed(Exception):
    """What `models.beam_search` handed the one loop, caught before the loop runs."""


def _what_the_search_gets(search, tiny_model, monkeypatch):
    """What `models.beam_search` hands the one loop when the shared tiny model translates SENTENCES
    with `search` (the rows `Translator` encodes, searched eagerly): the loop's settings, each
    sentence's maximum length, the parts, and the width of the first step's logits (a shortlist's
    columns)."""
    import keras
    import numpy as np

    from inference.translator import Translator
    from models import beam_search
    from models.translation import translate_ids
    from models.vocabulary_shortlist import LexicalTable

    model, tokenizer, _, _ = tiny_model
    # Each source piece's candidate: the piece of the next id.
    table = LexicalTable(np.arange(1, model.vocabulary_size + 1)[:, None] % model.vocabulary_size, np.arange(8))

    def handed(next_logits_fn, initial_ids, initial_state, max_lengths, parts, settings):
        lengths = keras.ops.convert_to_numpy(max_lengths).tolist()
        ids = keras.ops.repeat(initial_ids, settings.beam_size, axis=0)
        width = next_logits_fn(ids, keras.ops.convert_to_tensor(0, "int32"), initial_state)[0].shape[-1]
        parts = [type(part).__name__ for part in parts]
        raise _Handed(settings._replace(reorder_state=None), lengths, parts, width)

    monkeypatch.setattr(beam_search, "run_search", handed)
    rows = Translator(model, tokenizer, search).encode(SENTENCES)
    width = max(len(row) for row in rows)
    with pytest.raises(_Handed) as caught:
        translate_ids(
            model,
            keras.ops.convert_to_tensor([row + [model.pad_id] * (width - len(row)) for row in rows]),
            search,
            lexical_table=table,
        )
    monkeypatch.undo()
    return caught.value.args


def test_every_setting_has_a_flag_is_recorded_and_read_back_and_reaches_the_search(tiny_model, tmp_path, monkeypatch):
    """Each field of `SearchConfig` but `sampling`, changed alone: a search flag of each tool (with
    its field's help) sets it; a run records it (unless it is the run's own input bound) and the
    tools read it back; an export records it; and the search the model runs differs for it."""
    from inference.runs import RECORDED_SEARCH, ModelDirError
    from inference.saved_model_translator import export_settings

    settings = [field.name for field in dataclasses.fields(SearchConfig) if field.name != "sampling"]
    assert settings == list(SEARCH_SETTINGS) and set(RECORDED_SEARCH) < set(settings)
    default_search = _what_the_search_gets(DEFAULT_SEARCH, tiny_model, monkeypatch)
    for name in settings:
        value = _other_value(name)
        changed = DEFAULT_SEARCH.override(**{name: value})
        for export in (False, True):
            values = flags.FlagValues()
            search_flags.define_search_flags(export=export, flag_values=values)
            assert values[name].help == SETTING_HELP[name][export] and values[name].help
        values = _search_flag_values([f"--{name}={value}"])
        assert search_flags.search_from_flags(values) == changed
        recorded = export_settings({"export": changed.search_settings()})
        assert SearchConfig(**{key: recorded[key] for key in SEARCH_SETTINGS}) == changed
        run = tmp_path / name
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"search": {name: value}}))
        if name in RECORDED_SEARCH:
            assert RunDir(str(run)).recorded_search() == {name: value}
            values = _search_flag_values([])
            assert search_flags.apply_run_search(values, str(run)) is not None
            assert search_flags.search_from_flags(values) == changed
        else:
            with pytest.raises(ModelDirError, match=f"has '{name}', which is not one of"):
                RunDir(str(run)).recorded_search()
        assert _what_the_search_gets(changed, tiny_model, monkeypatch) != default_search, name
