"""benchmarks/step_floor.py: the floor step holds every product of a decoder step of the model's
sizes, in each attention form, and runs (tiny sizes, a small vocabulary). Its timing, both forms at
each mode, is checked through `cpu_inference.py --floor` (tests/benchmarks/test_cpu_inference.py)."""

import pytest

# Decoder layers apart from the encoder's, as the student presets have them.
CONFIG = {"num_layers": 2, "num_decoder_layers": 3, "hidden_dim": 32, "intermediate_dim": 64, "num_heads": 4}


@pytest.mark.slow  # Two step graphs traced and run.
def test_the_floor_step_holds_each_product_of_a_decoder_step(benchmark_script):
    floor, _ = benchmark_script("step_floor")
    shapes = dict(vocabulary_size=300, sentences=2, beam_size=3, source_length=5, cache_length=6, steps=4)
    for form in floor.ATTENTION_FORMS:
        run = floor.floor_step(CONFIG, attention=form, **shapes)
        library = run.get_concrete_function().graph.as_graph_def().library
        (body,) = [function for function in library.function if "body" in function.signature.name]
        products = [node.op for node in body.node_def if "MatMul" in node.op]
        # Per decoder layer (3, not the encoder's 2) six dense products and two per attention; then the output projection.
        assert len(products) == 3 * floor.PRODUCTS_PER_LAYER + 1, form
        assert products.count("BatchMatMulV2") == 3 * 4, form
        ids = run().numpy()
        assert ids.shape == (6,) and ((ids >= 0) & (ids < 300)).all(), form
