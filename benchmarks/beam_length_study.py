"""Why beam search shortens the output: sentence by sentence, the model's own length-penalised score
of the greedy output, of the beam outputs and of the reference translation, on a run's dev split.

Every setting translates the same sentences with `models.translation.translate_ids` (the search every
tool uses). Each output and each reference is then scored by one full forward pass of the model
(log P(Y | X), Y = the tokens after BOS, EOS included), so the settings compare on the same scale:
a setting's score of a sentence is log P / ((5 + |Y|) / 6) ** alpha with that setting's alpha, and
greedy's output and the reference are scored with it too. The search's own returned scores are
checked against this rescoring.

Printed per setting: BLEU and chrF (sacreBLEU on detokenized text), the length ratio (sacreBLEU's
hypothesis / reference length in words), the mean output length in tokens, and, against greedy's
output of the same sentence: the fraction where the setting's output scores higher (the search did
its job), where it is shorter, both, and the same output; the fraction of outputs cut at the maximum
length (no EOS); against the reference: the fraction where the reference scores higher than the
output (a search error: the search missed a better hypothesis) and the mean score of the references.

    python benchmarks/beam_length_study.py --model_dir=runs/demo                   # whole dev split
    python benchmarks/beam_length_study.py --model_dir=runs/demo --sentences=300   # a quick look

Choose settings on the dev split; the test split is only for reporting.
"""

import argparse
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="a training run's directory")
    parser.add_argument("--split", default="dev", help="split of the run's corpus (default dev; never tune on test)")
    parser.add_argument("--sentences", type=int, default=0, help="the first N sentences of the split (0: all)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--alphas", default="0.6,1.0,1.5", help="length-penalty exponents to try with --beam_size")
    parser.add_argument(
        "--wide_beam", type=int, default=16, help="also search with this beam at the first alpha (0: don't)"
    )
    parser.add_argument(
        "--min_length_ratios",
        default="0.8,0.9",
        help="also search with --beam_size at the first alpha and each of these minimum output/source length ratios",
    )
    return parser.parse_args(argv)


def settings(args):
    """`[(name, SearchConfig settings)]`, greedy first."""
    alphas = [float(value) for value in args.alphas.split(",") if value]
    rows = [("greedy", dict(beam_size=1, alpha=alphas[0]))]
    rows += [
        (f"beam {args.beam_size} alpha {alpha:g}", dict(beam_size=args.beam_size, alpha=alpha)) for alpha in alphas
    ]
    if args.wide_beam:
        rows.append((f"beam {args.wide_beam} alpha {alphas[0]:g}", dict(beam_size=args.wide_beam, alpha=alphas[0])))
    for ratio in [float(value) for value in args.min_length_ratios.split(",") if value]:
        options = dict(beam_size=args.beam_size, alpha=alphas[0], min_length_ratio=ratio)
        rows.append((f"beam {args.beam_size} alpha {alphas[0]:g} min ratio {ratio:g}", options))
    return rows


def pad_rows(rows, length, pad_id):
    import numpy as np

    batch = np.full((len(rows), length), pad_id, dtype="int32")
    for index, row in enumerate(rows):
        batch[index, : len(row)] = row
    return batch


def translate(model, source_rows, order, batch_size, search_options):
    """Token ids (EOS included when produced) and returned scores of every source row."""
    import keras
    import numpy as np

    from inference.translator import compile_search, length_batches
    from models.search_config import SearchConfig
    from models.translation import translate_ids

    search_config = SearchConfig(**search_options)
    search = compile_search(lambda source: translate_ids(model, source, search_config), model.variables)
    outputs, scores = [None] * len(source_rows), [None] * len(source_rows)
    for indices, batch in length_batches(source_rows, batch_size, model.pad_id, order):
        ids, batch_scores = search(keras.ops.convert_to_tensor(batch))
        ids, batch_scores = keras.ops.convert_to_numpy(ids)[:, 0], keras.ops.convert_to_numpy(batch_scores)[:, 0]
        for row, index in enumerate(indices):
            outputs[index] = [int(token) for token in ids[row] if token != model.pad_id]
            scores[index] = float(batch_scores[row])
    return outputs, np.array(scores)


def log_probabilities(model, source_rows, target_rows, order, batch_size, bos_id):
    """log P(target | source) of every pair, from one forward pass per batch, in float64."""
    import keras
    import numpy as np

    totals = np.zeros(len(source_rows))
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        sources = pad_rows([source_rows[i] for i in indices], max(len(source_rows[i]) for i in indices), model.pad_id)
        target_length = max(len(target_rows[i]) for i in indices)
        prefixes = pad_rows([[bos_id] + target_rows[i][:-1] for i in indices], target_length, model.pad_id)
        logits = model((keras.ops.convert_to_tensor(sources), keras.ops.convert_to_tensor(prefixes)), training=False)
        logits = keras.ops.convert_to_numpy(logits).astype(np.float64)  # [batch, target_length, vocab]
        top = logits.max(axis=-1, keepdims=True)
        log_probs = logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))
        for row, index in enumerate(indices):
            target = target_rows[index]
            totals[index] = log_probs[row, np.arange(len(target)), target].sum()
    return totals


