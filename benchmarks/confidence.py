"""Does the confidence sort translations by quality? Spearman's rank correlation, sentence by
sentence, of each candidate confidence with sentence chrF (sacreBLEU) on a run's test split and on
`test.ding` (out of domain: dictionary entries), beside the search's length-penalised score's.

Every sentence is translated by `models.translation.translate_ids` (the run's search: beam 4,
alpha 0.6 unless given), its output forced through the model for the per-token log-probabilities
(`inference.confidence.token_scores`), and scored by:

- confidence: exp(mean log p), the product's formula (`inference.confidence.sentence_confidence`);
- minimum: the smallest token probability;
- mixture: the square root of their product (a geometric mixture of the two);
- score: the search's penalised log-probability, what `--with_scores` prints.

    python benchmarks/confidence.py --model_dir=runs/demo                        # test and test.ding
    python benchmarks/confidence.py --model_dir=runs/demo --sentences=300        # a quick look
"""

import argparse
import math
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEASURES = ("confidence", "minimum", "mixture", "score")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="a training run's directory")
    parser.add_argument("--splits", default="test,test.ding", help="splits of the run's corpus, comma-separated")
    parser.add_argument("--sentences", type=int, default=0, help="the first N sentences of each split (0: all)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    return parser.parse_args(argv)


def measures(log_probs, scores):
    """`{measure: [value per sentence]}` of MEASURES from each output's token log-probabilities."""
    import numpy as np

    confidence = [float(np.exp(np.mean(row))) for row in log_probs]
    minimum = [float(np.exp(np.min(row))) for row in log_probs]
    mixture = [math.sqrt(c * m) for c, m in zip(confidence, minimum)]
    return dict(confidence=confidence, minimum=minimum, mixture=mixture, score=list(scores))


def translate(model, source_rows, batch_size, beam_size, alpha):
    """Each source row's search output (ids) and penalised score, batched by length."""
    import keras

    from inference.translator import compile_search, length_batches
    from models.search_config import SearchConfig
    from models.translation import translate_ids

    settings = SearchConfig(beam_size=beam_size, alpha=alpha)
    search = compile_search(lambda source: translate_ids(model, source, settings), model.variables)
    outputs, scores = [None] * len(source_rows), [0.0] * len(source_rows)
    for indices, batch in length_batches(source_rows, batch_size, model.pad_id):
        ids, batch_scores = search(keras.ops.convert_to_tensor(batch))
        ids, batch_scores = keras.ops.convert_to_numpy(ids)[:, 0], keras.ops.convert_to_numpy(batch_scores)[:, 0]
        for row, index in enumerate(indices):
            outputs[index], scores[index] = ids[row].tolist(), float(batch_scores[row])
    return outputs, scores


def measure_split(model, tokenizer, run_config, args, split):
    """`{"sentences", "chrf", measure: Spearman rho}` of one split."""
    import numpy as np
    import sacrebleu
    import tensorflow as tf
    from scipy.stats import spearmanr

    from evaluation import evaluator
    from inference.confidence import token_scores
    from inference.translator import Translator
    from models.search_config import SearchConfig

    sources, references, _, _ = evaluator.load_test_set(
        evaluator.EvalConfig(model_dir=args.model_dir, split=split), run_config
    )
    if args.sentences:
        sources, references = sources[: args.sentences], references[: args.sentences]
    translator = Translator(model, tokenizer, SearchConfig(max_input_length=run_config["data"]["max_length"]))
    source_rows = translator.encode(sources)
    outputs, scores = translate(model, source_rows, args.batch_size, args.beam_size, args.alpha)
    log_probs, _ = token_scores(model, source_rows, outputs, batch_size=args.batch_size)
    texts = [text.decode("utf-8") for text in tokenizer.detokenize(tf.ragged.constant(outputs)).numpy()]
    chrf = [sacrebleu.sentence_chrf(text, [reference]).score for text, reference in zip(texts, references)]
    found = measures(log_probs, scores)
    result = dict(sentences=len(sources), chrf=float(np.mean(chrf)))
    for name in MEASURES:
        result[name] = float(spearmanr(found[name], chrf).statistic)
    return result


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, REPO_ROOT)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from inference.runs import RunDir

    model, tokenizer, run_config = RunDir(args.model_dir).load_model("last")
    results = {split: measure_split(model, tokenizer, run_config, args, split) for split in args.splits.split(",")}
    print(f"Spearman's rho with sentence chrF, model {args.model_dir}, beam {args.beam_size}, alpha {args.alpha:g}")
    print("| split | sentences | mean chrF | " + " | ".join(MEASURES) + " |")
    print("|" + "---|" * (3 + len(MEASURES)))
    for split, result in results.items():
        values = " | ".join(f"{result[name]:.3f}" for name in MEASURES)
        print(f"| {split} | {result['sentences']} | {result['chrf']:.1f} | {values} |")
    return results


if __name__ == "__main__":
    main()
