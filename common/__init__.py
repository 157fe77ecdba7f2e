"""What every layer uses: the user-error base class, file writes that fail with one clear error,
JSON reading, quieting TensorFlow's start-up logs, and every use of private Keras/TensorFlow API
(`compat.py`). Imports nothing else of the project."""
