import keras
import pytest

from models.learning_rate_schedule import TransformerSchedule, transformer_optimizer


def _formula(step_num, d_model=512, warmup=4000):
    return d_model**-0.5 * min(step_num**-0.5, step_num * warmup**-1.5)


@pytest.mark.parametrize("step_num", [1, 4000, 100000])
def test_values_at_paper_steps(step_num):
    schedule = TransformerSchedule(512, 4000)
    # The optimizer's iteration count is step_num - 1 when it applies update number step_num.
    value = float(keras.ops.convert_to_numpy(schedule(step_num - 1)))
    assert abs(value - _formula(step_num)) < 1e-6 * _formula(step_num) + 1e-12


def test_written_out_values():
    schedule = TransformerSchedule(512, 4000)
    # 512^-0.5 * 1 * 4000^-1.5 = 0.0441942 * 3.9528e-6 = 1.7469e-7
    assert abs(float(schedule(0)) - 1.7469281e-7) < 1e-12
    # Peak at step 4000: 512^-0.5 * 4000^-0.5 = 6.98771e-4
    assert abs(float(schedule(3999)) - 6.987712e-4) < 1e-9
    # 512^-0.5 * 100000^-0.5 = 1.397542e-4
    assert abs(float(schedule(99999)) - 1.397542e-4) < 1e-9


def test_scale_and_config_round_trip():
    schedule = TransformerSchedule(256, 100, scale=2.0)
    assert abs(float(schedule(49)) - 2.0 * _formula(50, 256, 100)) < 1e-9
    revived = TransformerSchedule.from_config(schedule.get_config())
    assert revived.get_config() == {"hidden_dim": 256, "warmup_steps": 100, "scale": 2.0}
    serialized = keras.saving.serialize_keras_object(schedule)
    assert keras.saving.deserialize_keras_object(serialized).get_config() == schedule.get_config()


def test_optimizer_is_the_papers_adam():
    optimizer = transformer_optimizer(512, 4000)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.epsilon) == (0.9, 0.98, 1e-9)
    # Before the first update the optimizer reads the schedule at the paper's step 1.
    assert abs(float(keras.ops.convert_to_numpy(optimizer.learning_rate)) - _formula(1)) < 1e-12


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="warmup_steps must be a positive int, received 0"):
        TransformerSchedule(512, 0)
    with pytest.raises(ValueError, match="scale must be positive, received -1"):
        TransformerSchedule(512, 10, scale=-1)
