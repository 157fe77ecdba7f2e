"""Flag definitions the command-line tools share: the search flags, the model and batching flags of
evaluate.py and translate.py, and `--checkpoint`. Above `inference` (whose run reader they consult),
below `training` (whose `python -m training.average_checkpoints` takes `--checkpoint`) and the tools;
library code takes arguments and never imports it."""
