"""CPU fast paths: layers and ops that compute what a plain Keras version computes, faster under TensorFlow.

Each module names the plain version it must equal, and its test under tests/models/fast_paths/
checks the equality (outputs and gradients, or the distribution for dropout). Each falls back to the
plain version on other backends (XLA fuses the plain ops there) and in the cases its docstring lists.
The registered names (`transformer>Dense`, `transformer>Dropout`, `transformer>LayerNormalization`)
are those saved `.keras` files refer to.

- `fused_dense.Dense`: `keras.layers.Dense` as one fused matmul + bias (+ ReLU) kernel with a
  matmul bias gradient.
- `bit_mask_dropout.Dropout`: `keras.layers.Dropout` with masks from 16 random bits per element.
- `fused_layer_normalization.LayerNormalization`: `keras.layers.LayerNormalization` with a
  hand-written float32 gradient.
- `tied_projection.tied_projection`: `hidden_states @ E^T` with the gradient in E's own layout.
"""
