"""What every layer uses: the user-error base class, file writes that fail with one clear error,
JSON reading, and quieting TensorFlow's start-up logs. Imports nothing else of the project."""
