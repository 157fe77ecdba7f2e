"""benchmarks/quality.py: the PyTorch baseline's loss, greedy and beam search checked by hand; a
smoke run of the baseline alone (fast tier) and a whole run (both systems trained a few steps,
every test source scored) read back from its table."""

import itertools
import json
import math
import os

import numpy as np
import pytest

# On a machine shared with other jobs, OpenMP threads that spin while waiting make PyTorch's small
# operations many times slower; waiting passively keeps the test's time bounded (set before import).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

from common.special_ids import BOS_ID, EOS_ID, PAD_ID  # noqa: E402

SMALL_MODEL = dict(num_layers=2, hidden_dim=16, num_heads=2, intermediate_dim=32, dropout=0.0)


@pytest.fixture
def quality(benchmark_script):
    module, _ = benchmark_script("quality")
    return module


def _model(quality, vocabulary_size, normalize_first=False, seed=0):
    torch.manual_seed(seed)
    model = quality.torch_transformer(vocabulary_size, {**SMALL_MODEL, "normalize_first": normalize_first})
    return model.eval()


def _log_probs(model, source, target):
    """log P of every token of `target` (a list) given `source` ([1, length] int64), forced."""
    decoder_input = torch.tensor([[BOS_ID] + target[:-1]])
    with torch.no_grad():
        memory, padding = model.encode(source)
        logits = model.decode(decoder_input, memory, padding)[0]
    return torch.log_softmax(logits, -1)[torch.arange(len(target)), torch.tensor(target)].numpy()


def test_loss_is_label_smoothed_cross_entropy_per_non_pad_token(quality):
    vocabulary, smoothing = 11, 0.1
    model = _model(quality, vocabulary)
    rng = np.random.default_rng(0)
    source = torch.from_numpy(rng.integers(4, vocabulary, size=(3, 6)))
    target = rng.integers(4, vocabulary, size=(3, 5))
    target[0, 3:] = PAD_ID
    target[2, 1:] = PAD_ID
    target_input = torch.from_numpy(np.concatenate([np.full((3, 1), BOS_ID), target[:, :-1]], axis=1))
    target_input[target_input == EOS_ID] = PAD_ID
    logits = model(source, target_input)
    loss, tokens = quality.label_smoothed_loss(logits, torch.from_numpy(target), smoothing)

    logits = logits.detach().double().numpy()
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    smoothed = np.full(logits.shape, smoothing / vocabulary) + (1 - smoothing) * np.eye(vocabulary)[target]
    per_token = -(smoothed * log_softmax).sum(-1)
    mask = target != PAD_ID
    assert int(tokens) == mask.sum() == 9
    assert abs(loss.item() - per_token[mask].sum() / mask.sum()) < 1e-5


def test_noam_rate_is_the_projects_schedule(quality):
    from models.learning_rate_schedule import TransformerSchedule

    schedule = TransformerSchedule(hidden_dim=128, warmup_steps=30, scale=2.0)
    for iteration in (0, 10, 29, 30, 100):
        assert abs(quality.noam_rate(iteration, 128, 30, 2.0) - float(schedule(iteration))) < 1e-7


@pytest.mark.parametrize("normalize_first", [False, True])
def test_greedy_returns_the_argmax_path_alone_and_in_a_batch(quality, normalize_first):
    vocabulary, extra = 12, 6
    model = _model(quality, vocabulary, normalize_first, seed=3)
    rows = [[5, 7, 9, EOS_ID], [6, EOS_ID], [4, 8, 10, 11, 5, EOS_ID]]
    batch = torch.full((3, 6), PAD_ID, dtype=torch.long)
    for index, row in enumerate(rows):
        batch[index, : len(row)] = torch.tensor(row)
    together = quality.greedy_search(model, batch, extra)
    for row, output in zip(rows, together):
        source = torch.tensor([row])
        assert quality.greedy_search(model, source, extra) == [output]
        ended = len(output) < len(row) + extra
        forced = output + [EOS_ID] if ended else output
        assert len(forced) <= len(row) + extra
        decoder_input = torch.tensor([[BOS_ID] + forced[:-1]])
        with torch.no_grad():
            memory, padding = model.encode(source)
            logits = model.decode(decoder_input, memory, padding)[0]
        assert logits.argmax(-1).tolist() == forced
        assert EOS_ID not in output


def _padded(rows, width):
    batch = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    for index, row in enumerate(rows):
        batch[index, : len(row)] = torch.tensor(row)
    return batch