def length_penalty(length, alpha):
    """Wu et al. (2016), eq. 14, as `models.beam_search.length_penalty` (in NumPy, float64)."""
    return ((5.0 + length) / 6.0) ** alpha


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, REPO_ROOT)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import sacrebleu
    import tensorflow as tf

    from common.special_ids import BOS_ID, EOS_ID
    from evaluation import evaluator
    from inference.runs import RunDir
    from inference.translator import Translator
    from models.search_config import SearchConfig

    tf.get_logger().setLevel("ERROR")  # one search compiled per padded length is expected here
    if args.split.startswith("test"):
        print("note: choose search settings on the dev split; the test split is for reporting", file=sys.stderr)
    model, tokenizer, run_config = RunDir(args.model_dir).load_model("last")
    sources, references, description, _ = evaluator.load_test_set(
        evaluator.EvalConfig(model_dir=args.model_dir, split=args.split), run_config
    )
    if args.sentences:
        sources, references = sources[: args.sentences], references[: args.sentences]
    max_length = run_config["data"]["max_length"]
    source_tokenizer = RunDir(args.model_dir).separate_source_tokenizer()
    source_rows = Translator(
        model, tokenizer, search=SearchConfig(max_input_length=max_length), source_tokenizer=source_tokenizer
    ).encode(sources)
    reference_rows = [row + [EOS_ID] for row in tokenizer.tokenize(references).to_list()]
    # Sentences with no source tokens translate to "" without a search; they are left out here.
    kept = [i for i, row in enumerate(source_rows) if len(row) > 1]
    order = sorted(kept, key=lambda i: len(source_rows[i]))
    print(f"{len(kept)} sentences of {description}, model {args.model_dir}", file=sys.stderr)

    reference_log_probs = log_probabilities(model, source_rows, reference_rows, order, args.batch_size, BOS_ID)
    reference_lengths = np.array([len(row) for row in reference_rows])
    results = {}
    for name, options in settings(args):
        started = time.perf_counter()
        outputs, returned = translate(model, source_rows, order, args.batch_size, options)
        log_probs = log_probabilities(model, source_rows, outputs, order, args.batch_size, BOS_ID)
        lengths = np.array([len(outputs[i]) if outputs[i] is not None else 0 for i in range(len(outputs))])
        texts = [""] * len(sources)
        for index, text in zip(kept, tokenizer.detokenize(pad_rows([outputs[i] for i in kept], lengths.max(), 0))):
            texts[index] = text.numpy().decode("utf-8")
        results[name] = dict(
            options=options,
            outputs=outputs,
            log_probs=log_probs,
            lengths=lengths,
            returned=returned,
            texts=texts,
            seconds=time.perf_counter() - started,
        )
        print(f"{name}: {results[name]['seconds']:.0f} s", file=sys.stderr)

    kept = np.array(kept)
    greedy = results["greedy"]
    header = (
        "| setting | BLEU | chrF | length ratio | mean tokens | score > greedy | shorter than greedy "
        "| both | same as greedy | cut at max length | reference scores higher | mean score: output / greedy / reference "
        "| max abs(returned - rescored) | seconds |"
    )
    bleu_metric, chrf_metric = sacrebleu.BLEU(), sacrebleu.CHRF()
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, result in results.items():
        alpha = result["options"]["alpha"]
        lengths = result["lengths"][kept]
        score = result["log_probs"][kept] / length_penalty(lengths, alpha)
        greedy_lengths = greedy["lengths"][kept]
        greedy_score = greedy["log_probs"][kept] / length_penalty(greedy_lengths, alpha)
        reference_score = reference_log_probs[kept] / length_penalty(reference_lengths[kept], alpha)
        higher = score > greedy_score + 1e-4
        shorter = lengths < greedy_lengths
        same = np.array([result["outputs"][i] == greedy["outputs"][i] for i in kept])
        cut = np.array([result["outputs"][i][-1] != EOS_ID for i in kept])
        bleu = bleu_metric.corpus_score(result["texts"], [references])
        chrf = chrf_metric.corpus_score(result["texts"], [references])
        check = np.abs(result["returned"][kept] - score).max()
        print(
            f"| {name} | {bleu.score:.2f} | {chrf.score:.1f} | {bleu.sys_len / bleu.ref_len:.3f} | {lengths.mean():.1f} "
            f"| {higher.mean():.3f} | {shorter.mean():.3f} | {(higher & shorter).mean():.3f} | {same.mean():.3f} | {cut.mean():.3f} "
            f"| {(reference_score > score + 1e-4).mean():.3f} "
            f"| {score.mean():.3f} / {greedy_score.mean():.3f} / {reference_score.mean():.3f} "
            f"| {check:.1e} | {result['seconds']:.0f} |"
        )
    print(f"signatures: {bleu_metric.get_signature()}; {chrf_metric.get_signature()}")
    source_lengths = np.array([len(source_rows[i]) for i in kept])
    print(
        f"reference: mean tokens {reference_lengths[kept].mean():.1f}; source: mean tokens {source_lengths.mean():.1f}; "
        f"reference / source tokens (EOS included): median {np.median(reference_lengths[kept] / source_lengths):.2f}, "
        f"10th percentile {np.percentile(reference_lengths[kept] / source_lengths, 10):.2f}"
    )
    return results


if __name__ == "__main__":
    main()
