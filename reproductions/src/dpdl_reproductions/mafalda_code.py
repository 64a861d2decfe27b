"""What MAFALDA-SGD's released code trains that dpdl's own tasks do not: its network on MNIST and
Fashion-MNIST fed unstandardised pixels, the tasks ``mnist-tiny-cnn`` and ``fashion-tiny-cnn``
(registered in :data:`dpdl.choices.TASK_REGISTRY` by :mod:`~dpdl_reproductions.plugin`), which
mafalda-images' authors' protocol runs (:mod:`~dpdl_reproductions.mafalda_images_authors`).

They exist only to imitate the released script, so they live here, not in the library; the
library's :func:`dpdl.tasks.catalog.image_task` builds them, as it builds its own image tasks.
"""

from __future__ import annotations

from torch import nn

from dpdl.settings import TaskOptions
from dpdl.tasks.catalog import image_task
from dpdl.tasks.torch_model import TorchModelTask

__all__ = ["tiny_cnn", "tiny_cnn_task"]


def tiny_cnn(classes: int = 10) -> nn.Sequential:
    """``FEMNIST_tiny_CNN`` of MAFALDA-SGD's released code (``femnist.py``):
    :func:`dpdl.tasks.catalog.image_cnn` without the group norm after the first convolution, and
    8 groups in the one after the second pooling; with ``classes`` outputs (FEMNIST's 62; 10
    here). Input (B, 1, 28, 28); 20,554 parameters for 10 classes."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.GroupNorm(8, 32), nn.Flatten(), nn.Linear(32 * 7 * 7, classes),
    )  # fmt: skip


def tiny_cnn_task(name: str, n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    """``mnist-tiny-cnn`` or ``fashion-tiny-cnn``: :func:`tiny_cnn` on the pixels in [0, 1], not
    standardised, as MAFALDA-SGD's code feeds its network ``ToTensor``'s output."""
    return image_task(name, n_agents, seed, options, tiny_cnn, standardised=False)