@pytest.mark.parametrize("normalize_first", [False, True])
def test_decode_step_gives_the_full_decodes_last_logits_at_every_step(quality, normalize_first):
    """Fed one token a step, `decode_step` gives the logits `decode` gives at the last position of
    the whole output so far, with PAD sources and PAD outputs (left out as keys by both), and after
    the state's rows are reordered (and repeated) as a beam search does."""
    vocabulary, length = 13, 9
    model = _model(quality, vocabulary, normalize_first, seed=7)
    source = _padded([[5, 7, 9, 4, 6, EOS_ID], [6, EOS_ID], [4, 8, 10, 11, EOS_ID]], 6)
    rng = np.random.default_rng(1)
    target = torch.from_numpy(rng.integers(3, vocabulary, size=(3, length)))
    target[:, 0] = BOS_ID
    target[0, 4] = PAD_ID  # A PAD among tokens, as a beam search may choose.
    target[1, 3] = EOS_ID
    target[1, 4:] = PAD_ID  # A finished greedy output.
    reorder_at, rows = 5, torch.tensor([2, 0, 0])
    with torch.no_grad():
        memory, padding = model.encode(source)
        state = model.start_decoding(memory, padding)
        for step in range(length):
            if step == reorder_at:
                state = state.reorder(rows)
                target, memory, padding = target[rows], memory[rows], padding[rows]
            logits, state = model.decode_step(target[:, step], state)
            full = model.decode(target[:, : step + 1], memory, padding)[:, -1]
            assert state.length == step + 1
            assert logits.shape == full.shape == (3, vocabulary)
            assert torch.allclose(logits, full, atol=1e-5, rtol=0), (step, (logits - full).abs().max())


@pytest.mark.parametrize("normalize_first", [False, True])
def test_the_searches_find_what_they_find_without_the_cache(quality, normalize_first):
    """Greedy and beam search on the incremental state return the tokens they return when every
    step recomputes the decoder over the whole outputs (`incremental=False`), with and without a
    minimum length."""
    vocabulary, extra = 20, 5
    model = _model(quality, vocabulary, normalize_first, seed=11)
    rng = np.random.default_rng(2)
    rows = [list(rng.integers(4, vocabulary, size=n)) + [EOS_ID] for n in (6, 1, 3, 4, 2)]
    source = _padded(rows, 7)
    for ratio in (0.0, 1.0):
        reference = quality.greedy_search(model, source, extra, ratio, incremental=False)
        assert quality.greedy_search(model, source, extra, ratio) == reference
        for beam_size in (2, 4):
            reference = quality.beam_search(model, source, beam_size, 0.6, extra, ratio, incremental=False)
            assert quality.beam_search(model, source, beam_size, 0.6, extra, ratio) == reference


def test_beam_search_finds_the_exhaustive_best(quality):
    """With a beam wider than every prefix, the search returns the best complete hypothesis by
    log P / length_penalty, found by scoring every one (EOS-ended, or cut at the maximum length)."""
    vocabulary, extra, alpha = 6, 1, 0.6
    model = _model(quality, vocabulary, seed=5)
    source = torch.tensor([[4, EOS_ID]])
    width = (vocabulary - 1) ** (source.shape[1] + extra)
    found = quality.beam_search(model, source, beam_size=width, alpha=alpha, max_extra_length=extra)
    assert found == [_exhaustive_best(quality, model, source, extra, alpha)]


def _exhaustive_best(quality, model, source, extra, alpha, min_length=0):
    """The best hypothesis by log P / length_penalty over every EOS-ended one of at least
    `min_length` tokens (EOS included) and every one cut at the maximum length; EOS dropped."""
    vocabulary = model.embedding.num_embeddings
    max_length = source.shape[1] + extra
    others = [token for token in range(vocabulary) if token != EOS_ID]
    hypotheses = [
        list(prefix) + [EOS_ID]
        for n in range(max(min_length - 1, 0), max_length)
        for prefix in itertools.product(others, repeat=n)
    ]
    hypotheses += [list(prefix) for prefix in itertools.product(others, repeat=max_length)]
    scored = [
        (_log_probs(model, source, hypothesis).sum() / quality.length_penalty(len(hypothesis), alpha), hypothesis)
        for hypothesis in hypotheses
    ]
    best = max(scored, key=lambda item: item[0])[1]
    return best[:-1] if best[-1] == EOS_ID else best


