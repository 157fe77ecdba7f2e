"""TensorFlow Serving warm-up requests, `assets.extra/tf_serving_warmup_requests`: a TFRecord of
`PredictionLog` protos Serving replays when it loads a version, one request per length bucket so
that every branch of the search has run before real traffic.
"""

import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

WARMUP_FILE = "tf_serving_warmup_requests"

# Real sentences of the kind the deb-en-de corpus holds (software help and messages).
SAMPLE_SENTENCES = (
    "Open the file.",
    "Click OK to save your changes.",
    "The selected cells are copied to the clipboard.",
    "Choose Format - Cells and click the Numbers tab to change the number format of the selected cells.",
    "If you do not want to print the comments, select the option None in the Comments list box of the "
    "print dialog, and then click Print to print the document without them.",
)


def warmup_batches(tokenizer, length_buckets, extra_tokens=0):
    """One list of sample sentences per bucket, the longest fitting its token length and past the
    previous bucket's (EOS and `extra_tokens`, a multilingual tag, counted), so that it is routed there."""
    batches = []
    lower = 0
    for bucket in length_buckets:
        text = ""
        index = 0
        while True:
            candidate = (text + " " + SAMPLE_SENTENCES[index % len(SAMPLE_SENTENCES)]).strip()
            tokens = int(tokenizer.tokenize([candidate]).row_lengths()[0]) + 1 + extra_tokens
            if tokens > bucket:
                break
            text = candidate
            index += 1
            if tokens > lower:
                break
        batches.append([text or SAMPLE_SENTENCES[0]])
        lower = bucket
    batches.append(list(SAMPLE_SENTENCES))
    return batches


def prediction_log(sentences, model_name, signature_name="serving_default", target_language=None):
    """A `PredictionLog` holding a `PredictRequest` of `sentences` for `signature_name` (with a
    multilingual export's `target_language` input, that language for each)."""
    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name))
    request.inputs["inputs"].CopyFrom(tf.make_tensor_proto([s.encode("utf-8") for s in sentences], dtype=tf.string))
    if target_language is not None:
        languages = [target_language.encode("utf-8")] * len(sentences)
        request.inputs["target_language"].CopyFrom(tf.make_tensor_proto(languages, dtype=tf.string))
    return prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))


def write_warmup_requests(path, batches, model_name, target_language=None):
    """Writes one `PredictionLog` per batch of sentences to the TFRecord file `path` (into
    `target_language`, for a multilingual export)."""
    with tf.io.TFRecordWriter(path) as writer:
        for sentences in batches:
            writer.write(prediction_log(sentences, model_name, target_language=target_language).SerializeToString())
