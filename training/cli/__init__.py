"""``airpatrol train ...``: dataset building, detector and road-mask training, evaluation.

:func:`register` adds the ``train`` command and its subcommands to the ``airpatrol`` parser; it is
what :mod:`airpatrol.cli` imports, and nothing else imports this package. One module per command
group, each importing only :mod:`training.cli.dataset` of its siblings (the library modules of
:mod:`training` are imported inside the command functions that use them):

* :mod:`~training.cli.dataset` - ``--dataset KIND=PATH`` specs and held-out groups shared by every
  command, the options that build a tiled dataset, and ``dataset``;
* :mod:`~training.cli.detector` - ``detector`` (train), ``export``, ``average``;
* :mod:`~training.cli.detector_eval` - ``eval-detector``, ``bench-detector``;
* :mod:`~training.cli.road` - ``eval-road``, ``road``, ``road-pseudo``.
"""

from __future__ import annotations

from training.cli.dataset import add_dataset_parser
from training.cli.detector import add_average_parser, add_detector_parser, add_export_parser
from training.cli.detector_eval import add_bench_detector_parser, add_eval_detector_parser
from training.cli.road import register_road_commands


def register(subparsers) -> None:
    train = subparsers.add_parser(
        "train", help="build datasets, train and evaluate the detector and road models"
    )
    sub = train.add_subparsers(dest="train_command", metavar="WHAT", required=True)
    _register_detector_commands(sub)
    register_road_commands(sub)


def _register_detector_commands(sub) -> None:
    """``dataset``, ``detector``, ``eval-detector``, ``export``, ``average``, ``bench-detector``."""
    add_dataset_parser(sub)
    add_detector_parser(sub)
    add_eval_detector_parser(sub)
    add_export_parser(sub)
    add_average_parser(sub)
    add_bench_detector_parser(sub)