def test_a_minimum_length_bars_eos_until_it_is_reached(quality):
    """floor(n * ratio) output tokens at least (EOS counted, n the source tokens with EOS): beam
    search returns the exhaustive best among the hypotheses that long, greedy the argmax path with
    EOS barred before it; on some of these models the unconstrained searches end shorter."""
    vocabulary, extra, alpha, ratio = 6, 1, 0.6, 1.0
    source = torch.tensor([[4, EOS_ID]])
    min_length = math.floor(source.shape[1] * ratio)
    width = (vocabulary - 1) ** (source.shape[1] + extra)
    changed = 0
    for seed in range(3):  # Seed 2 is one whose unconstrained beam search ends shorter.
        model = _model(quality, vocabulary, seed=seed)
        best = _exhaustive_best(quality, model, source, extra, alpha, min_length)
        found = quality.beam_search(model, source, width, alpha, extra, min_length_ratio=ratio)
        assert found == [best] and len(best) + 1 >= min_length
        free = quality.beam_search(model, source, width, alpha, extra)
        assert free == [_exhaustive_best(quality, model, source, extra, alpha)]
        changed += free != found

        # Greedy, one token at a time by hand: the argmax, EOS barred while the output with it would
        # be shorter than the minimum (the search drops PAD tokens a random model may pick).
        path = [BOS_ID]
        with torch.no_grad():
            memory, padding = model.encode(source)
            while len(path) <= source.shape[1] + extra and path[-1] != EOS_ID:
                logits = model.decode(torch.tensor([path]), memory, padding)[0, -1]
                if len(path) < min_length:
                    logits[EOS_ID] = -math.inf
                path.append(int(logits.argmax()))
        expected = [token for token in path[1:] if token not in (EOS_ID, PAD_ID)]
        (greedy,) = quality.greedy_search(model, source, extra, min_length_ratio=ratio)
        assert greedy == expected
        changed += quality.greedy_search(model, source, extra) != [greedy]
    assert changed > 0


def test_paired_bootstrap_tells_a_better_system_from_an_equal_one(quality):
    references = [
        line.split("\t")[2].strip()
        for line in open(os.path.join(os.path.dirname(__file__), "..", "fixtures", "deb_en_de_sample.tsv"))
    ][:200]
    reversed_words = [" ".join(reference.split()[::-1]) for reference in references]
    better = quality.paired_bootstrap(references, reversed_words, references, "de", samples=200)
    assert better["project_minus_torch_bleu"] > 10 and better["p_bleu"] < 0.05
    assert better["project_minus_torch_chrf"] > 0 and better["p_chrf"] < 0.05
    # Equally good: each garbles a different tenth of the sentences.
    garbled = [
        [
            words if index % 10 == offset else reference
            for index, (reference, words) in enumerate(zip(references, reversed_words))
        ]
        for offset in (0, 5)
    ]
    equal = quality.paired_bootstrap(*garbled, references, "de", samples=200)
    assert abs(equal["project_minus_torch_bleu"]) < 5 and equal["p_bleu"] > 0.05 and equal["p_chrf"] > 0.05


def test_the_baseline_alone_trains_on_the_projects_batches_and_scores_every_source(
    quality, sample_corpus, tmp_path, capsys
):
    """The smoke run: the PyTorch baseline alone (its vocabulary trained as train.py would, the
    project's batches, both of its searches) at the smallest sizes; the project's own training and
    scoring are test_whole_run_prints_one_row_per_system_source_and_search's."""
    output_dir = tmp_path / "quality"
    arguments = [
        f"--cache_dir={os.path.dirname(sample_corpus.root)}",
        f"--output_dir={output_dir}",
        "--systems=torch",
        "--steps=2",
        "--batch_tokens=512",
        "--warmup_steps=2",
        "--vocab_size=500",
        "--max_length=32",
        "--sentences=2",
        "--max_extra_length=3",
        "--normalize_first=post",
        "--beam_sizes=1,2",
        "--torch_beam",
    ]
    rows = quality.main(arguments)
    sources = ["test"] + [f"test.{source}" for source in sorted(sample_corpus.test_by_source)]
    expected = [("torch", "post-norm", source, search) for search in ("greedy", "beam 2") for source in sources]
    assert [(row["system"], row["norm"], row["source"], row["search"]) for row in rows] == expected
    for row in rows:
        assert row["sentences"] == (2 * (len(sources) - 1) if row["source"] == "test" else 2)
        assert 0.0 <= row["bleu"] <= 100.0 and 0.0 <= row["chrf"] <= 100.0 and "p_bleu" not in row
        assert math.isfinite(row["mean_train_loss"]) and row["target_tokens_per_second"] > 0
    training = json.loads((output_dir / "quality.json").read_text())["training"]
    assert list(training) == ["torch post-norm"] and len(training["torch post-norm"]["step_tokens"]) == 2
    assert (output_dir / "torch-vocabulary" / "spm.model").exists()
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert printed[0] == quality.TABLE_HEADER and len(printed) == 1 + len(expected)
    for source in sources[1:]:
        for beam in (1, 2):
            hypotheses = (output_dir / "torch-post-norm" / f"{source}.beam{beam}.hyp").read_text(encoding="utf-8")
            assert len(hypotheses.splitlines()) == 2


