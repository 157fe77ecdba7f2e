"""The least a Transformer decoding step costs in core TensorFlow ops on a CPU (`cpu_inference.py --floor`).

TensorFlow Serving runs a SavedModel's graph op by op (without XLA). `floor_step` writes, for a
model's sizes, a step of only the work every beam-search step must do, in the fewest core ops we
know: per decoder layer the six products (the self-attention's fused query/key/value projection,
its output, the cross-attention's query and output, the feed-forward pair), three layer norms and
two attentions over caches already filled (two batched matmuls and a softmax each; a sentence's
beams stacked against its caches, as `models/multi_head_attention.py` stacks them, or broadcast
over them: `ATTENTION_FORMS`); then the output projection, each hypothesis's best tokens (the
project's blocked top-k), their log-probabilities (one log-sum-exp per row) and the best of a
sentence's beams. It writes nothing into the self caches, keeps no finished hypotheses and never
stops early, so its time is a floor for the export's step. The weights are random (the time of
these ops does not depend on their values).

    from step_floor import floor_ms_per_step
    floor_ms_per_step({"num_layers": 2, "hidden_dim": 128, "intermediate_dim": 512, "num_heads": 4},
                      vocabulary_size=4000, sentences=1, beam_size=4, source_length=15, cache_length=16)
"""

import time

# One step's products per decoder layer: 6 dense, 4 batched (two per attention).
PRODUCTS_PER_LAYER = 10
# Two ways to attend with a sentence's beams over its caches in core ops; which is faster depends
# on the shapes, so the floor is the faster one's time.
ATTENTION_FORMS = ("stacked", "broadcast")


