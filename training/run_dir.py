"""The names of what train.py writes into a model_dir, for every tool that reads or writes one.

model_dir/
    config.json          the resolved RunConfig (`training.config`)
    spm.model            the SentencePiece vocabulary
    model.keras          the final model, written when training reaches --train_steps
    checkpoints/         ckpt-<step>.weights.h5 (`training.checkpoints`)
    logs/                TensorBoard
    training_log.csv     one row per epoch (checkpoint), appended across restarts
    workers/<index>/     a multi-worker run's other workers' own run directories
"""

CONFIG_FILE = "config.json"
VOCABULARY_FILE = "spm.model"
MODEL_FILE = "model.keras"
CHECKPOINT_DIR = "checkpoints"
LOG_DIR = "logs"
TRAINING_LOG = "training_log.csv"
WORKERS_DIR = "workers"
