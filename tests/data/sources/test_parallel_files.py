import gzip
import os

import pytest

from data.sources import parallel_files


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
    with pytest.raises(parallel_files.ParallelDataError, match=r"a.de ends after line 2, .*a.en goes on at line 3"):
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


def _gzip(path, data: bytes) -> str:
    with gzip.open(path, "wb") as handle:
        handle.write(data)
    return str(path)


def test_gzip_files_read_as_their_text(tmp_path):
    text = "".join(f"Satz {i}.\tSentence {i}.\n" for i in range(5000)).encode()
    plain = _write(tmp_path / "a.tsv", text)
    packed = _gzip(tmp_path / "a.tsv.gz", text)
    stats = parallel_files.ReadStats()
    assert list(parallel_files.read_tsv(packed, stats)) == list(parallel_files.read_tsv(plain))
    assert stats.pairs == 5000 and stats.bytes_done == os.path.getsize(packed)


def test_a_truncated_gzip_file_names_the_file_and_the_last_line_read(tmp_path):
    text = "".join(f"Satz {i}.\tSentence {i}.\n" for i in range(20000)).encode()
    whole = tmp_path / "whole.tsv.gz"
    _gzip(whole, text)
    cut = _write(tmp_path / "cut.tsv.gz", whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(
        parallel_files.ParallelDataError, match=r"cut.tsv.gz: truncated gzip file, it ends after line \d+"
    ):
        list(parallel_files.read_tsv(cut))
    corrupt = _write(tmp_path / "corrupt.tsv.gz", b"\x1f\x8b\x08\x00" + b"\x00" * 40)
    with pytest.raises(parallel_files.ParallelDataError, match=r"corrupt.tsv.gz: corrupt gzip data after line 0"):
        list(parallel_files.read_tsv(corrupt))


def test_globs_expand_to_their_files_in_name_order_and_pair_source_with_target(tmp_path):
    for index in (2, 1, 10):
        _write(tmp_path / f"part{index}.en", f"One {index}.\nTwo {index}.\n".encode())
        _gzip(tmp_path / f"part{index}.de.gz", f"Eins {index}.\nZwei {index}.\n".encode())
    sources = parallel_files.expand(str(tmp_path / "part*.en"))
    targets = parallel_files.expand(str(tmp_path / "part*.de.gz"))
    assert [os.path.basename(path) for path in sources] == ["part1.en", "part10.en", "part2.en"]
    pairs = list(parallel_files.read_parallel(sources, targets))
    assert pairs[:3] == [("One 1.", "Eins 1."), ("Two 1.", "Zwei 1."), ("One 10.", "Eins 10.")] and len(pairs) == 6
    assert parallel_files.expand(str(tmp_path / "part1.en")) == [str(tmp_path / "part1.en")]
    with pytest.raises(parallel_files.ParallelDataError, match=r"part\*.fr: no file matches this pattern"):
        parallel_files.expand(str(tmp_path / "part*.fr"))
    with pytest.raises(parallel_files.ParallelDataError, match=r"3 source files .* but 2 target files"):
        list(parallel_files.read_parallel(sources, targets[:2]))


def test_the_file_pair_that_differs_in_length_is_named_with_its_line(tmp_path):
    sources = [_write(tmp_path / "a.en", b"One.\nTwo.\n"), _write(tmp_path / "b.en", b"Three.\nFour.\nFive.\n")]
    targets = [_write(tmp_path / "a.de", b"Eins.\nZwei.\n"), _write(tmp_path / "b.de", b"Drei.\n")]
    with pytest.raises(parallel_files.ParallelDataError, match=r"b.de ends after line 1, .*b.en goes on at line 2"):
        list(parallel_files.read_parallel(sources, targets))
    empty = _write(tmp_path / "c.tsv", b"")
    with pytest.raises(parallel_files.ParallelDataError, match=r"c.tsv: file is empty"):
        list(parallel_files.read_tsv([_write(tmp_path / "d.tsv", b"A.\tB.\n"), empty]))
    packed_empty = _gzip(tmp_path / "e.tsv.gz", b"")
    with pytest.raises(parallel_files.ParallelDataError, match=r"e.tsv.gz: file is empty \(no lines\)"):
        list(parallel_files.read_tsv([_write(tmp_path / "d.tsv", b"A.\tB.\n"), packed_empty]))
