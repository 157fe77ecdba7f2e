"""Trains the Transformer with `model.fit`.

    python train.py --model_dir=runs/base --preset=base                    # deb-en-de, en->de
    python train.py --model_dir=runs/demo --preset=tiny --train_steps=2000 --batch_tokens=2048
    python train.py --model_dir=runs/esen --corpus=tatoeba-en-es --direction=es-en
    python train.py --model_dir=runs/multi --corpus=deb-en-de,deb-en-fr,deb-en-es   # one model, tagged <2xx>
    python train.py --model_dir=runs/mine2 --corpus=files --languages=en-de,en-fr \
        --train_tsv=de.tsv,fr.tsv --dev_tsv=dev-de.tsv,dev-fr.tsv                    # your files, one per pair
    python train.py --model_dir=runs/small --preset=base --early_stopping=5 --eval_every=1000 --eval_sentences=all
    python train.py --model_dir=runs/mine --corpus=files --languages=en-fr \
        --train_src=train.en --train_tgt=train.fr --dev_src=dev.en --dev_tgt=dev.fr
    python train.py --model_dir=runs/mix --corpus=files --languages=en-de \
        --train_tsv=general.tsv:3,domain.tsv:1 --dev_tsv=dev.tsv             # weighted corpora
    python train.py --model_dir=runs/ft --init_from=runs/base --corpus=files --languages=en-de \
        --train_tsv=domain.tsv --dev_tsv=domain-dev.tsv --learning_rate_schedule=constant \
        --learning_rate=1e-4 --train_steps=2000                                 # fine-tuning
    python train.py --model_dir=runs/base2 --config=runs/base/config.json --seed=7   # another run's config

Run the same command again after an interruption: it resumes from the newest checkpoint.
"""

from absl import flags

from common.errors import UserError, run_tool
from training import launch, train_flags

FLAGS = flags.FLAGS
train_flags.define_train_flags()
flags.adopt_module_key_flags(train_flags)  # listed by --help as this tool's own


def config_from_flags():
    """The frozen run configuration the parsed flags describe (benchmarks/quality.py builds one)."""
    return train_flags.config_from_flags()


def main(argv):
    config = launch.checked_config(argv)
    try:
        summary = launch.train_run(config)
    except UserError as error:
        launch.exit_after_error(error)
    launch.print_summary(summary)


if __name__ == "__main__":
    run_tool(main, "train.py")
