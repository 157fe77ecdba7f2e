"""Text to text with a trained model: reading a run directory (`runs`, `checkpoint_files`), the
translator over a Keras model and its tokenizer, the translator over an exported SavedModel, the
batching of sentences they share, and the in-place decoding caches of TensorFlow-traced searches.
Above `models` and `data`, below `training` (which writes the run directory and whose dev-BLEU
callback translates through this package)."""
