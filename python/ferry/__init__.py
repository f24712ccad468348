"""ferry: a portable GPU transfer runtime (CUDA, Vulkan, CPU reference).

Staging pools of pinned memory, dedicated upload/download queues, timelines, uint8-first image
ingress and egress pipelines, binary-vector search and IBP compression, with zero-copy DLPack
exchange with PyTorch, CuPy, JAX and NumPy. docs/PYTHON.md has the whole API.
"""

from . import _errors
from ._errors import *  # noqa: F401,F403  (ferry.Error and one subclass per error code)
from ._ferry import (  # noqa: F401
    BackendInfo,
    BinaryIndex,
    Buffer,
    CommandList,
    Device,
    DeviceInfo,
    EgressChunk,
    EgressPipeline,
    EgressTicket,
    IbpLayout,
    IngressBatch,
    IngressPipeline,
    Lease,
    NormalizeParams,
    Queue,
    StagingPool,
    Tensor,
    Timeline,
    TimelinePoint,
    from_dlpack,
    ibp,
    list_backends,
    list_ops,
)

__version__ = "0.1.0"

__all__ = [
    "BackendInfo", "BinaryIndex", "Buffer", "CommandList", "Device", "DeviceInfo", "EgressChunk",
    "EgressPipeline", "EgressTicket", "IbpLayout", "IngressBatch", "IngressPipeline", "Lease",
    "NormalizeParams", "Queue", "StagingPool", "Tensor", "Timeline", "TimelinePoint",
    "from_dlpack", "ibp", "list_backends", "list_ops",
] + _errors.__all__