def floor_step(
    model_config, vocabulary_size, sentences, beam_size, source_length, cache_length, steps, attention="stacked"
):
    """A `tf.function` running `steps` floor steps (module docstring) in one `tf.while_loop` for
    `sentences` sentences of `beam_size` hypotheses, over cross caches of `source_length` positions
    and self caches of `cache_length` positions per hypothesis; `model_config` is a run's "model"
    config (`num_layers`, `num_decoder_layers` if apart, `hidden_dim`, `intermediate_dim`,
    `num_heads`, `normalize_first`); `attention` one of `ATTENTION_FORMS`. It returns the last
    step's token ids `[sentences * beam_size]`."""
    import tensorflow as tf

    from models.fast_paths import blocked_top_k

    width, heads = model_config["hidden_dim"], model_config["num_heads"]
    head_dim, inner = width // heads, model_config["intermediate_dim"]
    layers = model_config.get("num_decoder_layers") or model_config["num_layers"]
    rows = sentences * beam_size
    seeds = iter(range(1, 1000))

    def weight(*shape):
        return tf.random.stateless_normal(shape, seed=(next(seeds), 0)) * 0.05

    def layer_weights():
        return {
            "norms": [(tf.ones([width]), tf.zeros([width])) for _ in range(3)],
            "query_key_value": (weight(width, 3 * width), weight(3 * width)),
            "self_output": (weight(width, width), weight(width)),
            "self_cache": [weight(sentences, heads, beam_size * cache_length, head_dim) for _ in range(2)],
            "cross_query": (weight(width, width), weight(width)),
            "cross_output": (weight(width, width), weight(width)),
            "cross_cache": [weight(sentences, heads, source_length, head_dim) for _ in range(2)],
            "inner": (weight(width, inner), weight(inner)),
            "outer": (weight(inner, width), weight(width)),
        }

    decoder = [layer_weights() for _ in range(layers)]
    embedding, positions = weight(vocabulary_size, width), weight(steps, width)
    projection = tf.transpose(embedding)  # [width, vocabulary], made once as the export makes it.
    final_norm = (tf.ones([width]), tf.zeros([width])) if model_config.get("normalize_first", True) else None

    def norm(x, scale_offset):
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, scale_offset[1], scale_offset[0], 1e-6)

    def dense(x, kernel_bias):
        return tf.matmul(x, kernel_bias[0]) + kernel_bias[1]

    def stacked(queries, keys, values, bias=None):
        # A sentence's beams' queries stacked [sentences, heads, beam, head_dim] against its keys
        # [sentences, heads, positions, head_dim]: one transpose in, one out.
        queries = tf.transpose(tf.reshape(queries, [sentences, beam_size, heads, head_dim]), [0, 2, 1, 3])
        logits = tf.matmul(queries, keys, transpose_b=True)
        logits = logits if bias is None else logits + bias
        attended = tf.matmul(tf.nn.softmax(logits), values)
        return tf.reshape(tf.transpose(attended, [0, 2, 1, 3]), [rows, width])

    def broadcast(queries, keys, values, bias=None):
        # Each hypothesis's query [sentences, beam, heads, 1, head_dim] against its sentence's keys
        # [sentences, 1, heads, positions, head_dim], broadcast over the beams: no transposes.
        queries = tf.reshape(queries, [sentences, beam_size, heads, 1, head_dim])
        logits = tf.matmul(queries, keys[:, None], transpose_b=True)
        logits = logits if bias is None else logits + bias
        return tf.reshape(tf.matmul(tf.nn.softmax(logits), values[:, None]), [rows, width])

    attend = {"stacked": stacked, "broadcast": broadcast}[attention]
    # Each beam's query sees its slot's filled positions: an additive bias, made once.
    bias_shape = [1, 1, beam_size, beam_size * cache_length]
    self_bias = tf.zeros(bias_shape if attention == "stacked" else [1, beam_size, 1, 1, beam_size * cache_length])

    def step(index, ids, scores):
        x = tf.gather(embedding, ids) + positions[index]
        for layer in decoder:
            query, _, _ = tf.split(dense(norm(x, layer["norms"][0]), layer["query_key_value"]), 3, axis=-1)
            x = x + dense(attend(query, *layer["self_cache"], self_bias), layer["self_output"])
            query = dense(norm(x, layer["norms"][1]), layer["cross_query"])
            x = x + dense(attend(query, *layer["cross_cache"]), layer["cross_output"])
            hidden = tf.nn.relu(dense(norm(x, layer["norms"][2]), layer["inner"]))
            x = x + dense(hidden, layer["outer"])
        x = x if final_norm is None else norm(x, final_norm)
        logits = tf.matmul(x, projection)
        # A sentence's best extensions are among each hypothesis's own best: those alone are normalised.
        row_logits, row_tokens = blocked_top_k.top_k(logits, beam_size)
        row_log_probs = row_logits - tf.reduce_logsumexp(logits, axis=-1, keepdims=True)
        extended = tf.reshape(scores[:, None] + row_log_probs, [sentences, beam_size * beam_size])
        best, chosen = tf.math.top_k(extended, beam_size)
        tokens = tf.gather(tf.reshape(row_tokens, [sentences, beam_size * beam_size]), chosen, batch_dims=1)
        return index + 1, tf.reshape(tokens, [rows]), tf.reshape(best, [rows])

    @tf.function
    def run():
        start = (tf.constant(0), tf.zeros([rows], tf.int32), tf.zeros([rows]))
        return tf.while_loop(lambda index, *_: index < steps, step, start)[1]

    return run


def floor_ms_per_step(
    model_config, vocabulary_size, sentences, beam_size, source_length, cache_length, steps=20, repeats=5
):
    """`{attention form: ms}`: each form's floor step wall time in milliseconds, the best of
    `repeats` timed calls of `steps` steps (after two untimed ones) over `steps`, the forms taking
    turns call by call."""
    runs = {
        form: floor_step(model_config, vocabulary_size, sentences, beam_size, source_length, cache_length, steps, form)
        for form in ATTENTION_FORMS
    }
    for run in runs.values():
        run().numpy()
        run().numpy()
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for form, run in runs.items():
            start = time.perf_counter()
            run().numpy()
            best[form] = min(best[form], time.perf_counter() - start)
    return {form: 1000.0 * seconds / steps for form, seconds in best.items()}
