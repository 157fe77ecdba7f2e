"""Text to text with a trained model: the translator over a Keras model and its tokenizer, the
translator over an exported SavedModel, the batching of sentences they share, and the in-place
decoding caches of TensorFlow-traced searches. Above `models` and `data`, below `training` (whose
dev-BLEU callback translates through it); what reads a run directory lives above `training`."""