@pytest.mark.slow  # Two trainings and four scorings by evaluate().
def test_whole_run_prints_one_row_per_system_source_and_search(quality, sample_corpus, tmp_path, capsys):
    """Both systems, greedy: the baseline's beam search in a whole run is
    test_the_baseline_alone_trains_on_the_projects_batches_and_scores_every_source's."""
    output_dir = tmp_path / "quality"
    arguments = [
        f"--cache_dir={os.path.dirname(sample_corpus.root)}",
        f"--output_dir={output_dir}",
        "--steps=4",
        "--batch_tokens=512",
        "--warmup_steps=2",
        "--vocab_size=500",
        "--max_length=32",
        "--normalize_first=pre",
        "--sentences=3",
        "--max_extra_length=3",
        "--beam_sizes=1",
    ]
    rows = quality.main(arguments)
    sources = ["test"] + [f"test.{source}" for source in sorted(sample_corpus.test_by_source)]
    expected = [(system, "pre-norm", source, "greedy") for system in ("project", "torch") for source in sources]
    assert [(row["system"], row["norm"], row["source"], row["search"]) for row in rows] == expected
    for row in rows:
        # The per-source files partition the test split: its row is their first 3 sentences each.
        assert row["sentences"] == (3 * (len(sources) - 1) if row["source"] == "test" else 3)
        assert 0.0 <= row["bleu"] <= 100.0 and 0.0 <= row["chrf"] <= 100.0
        assert row["length_ratio"] >= 0.0 and "|tok:13a|" in row["bleu_signature"]
        assert row["train_seconds"] > 0 and row["target_tokens_per_second"] > 0
        assert math.isfinite(row["mean_train_loss"])
    # Both systems read the same target tokens at every step: the same batches (the script checks it too).
    training = json.loads((output_dir / "quality.json").read_text())["training"]
    project, baseline = training["project pre-norm"], training["torch pre-norm"]
    assert len(project["step_tokens"]) == 4 and project["step_tokens"] == baseline["step_tokens"]
    # One definition of the mean training loss (Keras's: steps weighted by sentences) on the same
    # batches from the same initialisation scheme: close, where a sum or a last value would not be.
    assert abs(project["mean_train_loss"] - baseline["mean_train_loss"]) < 0.1 * baseline["mean_train_loss"]
    compared = [row for row in rows if "p_bleu" in row]  # Each torch row, against the project's same search.
    assert [(row["system"], row["search"]) for row in compared] == [("torch", "greedy")] * len(sources)
    assert all(0 <= row["p_bleu"] <= 1 and 0 <= row["p_chrf"] <= 1 for row in compared)
    out = capsys.readouterr().out
    assert "project - torch, pre-norm, greedy, test: BLEU" in out
    printed = [line for line in out.splitlines() if line.startswith("| ")]
    assert printed[0] == quality.TABLE_HEADER
    assert len(printed) == 1 + len(expected)
    assert (output_dir / "project-pre-norm" / "model.keras").exists()
    for source in sources[1:]:  # The baseline's translations, beside the project's.
        hypotheses = (output_dir / "torch-pre-norm" / f"{source}.beam1.hyp").read_text(encoding="utf-8")
        assert len(hypotheses.splitlines()) == 3
        assert (output_dir / "project-pre-norm" / f"{source}.beam1.hyp").exists()


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--steps=0", "--steps=0 must be at least 1"),
        ("--dropout=1.0", "--dropout=1.0 must be in [0, 1)"),
        ("--min_length_ratio=-0.5", "--min_length_ratio=-0.5 must be at least 0"),
        ("--systems=project,fairseq", "--systems='project,fairseq': expected a comma-separated list"),
    ],
)
def test_the_script_refuses_a_bad_flag_with_one_line(benchmark_script, flag, message):
    """Run as a script (its `__main__` quiets TensorFlow's logs, as the tools do), a bad value is
    one line on stderr and exit status 2, before anything is built or trained."""
    import subprocess
    import sys

    _, path = benchmark_script("quality")
    completed = subprocess.run([sys.executable, path, flag], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2, completed.stderr[-2000:]
    (line,) = completed.stderr.strip().splitlines()
    assert line.startswith("quality.py: error: ") and message in line
