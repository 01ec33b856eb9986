"""The default model's training and analysis scripts, as one package.

Run every script as a module from assets/default-model/ (the directory that holds this package
and the data files: default.safetensors, vectors.safetensors, train.log, RECIPE.md), e.g.

    cd assets/default-model
    /usr/bin/python3 -m training.train --help
    /usr/bin/python3 -m training.make_vectors

The modules import each other relatively (`from . import data`); nothing edits sys.path.
Defaults that name a data file (--weights default.safetensors, make_vectors.py's --out, train.py's
--out) are resolved against MODEL_DIR, so they do not depend on the working directory.

tests/reference/ shares this package's safetensors reader/writer (st_io.py): its scripts run from
the repository root with PYTHONPATH=assets/default-model (tests/reference/README.md).

RECIPE.md says which file does what, and gives the shipped run's commands; EXPERIMENTS.md is the
lab notebook.
"""
import os

# assets/default-model: the directory of the data files this package reads and writes
MODEL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
