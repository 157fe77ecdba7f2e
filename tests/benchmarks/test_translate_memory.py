"""benchmarks/translate_memory.py's parts at tiny sizes: the input it writes, a child's peak RSS,
the report. (Its translate.py command is translate.py's own: tests/evaluation/test_translate_resume.py
runs it with --input and --output.)"""

import sys


def test_inputs_peaks_and_the_report(tmp_path, benchmark_script):
    module, _ = benchmark_script("translate_memory")
    path = tmp_path / "input.txt"
    module.write_input(path, 5, source=["one", "two"])
    assert path.read_text() == "one\ntwo\none\ntwo\none\n"
    assert len(module.sentences()) > 1000
    code, peak, seconds = module.measured([sys.executable, "-c", "b = bytearray(80 << 20); b[::4096] = b'x' * 20480"])
    assert code == 0 and 80 < peak < 120 and seconds > 0  # Not this test process's size.
    results = [dict(lines=10, peak_rss_mb=100.0), dict(lines=1000, peak_rss_mb=125.0)]
    summary = module.report(results, "translate_memory.py --sizes=10,1000")
    assert summary["peak_rss_ratio"] == 1.25 and not summary["flat"] and summary["machine"]["platform"]
    assert 0 < summary["spawner_rss_mb"] < 80
    args = module.parse_args(["--model_dir=runs/tiny", "--work=w", "--sizes=10,1000", "--", "--beam_size=1"])
    assert args.size_list == [10, 1000] and args.translate_flags == ["--beam_size=1"]
