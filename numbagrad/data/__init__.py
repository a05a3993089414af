"""Data loading (``torch.utils.data``): datasets, samplers, :class:`DataLoader`, and bundled
datasets (:func:`load_digits`) with a seeded :func:`train_test_split`."""
from .dataset import Dataset, TensorDataset, Subset, ConcatDataset, random_split  # noqa: F401
from .sampler import Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, BatchSampler  # noqa: F401
from .dataloader import DataLoader, default_collate  # noqa: F401
from .dataset import IterableDataset, ChainDataset  # noqa: F401
from .sampler import WeightedRandomSampler, DistributedSampler  # noqa: F401
from ._worker import get_worker_info  # noqa: F401
from .datasets import load_digits, train_test_split  # noqa: F401
from .pipeline import Pipeline, prepare  # noqa: F401
from . import datasets, transforms  # noqa: F401
from . import distributed  # noqa: F401  (torch.utils.data.distributed.DistributedSampler)
