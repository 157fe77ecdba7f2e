import pytest

from data import parallel_files


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_read_parallel_skips_and_counts_empty_lines(tmp_path):
    src = _write(tmp_path / "a.en", b"One.\n\nThree.\nFour.\n")
    tgt = _write(tmp_path / "a.de", b"Eins.\nZwei.\nDrei.\n \n")
    stats = parallel_files.ReadStats()
    assert list(parallel_files.read_parallel(src, tgt, stats)) == [("One.", "Eins."), ("Three.", "Drei.")]
    assert (stats.pairs, stats.empty_lines_skipped) == (2, 2)


def test_parallel_files_of_different_length(tmp_path):
    src = _write(tmp_path / "a.en", b"One.\nTwo.\nThree.\n")
    tgt = _write(tmp_path / "a.de", b"Eins.\nZwei.\n")
    with pytest.raises(parallel_files.ParallelDataError, match=r"a.en has 3 lines, .*a.de has 2 lines"):
        list(parallel_files.read_parallel(src, tgt))


def test_invalid_utf8_names_file_and_line(tmp_path):
    src = _write(tmp_path / "a.en", b"One.\nTw\xffo.\n")
    tgt = _write(tmp_path / "a.de", b"Eins.\nZwei.\n")
    with pytest.raises(parallel_files.ParallelDataError, match=r"a.en:2: invalid UTF-8"):
        list(parallel_files.read_parallel(src, tgt))


def test_empty_file(tmp_path):
    src = _write(tmp_path / "a.en", b"")
    tgt = _write(tmp_path / "a.de", b"Eins.\n")
    with pytest.raises(parallel_files.ParallelDataError, match=r"a.en: file is empty"):
        list(parallel_files.read_parallel(src, tgt))
    with pytest.raises(parallel_files.ParallelDataError, match=r"a.en: file is empty"):
        list(parallel_files.read_tsv(src))


def test_tsv_row_without_tab_names_file_and_line(tmp_path):
    path = _write(tmp_path / "p.tsv", b"One.\tEins.\nTwo. Zwei.\n")
    with pytest.raises(parallel_files.ParallelDataError, match=r"p.tsv:2: expected 'source<TAB>target'"):
        list(parallel_files.read_tsv(path))


def test_tsv_round_trip_and_empty_rows(tmp_path):
    path = str(tmp_path / "p.tsv")
    assert parallel_files.write_tsv(path, [("Ä b", "c"), ("d", "e")]) == 2
    with open(path, "a", encoding="utf-8") as f:
        f.write("\nx\t\n")
    stats = parallel_files.ReadStats()
    assert list(parallel_files.read_tsv(path, stats)) == [("Ä b", "c"), ("d", "e")]
    assert stats.empty_lines_skipped == 2
    with pytest.raises(ValueError, match="tab or line break"):
        parallel_files.write_tsv(path, [("a\tb", "c")])
