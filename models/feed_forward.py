"""Position-wise feed-forward network (Vaswani et al., 2017, Section 3.3): FFN(x) = max(0, x W_1 +
b_1) W_2 + b_2."""

import keras

from models.fast_paths.bit_mask_dropout import Dropout
from models.fast_paths.fused_dense import Dense


@keras.saving.register_keras_serializable(package="transformer")
class PositionwiseFeedForward(keras.layers.Layer):
    """Two dense layers with a ReLU between them, applied to every position alike (Section 3.3).

    Args:
        hidden_dim: d_model. Defaults to 512.
        intermediate_dim: d_ff. Defaults to 2048.
        activation_dropout: after the activation (not in the paper). Defaults to 0.0.

    Call arguments:
        inputs: `[batch, length, hidden_dim]`.

    Returns:
        `[batch, length, hidden_dim]`.
    """

    def __init__(
        self,
        hidden_dim=512,
        intermediate_dim=2048,
        activation="relu",
        activation_dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.activation = keras.activations.get(activation)
        self.activation_dropout = activation_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, inputs_shape):
        def initializer():
            return keras.initializers.get(keras.initializers.serialize(self.kernel_initializer))

        self.inner_dense = Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=initializer(),
            name="inner",
            dtype=self.dtype_policy,
        )
        self.inner_dense.build(inputs_shape)
        self.dropout_layer = Dropout(self.activation_dropout, name="activation_dropout", dtype=self.dtype_policy)
        self.output_dense = Dense(
            self.hidden_dim, kernel_initializer=initializer(), name="output", dtype=self.dtype_policy
        )
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_dim,))
        self.built = True

    def call(self, inputs, training=None):
        return self.output_dense(self.dropout_layer(self.inner_dense(inputs), training=training))

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape[:-1]) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "activation": keras.activations.serialize(self.activation),
                "activation_dropout": self.activation_dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
