"""The residual wrapper around every sublayer (Vaswani et al., 2017, Section 5.4): post-norm,
`LayerNorm(x + Dropout(Sublayer(x)))`, or pre-norm (`normalize_first`, not in the paper), `x +
Dropout(Sublayer(LayerNorm(x)))` with a final LayerNorm on the stack."""

import keras

from models.fast_paths.bit_mask_dropout import Dropout
from models.fast_paths.fused_layer_normalization import LayerNormalization


@keras.saving.register_keras_serializable(package="transformer")
class ResidualNorm(keras.layers.Layer):
    """Residual dropout, sum and layer normalization around one sublayer (Section 5.4):
    `residual(x, sublayer(residual.normalize_input(x)))`.

    Args:
        dropout: P_drop. Defaults to 0.1.
        normalize_first: pre-norm instead of the paper's post-norm. Defaults to False.
        layer_norm_epsilon: defaults to 1e-6.
    """

    def __init__(self, dropout=0.1, normalize_first=False, layer_norm_epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.dropout = dropout
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, inputs_shape, sublayer_output_shape=None):
        self.layer_norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, name="layer_norm", dtype=self.dtype_policy
        )
        self.layer_norm.build(inputs_shape)
        self.dropout_layer = Dropout(self.dropout, name="dropout", dtype=self.dtype_policy)
        self.built = True

    def normalize_input(self, inputs):
        return self.layer_norm(inputs) if self.normalize_first else inputs

    def call(self, inputs, sublayer_output, training=None):
        summed = inputs + self.dropout_layer(sublayer_output, training=training)
        return summed if self.normalize_first else self.layer_norm(summed)

    def compute_output_shape(self, inputs_shape, sublayer_output_shape=None):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "dropout": self.dropout,
                "normalize_first": self.normalize_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
