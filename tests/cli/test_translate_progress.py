"""cli/translate_progress.py: the input's lines counted as translate.py reads them, and the progress
line's figures (lines done of the total, rate, time left), plain into a file."""

import io
import os

from cli.translate_progress import InputProgress, count_lines, duration


def test_a_files_lines_are_counted_as_read_and_a_pipes_are_not(tmp_path):
    path = tmp_path / "doc.en"
    path.write_bytes(b"one\r\ntwo\n\nfour without its newline")
    assert count_lines(str(path)) == 4
    path.write_bytes(b"")
    assert count_lines(str(path)) == 0
    assert count_lines(str(tmp_path / "missing")) is None
    reader, writer = os.pipe()
    try:
        assert count_lines(f"/dev/fd/{reader}") is None
    finally:
        os.close(reader)
        os.close(writer)


def test_progress_gives_lines_done_rate_and_time_left_and_the_last_line():
    clock = iter([0.0, 10.0, 20.0, 40.0])  # started, then each report
    stream = io.StringIO()
    progress = InputProgress(total=1000, stream=stream, seconds=0, clock=lambda: next(clock))
    progress.skip(200)  # Done by a killed run: counted, not in the rate.
    progress.advance(100)
    progress.advance(100, sentences=150)
    progress.finish()
    assert stream.getvalue().splitlines() == [
        "translate.py: 300/1000 lines (30.0%), 10.0 lines/s, 1m10s left",
        "translate.py: 400/1000 lines (40.0%), 7.5 sentences/s, 10.0 lines/s, 1m00s left",
        "translate.py: 400/1000 lines (40.0%), 3.8 sentences/s, 5.0 lines/s, in 40s",
    ]


def test_an_unknown_total_and_a_disabled_progress():
    stream = io.StringIO()
    progress = InputProgress(stream=stream, seconds=3600)
    progress.advance(5)
    progress.advance(5)  # Within the interval: not written.
    assert stream.getvalue().startswith("translate.py: 5 lines, ") and "left" not in stream.getvalue()
    quiet = io.StringIO()
    progress = InputProgress(stream=quiet, enabled=False)
    progress.advance(5)
    progress.finish()
    assert quiet.getvalue() == ""
    assert [duration(s) for s in (12, 307, 3720)] == ["12s", "5m07s", "1h02m"]
