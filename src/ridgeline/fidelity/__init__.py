"""fidelity: ridgeline's predictions held against speeds that others measured on real hardware.

The published-measurements dataset (``dataset``), predictions of throughput and latency through
the simulator (``predict``), the fit of each accelerator family's few calibration terms
(``fit``), and the validation of every row, ideal and calibrated, with leave-one-source-out
(``validate``).

Layer rule: imports ``sim``, ``serving``, ``analytic``, ``specs`` and ``errors``; never torch.
"""

from ridgeline.fidelity.dataset import Metric, Row, Scenario, Source, load_dataset
from ridgeline.fidelity.prediction import Prediction, PredictRequest, predict

__all__ = [
    "Metric",
    "PredictRequest",
    "Prediction",
    "Row",
    "Scenario",
    "Source",
    "load_dataset",
    "predict",
]
