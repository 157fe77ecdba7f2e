"""`evaluation.reference_sets`: reading users' source/reference files and corpus TSVs (byte-order marks,
bytes that are not UTF-8, empty files)."""

import codecs

import pytest

from evaluation import reference_sets


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_bytes(codecs.BOM_UTF8 + b"Open the file.\r\nPrint\n")
    ref.write_bytes(codecs.BOM_UTF8 + "Öffnen Sie die Datei.\nDrucken".encode())
    sources, references = reference_sets.read_parallel_files(str(src), str(ref))
    assert sources == ["Open the file.", "Print"]
    assert references == ["Öffnen Sie die Datei.", "Drucken"]
    tsv = tmp_path / "test.tsv"
    tsv.write_bytes(codecs.BOM_UTF8 + "Open the file.\tÖffnen Sie die Datei.\n".encode())
    assert reference_sets.read_tsv_pairs(str(tsv)) == (["Open the file."], ["Öffnen Sie die Datei."])


def test_bytes_that_are_not_utf8_are_reported_with_file_line_and_offset(tmp_path):
    src = tmp_path / "src.en"
    # Far more than one read buffer before the bad byte, so a buffer offset would show.
    good = "Open the file and print it.\n" * 5000
    src.write_bytes(good.encode("utf-8") + b"Caf\xe9 au lait\nPrint\n")
    with pytest.raises(reference_sets.TestSetError) as raised:
        reference_sets.read_lines(str(src))
    assert str(raised.value).startswith(f"{src}:5001: not UTF-8 text: byte 0xe9 at byte offset 3 in the line")


@pytest.mark.parametrize("content", [b"", codecs.BOM_UTF8], ids=["empty", "bom_only"])
def test_an_empty_test_set_is_an_error_naming_the_file(tmp_path, content):
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_bytes(content)
    ref.write_bytes(content)
    with pytest.raises(reference_sets.TestSetError, match=f"--src {src} is empty"):
        reference_sets.read_parallel_files(str(src))
    with pytest.raises(reference_sets.TestSetError, match=f"--src {src} is empty"):
        reference_sets.read_parallel_files(str(src), str(ref))
    with pytest.raises(reference_sets.TestSetError, match=f"{src} is empty"):
        reference_sets.read_tsv_pairs(str(src))


def test_a_single_empty_line_is_one_sentence(tmp_path):
    src = tmp_path / "src.en"
    src.write_text("\n", encoding="utf-8")
    assert reference_sets.read_parallel_files(str(src)) == ([""], None)
