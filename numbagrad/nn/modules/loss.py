"""``torch.nn.modules.loss``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "L1Loss NLLLoss NLLLoss2d PoissonNLLLoss GaussianNLLLoss KLDivLoss MSELoss BCELoss "
                            "BCEWithLogitsLoss HingeEmbeddingLoss MultiLabelMarginLoss SmoothL1Loss HuberLoss "
                            "SoftMarginLoss CrossEntropyLoss LinearCrossEntropyLoss MultiLabelSoftMarginLoss "
                            "CosineEmbeddingLoss MarginRankingLoss MultiMarginLoss TripletMarginLoss "
                            "TripletMarginWithDistanceLoss CTCLoss",
                            private="loss: _Loss _WeightedLoss")
