"""Neural-network building blocks (``torch.nn``): :class:`Module`, :class:`Parameter`,
layers, containers, losses, :mod:`~numbagrad.nn.init` and
:mod:`~numbagrad.nn.functional`."""
from .parameter import Parameter  # noqa: F401
from .module import Module, RemovableHandle  # noqa: F401
from .linear import Identity, Linear, Bilinear  # noqa: F401
from .flatten import Flatten, Unflatten, PixelShuffle, PixelUnshuffle  # noqa: F401
from .upsampling import Upsample, UpsamplingNearest2d, UpsamplingBilinear2d  # noqa: F401
from .activation import *  # noqa: F401,F403
from .sparse import Embedding, EmbeddingBag  # noqa: F401
from .normalization import (LayerNorm, RMSNorm, GroupNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d,  # noqa: F401
                            InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, SyncBatchNorm)
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa: F401
from .pooling import (MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d,  # noqa: F401
                      AdaptiveMaxPool1d, AdaptiveMaxPool2d, LPPool1d, LPPool2d)
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell  # noqa: F401
from .attention import MultiheadAttention  # noqa: F401
from .transformer import (Transformer, TransformerEncoder, TransformerDecoder, TransformerEncoderLayer,  # noqa: F401
                          TransformerDecoderLayer)
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict  # noqa: F401
from .loss import (CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss,  # noqa: F401
                   PoissonNLLLoss, GaussianNLLLoss, BCELoss, BCEWithLogitsLoss, KLDivLoss, MultiMarginLoss,
                   MultiLabelSoftMarginLoss, FocalLoss, CTCLoss, PairwiseDistance, CosineSimilarity,
                   TripletMarginLoss, TripletMarginWithDistanceLoss, CosineEmbeddingLoss, HingeEmbeddingLoss,
                   MarginRankingLoss, ContrastiveLoss)
from .padding import *  # noqa: F401,F403
from .extra import *  # noqa: F401,F403
from . import init, functional, summary, utils  # noqa: F401
from .parallel import DataParallel  # noqa: F401,E402  (constructing it raises: one GPU only)
from . import parallel, modules  # noqa: F401,E402  (torch.nn.parallel; torch.nn.modules' import paths)
