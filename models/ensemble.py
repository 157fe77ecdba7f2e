"""Several trained Transformers searched as one model: each step averages the members'
log-probabilities (Marian's `--models` with equal weights). The members share vocabularies and may
differ in size; caches are lists, one entry per member; attention weights are the first member's."""

from keras import ops


class Ensemble:
    """Members decoded in step, their log-probabilities averaged, as a `Transformer` to `models.translation`.
    Raises `ValueError` on fewer than two models, or different vocabulary sizes or pad ids."""

    def __init__(self, models):
        models = tuple(models)
        if len(models) < 2:
            raise ValueError(f"an ensemble needs two or more models, received {len(models)}")
        for name in ("vocabulary_size", "source_vocabulary_size", "pad_id"):
            values = [getattr(model, name) for model in models]
            if len(set(values)) > 1:
                raise ValueError(f"the ensemble's models differ in {name}: {values}")
        self.models = models
        first = models[0]
        self.vocabulary_size, self.pad_id = first.vocabulary_size, first.pad_id
        self.source_vocabulary_size = first.source_vocabulary_size
        self.num_layers, self.num_heads = first.num_layers, first.num_heads  # for attention: the first's
        self.num_decoder_layers = first.num_decoder_layers

    @property
    def variables(self):
        return [variable for model in self.models for variable in model.variables]

    def encode(self, source_ids, training=False):
        """`([encoder_output per member], padding_mask)`."""
        outputs = [model.encode(source_ids, training=training) for model in self.models]
        return [output for output, _ in outputs], outputs[0][1]

    def initial_cache(self, encoder_output, cache_length):
        """`{"self": [per member], "cross": [per member]}` (`Transformer.initial_cache` of each)."""
        caches = [model.initial_cache(output, cache_length) for model, output in zip(self.models, encoder_output)]
        return {"self": [cache["self"] for cache in caches], "cross": [cache["cross"] for cache in caches]}

    def plan_decoding(self, self_caches, rows):
        """Each member's `Transformer.plan_decoding`, a list that `decode` hands out by member."""
        return [model.plan_decoding(caches, rows) for model, caches in zip(self.models, self_caches)]

    def decode(
        self,
        target_ids,
        encoder_output=None,
        encoder_padding_mask=None,
        cache=None,
        cache_index=0,
        training=False,
        return_attention_scores=False,
        self_attention_mask=None,
        attention_layer=-1,
        projection=None,
    ):
        """`Transformer.decode` with the members' mean log-probabilities in place of logits;
        `projection` is `output_projection`'s and a planned `cache_index` `plan_decoding`'s, one
        per member."""
        log_probs, self_caches, attention = [], [], None
        for index, model in enumerate(self.models):
            results = model.decode(
                target_ids,
                None if encoder_output is None else encoder_output[index],
                encoder_padding_mask,
                cache=None if cache is None else {"self": cache["self"][index], "cross": cache["cross"][index]},
                cache_index=cache_index[index] if isinstance(cache_index, list) else cache_index,
                training=training,
                return_attention_scores=return_attention_scores and index == 0,
                self_attention_mask=self_attention_mask,
                attention_layer=attention_layer,
                projection=None if projection is None else projection[index],
            )
            results = results if isinstance(results, tuple) else (results,)
            log_probs.append(ops.log_softmax(ops.cast(results[0], "float32"), axis=-1))
            if cache is not None:
                self_caches.append(results[1]["self"])
            if return_attention_scores and index == 0:
                attention = results[-1]
        outputs = (ops.mean(ops.stack(log_probs), axis=0),)
        if cache is not None:
            outputs += ({"self": self_caches, "cross": cache["cross"]},)
        if return_attention_scores:
            outputs += (attention,)
        return outputs[0] if len(outputs) == 1 else outputs

    def output_projection(self, columns=None):
        """Each member's `Transformer.output_projection` of `columns`."""
        return [model.output_projection(columns) for model in self.models]

    def __call__(self, inputs, training=False):
        """The mean log-probabilities `[batch, length, vocabulary_size]` of `(source_ids, target_input_ids)`."""
        source_ids, target_ids = inputs
        encoder_output, padding_mask = self.encode(source_ids, training=training)
        return self.decode(target_ids, encoder_output, padding_mask, training=training)
