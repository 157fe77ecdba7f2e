"""CPU fast paths: layers and ops equal to a plain Keras version, faster under TensorFlow. Each module
names the plain version it must equal (tested under tests/models/fast_paths/) and falls back to it on
other backends; the registered names (`transformer>Dense`, ...) are those saved `.keras` files use.
"""
