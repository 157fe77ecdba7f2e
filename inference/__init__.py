"""Text to text with a trained model: run directories, the translators over a Keras model and over
a SavedModel, and what they share. Above `models` and `data`, below `training`."""
