"""Translates text from stdin or a file to stdout or a file, one line per line, in input order.

    echo "Open the file." | python translate.py --model_dir=runs/demo
    python translate.py --export_dir=runs/demo/export --input=doc.en --output=doc.de
    python translate.py --model_dir=runs/demo --checkpoint=last < doc.en      # the newest weights, not the best
    python translate.py --model_dir=runs/demo --n_best=4 < doc.en            # i ||| hypothesis ||| score
    python translate.py --model_dir=runs/demo --score < pairs.tsv             # source<TAB>target lines
    python translate.py --model_dir=runs/demo --score --src=doc.en --tgt=doc.de
    python translate.py --model_dir=runs/de-en --sampling_topk=0 --seed=1 < mono.de   # back-translation
    python translate.py --model_dir=runs/de-en --sampling_topp=0.9 --seed=1 < mono.de # nucleus sampling
    python translate.py --model_dir=runs/demo --prefix < pairs.tsv            # source<TAB>target prefix lines
    python translate.py --model_dir=runs/demo --constraints=terms.tsv < doc.en  # tab-separated phrases per line
    python translate.py --model_dir=runs/demo --alignments < doc.en           # translation<TAB>0-0 1-2 2-1
    python translate.py --model_dir=runs/a,runs/b < doc.en                    # an ensemble of two runs
    python translate.py --model_dir=runs/demo --format=jsonl < doc.en         # confidence and token scores
    python translate.py --model_dir=runs/demo --markup < help.txt             # tags and placeholders kept
    python translate.py --model_dir=runs/demo --nosplit_sentences < test.en   # lines whole, not sentence by sentence

Piped input is read in windows of --window lines, sorted by length and batched; at a terminal every
line is answered as soon as it is entered. Only translations (or scores) go to stdout; what went
wrong with a line (invalid UTF-8, a line cut to the maximum input length) goes to stderr with its
line number. Exit status: 0 done, 2 bad flags or input, 1 a failure during the work (an output not
written), 130 interrupted (Ctrl-C), 141 the reader of stdout went away (as `head` does; what it read
is complete).
"""

import os
import signal
import sys

from absl import flags

from cli import search_flags, translate_flags, translate_tool
from common import quiet_logs
from common.errors import UserError, run_tool

FLAGS = flags.FLAGS
translate_flags.define_translate_flags()
flags.adopt_module_key_flags(search_flags)  # listed by --help as this tool's own
flags.adopt_module_key_flags(translate_flags)
run = translate_tool.run  # what main runs, with its output writer (tests/evaluation/conftest.py calls it)


def main(argv):
    del argv
    quiet_logs.quiet_tool_output()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        with translate_tool.output_lines(FLAGS.output) as write:
            run(write)
    except BrokenPipeError:
        return translate_tool.broken_pipe()
    except UserError as error:
        print(f"translate.py: error: {error}", file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        print("translate.py: interrupted", file=sys.stderr)
        return translate_tool.EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    run_tool(main, "translate.py")
