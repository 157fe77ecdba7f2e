import gzip
import json
import subprocess
import sys

import pytest

from tests.data.helpers import make_pairs, write_parallel
from tests.helpers import REPO_ROOT, run_logged, tool_flags


def test_command_line_user_corpus(tmp_path):
    pairs = make_pairs(200, seed=4)
    for part in range(3):  # Two gzip-compressed files per side, and one plain.
        suffix = ".gz" if part else ""
        with _open(tmp_path / f"part{part}.en{suffix}") as en, _open(tmp_path / f"part{part}.de{suffix}") as de:
            en.write("".join(f"{english}\n" for english, _ in pairs[part::3]).encode())
            de.write("".join(f"{german}\n" for _, german in pairs[part::3]).encode())
    result = run_logged(  # Its output into files, as cron or CI runs it: plain lines.
        [
            sys.executable,
            "-m",
            "data.prepare",
            "--corpus=user",
            "--name=cli",
            "--languages=en-de",
            f"--cache_dir={tmp_path / 'cache'}",
            f"--train_src={tmp_path / 'part*.en*'}",
            f"--train_tgt={tmp_path / 'part*.de*'}",
            "--shard_pairs=50",
            "--vocab_size=400",
            "--vocab_sample_lines=150",
        ],
        cwd=REPO_ROOT,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "cache" / "cli" / "manifest.json", encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["total_pairs"] == 200 and len(manifest["inputs"]["train"]) == 6
    assert len(manifest["train_shards"]) == -(-manifest["splits"]["train"] // 50) == 4
    assert "cli: reading: 200 pairs read, 200 kept" in result.stderr
    assert (tmp_path / "cache" / "cli" / "spm-bpe-400.model").exists()


def _open(path):
    return gzip.open(path, "wb") if str(path).endswith(".gz") else open(path, "wb")


def _run_prepare(*args):
    return run_logged([sys.executable, "-m", "data.prepare", *args], cwd=REPO_ROOT, text=True)


def _refused_here(*args):
    """The message of the `UsageError` data.prepare's `main` raises for `args` in this process
    (`run_tool` prints it as `data.prepare: error: ...` and exits with 2). --verbosity=0 keeps
    main from filtering this process's stderr (common/quiet_logs.py)."""
    from absl import app

    from data import prepare

    with tool_flags() as flag_values:
        prepare.define_flags()
        flag_values(["data.prepare", "--verbosity=0", *args])
        with pytest.raises(app.UsageError) as refused:
            prepare.main(["data.prepare"])
    return str(refused.value)


def test_command_line_refuses_user_corpus_flags_without_corpus_user(tmp_path):
    """One refusal through data.prepare (its status, its one line, nothing in the cache), the
    others by its `main` in this process."""
    cache = f"--cache_dir={tmp_path / 'cache'}"

    def refusal(flag):
        return (
            f"{flag.split('=')[0]} describe a user corpus: add --corpus=user "
            "(--corpus=tatoeba-en-es builds a built-in corpus and would ignore them)."
        )

    result = _run_prepare("--corpus=tatoeba-en-es", cache, "--train_tsv=pairs.tsv")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"data.prepare: error: {refusal('--train_tsv=pairs.tsv')}"]
    for flag in ["--languages=en-de", "--name=mine", "--test_src=test.en"]:
        assert _refused_here("--corpus=tatoeba-en-es", cache, flag) == refusal(flag)
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("languages", ["en-", "-de", "en", "en-de-fr"])
def test_command_line_needs_two_language_codes(tmp_path, languages):
    """By data.prepare's `main` in this process (the refusal's way out of the process: the test
    above)."""
    src, tgt = write_parallel(tmp_path, make_pairs(20))
    message = _refused_here(
        "--corpus=user",
        f"--languages={languages}",
        f"--cache_dir={tmp_path / 'cache'}",
        f"--train_src={src}",
        f"--train_tgt={tgt}",
    )
    assert f"--languages must be two codes like en-de, got '{languages}'" in message


def test_command_line_reports_input_errors_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\ttab\nno tab here\n", encoding="utf-8")
    identical = tmp_path / "same.tsv"
    identical.write_text("same\tsame\n1\t1\n", encoding="utf-8")
    cache = f"--cache_dir={tmp_path / 'cache'}"
    for train, message in [
        (bad, f"data.prepare: error: {bad}:2: expected 'source<TAB>target' (one tab)"),
        (identical, f"data.prepare: error: No training pairs left from {identical}"),
        (tmp_path / "missing.tsv", f"data.prepare: error: {tmp_path / 'missing.tsv'}: file not found"),
    ]:
        result = _run_prepare("--corpus=user", "--languages=en-de", cache, f"--train_tsv={train}")
        assert result.returncode == 2
        assert result.stderr.strip().splitlines()[-1].startswith(message), result.stderr
        assert "Traceback" not in result.stderr


def _limit_file_size(limit_bytes):
    """A `preexec_fn`: files larger than `limit_bytes` fail with EFBIG (SIGXFSZ ignored, not fatal)."""
    import resource
    import signal

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return limit


def test_a_corpus_that_cannot_be_written_is_one_error_naming_the_file_and_leaves_nothing(tmp_path):
    """Under a 20 kB file-size limit the training split does not fit: one line naming the file as
    it would have been installed, exit 1 (a failure during the work), and nothing in the cache (no entry, no temporary
    directory); without the limit the same command builds the corpus."""
    src, tgt = write_parallel(tmp_path, make_pairs(2000, seed=5))
    cache = tmp_path / "cache"
    command = [
        sys.executable,
        "-m",
        "data.prepare",
        "--corpus=user",
        "--name=full",
        "--languages=en-de",
        f"--cache_dir={cache}",
        f"--train_src={src}",
        f"--train_tgt={tgt}",
    ]
    result = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, check=False, preexec_fn=_limit_file_size(20_000)
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"data.prepare: error: cannot write {cache / 'full' / '.work' / 'candidates.tsv'}: File too large"
    )
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in cache.iterdir()) == []
    rerun = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert (cache / "full" / "manifest.json").exists()


def test_list_prints_every_built_in_corpus_with_its_pair_counts(tmp_path):
    from data.sources import builtin_corpora  # noqa: PLC0415

    result = _run_prepare("--list", f"--cache_dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["corpus", "language", "train", "dev", "test", "cached", "sources"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert list(rows) == list(builtin_corpora.CORPORA)
    german = builtin_corpora.LANGUAGES["de"].counts
    assert rows["deb-en-de"][1:6] == ["German", str(german["train"]), str(german["dev"]), str(german["test"]), "no"]
    assert "interface strings only" in " ".join(rows["deb-en-uk"])
    assert rows["tatoeba-en-es"][2] == str(builtin_corpora.OTHER_COUNTS["tatoeba-en-es"]["train"])
