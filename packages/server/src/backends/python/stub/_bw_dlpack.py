"""DLPack for pb_utils.Tensor, as Triton's python_backend has it (src/pb_tensor.cc), in pure Python.

Consuming: a capsule's DLManagedTensor is read with ctypes, checked (C-contiguous, a device and a
dtype Triton takes), renamed "used_dltensor" as the DLPack spec asks, and its deleter called once
the Imported record holding it is collected; host memory is viewed by numpy in place (zero-copy),
GPU memory is kept as a pointer. A numpy array is taken as it is, without a capsule (numpy refuses to
export read-only arrays, and bool ones before 1.25).

Producing: numpy's own `__dlpack__` on an array that views the tensor's memory (a GPU pointer is
never read: numpy only writes its address into the capsule), then the capsule's DLTensor is patched
for what numpy cannot say (a CUDA device, kDLBool, kDLBfloat). The capsule and its deleter are
numpy's C code, so an unconsumed capsule is freed like any numpy capsule, with no Python callback
run inside a destructor.

Copying GPU memory to the host (outputs, calls to other models) needs a CUDA library: torch, else
cupy; without either it fails saying so.
"""

import contextlib
import ctypes
import importlib
import sys

import numpy as np

from _bw_wire import NUMPY_OF

# DLDeviceType values.
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3

# DLDataTypeCode values.
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6

# (code, bits) -> KServe datatype; lanes must be 1.
_DATATYPE_OF = {
    (_BOOL, 8): "BOOL",
    (_UINT, 8): "UINT8",
    (_UINT, 16): "UINT16",
    (_UINT, 32): "UINT32",
    (_UINT, 64): "UINT64",
    (_INT, 8): "INT8",
    (_INT, 16): "INT16",
    (_INT, 32): "INT32",
    (_INT, 64): "INT64",
    (_FLOAT, 16): "FP16",
    (_FLOAT, 32): "FP32",
    (_FLOAT, 64): "FP64",
    (_BFLOAT, 16): "BF16",
}
_CODE_OF = {datatype: code for code, datatype in _DATATYPE_OF.items()}

# numpy dtype (native byte order) -> KServe datatype, for numpy arrays taken without a capsule.
_DATATYPE_OF_NUMPY = {
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32",
    np.dtype(np.uint64): "UINT64",
    np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float32): "FP32",
    np.dtype(np.float64): "FP64",
}

# The dtype numpy exports each datatype as: the wire's, but bool as uint8 (numpy has no DLPack bool before 1.25)
# and BF16 as its uint16 bits.
_EXPORT_DTYPE = {name: dtype for name, dtype in NUMPY_OF.items() if name != "BYTES"}
_EXPORT_DTYPE["BOOL"] = np.dtype(np.uint8)


class DLPackError(Exception):
    """A capsule or object this backend cannot take (pb_utils raises it as TritonModelException)."""


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


# void (*deleter)(DLManagedTensor *): called with the GIL released, as the spec allows.
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _capi(name, restype, *argtypes):
    """A private prototype of a C API function (never the shared ctypes.pythonapi attribute)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_capsule_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)

# Module-level: a capsule keeps the pointer to its name.
_DLTENSOR = b"dltensor"
_USED_DLTENSOR = b"used_dltensor"


def is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


class Imported:
    """A consumed capsule (`managed`), or a numpy array taken as it is (`owner`): its memory (`ptr`,
    `shape`, `datatype`, `device`) stays valid until this record is collected, which calls the
    producer's deleter."""

    __slots__ = ("_managed", "_owner", "ptr", "shape", "datatype", "device", "__weakref__")

    def __init__(self, managed, ptr, shape, datatype, device, owner=None):
        self._managed = managed
        self._owner = owner
        self.ptr = ptr
        self.shape = shape
        self.datatype = datatype
        self.device = device

    @property
    def nbytes(self):
        return _count(self.shape) * _EXPORT_DTYPE[self.datatype].itemsize

    def __del__(self):
        managed = self._managed
        if not managed:
            return
        self._managed = 0
        deleter = _DLManagedTensor.from_address(managed).deleter
        if deleter:
            _DELETER(deleter)(managed)


def _count(shape):
    count = 1
    for dim in shape:
        count *= dim
    return count


def take(obj):
    """Consumes a DLPack capsule, or an object's `__dlpack__` (Triton's PbTensor::FromDLPack): an
    Imported record of its memory. Of an object on a GPU, the work pending on it is waited for."""
    if is_capsule(obj):
        return _consume(obj)
    if type(obj) is np.ndarray:
        return _take_array(obj)
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise DLPackError(
            "Provided tensor is not supported. Tensor must be a DLPack capsule "
            "or have `__dlpack__` and `__dlpack_device__` attributes"
        )
    device_type, device_id = (int(value) for value in obj.__dlpack_device__())
    if device_type == KDL_CUDA:
        # Triton passes a stream of its own and synchronizes it, on the tensor's device; here the
        # producer orders its work before that device's legacy default stream (1, per the array
        # API), which is then synchronized.
        with _on_device(device_id):
            capsule = obj.__dlpack__(stream=1)
        synchronize_cuda(device_id)
        return _consume(capsule)
    if device_type not in (KDL_CPU, KDL_CUDA_HOST):
        raise DLPackError("DLDevice type {} is not support by Python backend.".format(device_type))
    # On the CPU `stream=None` is the only value the array API accepts.
    return _consume(obj.__dlpack__(stream=None))


_NOT_CONTIGUOUS = "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are supported."


def _take_array(array):
    """A numpy array, shared as its own __dlpack__ would share it, but read-only arrays (which numpy
    refuses to export, np.from_dlpack's among them) and BOOL arrays (numpy < 1.25) too."""
    datatype = _DATATYPE_OF_NUMPY.get(array.dtype)
    if datatype is None:
        raise DLPackError("DLPack tensor has a data type the Python backend does not support (numpy {}).".format(array.dtype))
    if not array.flags.c_contiguous:
        raise DLPackError(_NOT_CONTIGUOUS)
    return Imported(0, array.__array_interface__["data"][0], array.shape, datatype, (KDL_CPU, 0), array)


def _consume(capsule):
    if not _capsule_is_valid(capsule, _DLTENSOR):
        if _capsule_is_valid(capsule, _USED_DLTENSOR):
            raise DLPackError("DLPack capsule has already been consumed: a capsule can be used once.")
        raise DLPackError("DLPack capsule must be named 'dltensor' (a DLPack 0.x capsule, as to_dlpack() makes).")
    managed = _capsule_get_pointer(capsule, _DLTENSOR)
    tensor = _DLManagedTensor.from_address(managed).dl_tensor
    ndim = tensor.ndim
    shape = tuple(tensor.shape[i] for i in range(ndim))
    # An empty tensor has no layout to check (numpy 2 exports its strides as 0).
    if tensor.strides and _count(shape) != 0:
        expected = 1
        for i in range(ndim - 1, -1, -1):
            if shape[i] == 1:
                continue
            if tensor.strides[i] != expected:
                raise DLPackError(_NOT_CONTIGUOUS)
            expected *= shape[i]
    device_type = tensor.device.device_type
    if device_type == KDL_CUDA:
        device = (KDL_CUDA, tensor.device.device_id)
    elif device_type in (KDL_CPU, KDL_CUDA_HOST):
        device = (KDL_CPU, 0)
    else:
        raise DLPackError("DLDevice type {} is not support by Python backend.".format(device_type))
    dtype = tensor.dtype
    datatype = _DATATYPE_OF.get((dtype.code, dtype.bits)) if dtype.lanes == 1 else None
    if datatype is None:
        raise DLPackError(
            "DLPack tensor has a data type the Python backend does not support "
            "(code {}, {} bits, {} lanes).".format(dtype.code, dtype.bits, dtype.lanes)
        )
    ptr = (tensor.data or 0) + tensor.byte_offset
    # Consumed: from now on its deleter is ours to call.
    _capsule_set_name(capsule, _USED_DLTENSOR)
    return Imported(managed, ptr, shape, datatype, device)


class _Memory:
    """Memory numpy views through the array interface, keeping `owner` alive as the array's base."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, ptr, shape, dtype, owner):
        self.__array_interface__ = {"version": 3, "shape": tuple(shape), "typestr": dtype.str, "data": (ptr, False)}
        self.owner = owner


def view(ptr, shape, dtype, owner):
    """A writable numpy array over `ptr` (host memory), alive as long as `owner` is needed."""
    if not ptr or _count(shape) == 0:
        # numpy before 2.0 takes no NULL pointer; an empty array reads nothing.
        return np.empty(shape, dtype)
    return np.asarray(_Memory(ptr, shape, dtype, owner))


def export(ptr, shape, datatype, device, owner):
    """A "dltensor" capsule of the memory at `ptr` (`device` a DLDevice pair), keeping `owner` alive
    until the consumer is done with it (Triton's PbTensor::ToDLPack)."""
    dtype = _EXPORT_DTYPE[datatype]
    empty = not ptr or _count(shape) == 0
    carrier = np.empty(shape, dtype) if empty else np.asarray(_Memory(ptr, shape, dtype, owner))
    capsule = carrier.__dlpack__()
    tensor = _DLManagedTensor.from_address(_capsule_get_pointer(capsule, _DLTENSOR)).dl_tensor
    if empty:
        tensor.data = ptr or None
        tensor.byte_offset = 0
    code, bits = _CODE_OF[datatype]
    tensor.dtype.code = code
    tensor.dtype.bits = bits
    tensor.dtype.lanes = 1
    tensor.device.device_type = device[0]
    tensor.device.device_id = device[1]
    return capsule


class _Exported:
    """Gives a capsule to a consumer that asks through the `__dlpack__` protocol."""

    __slots__ = ("_capsule", "_device")

    def __init__(self, capsule, device):
        self._capsule = capsule
        self._device = device

    def __dlpack__(self, stream=None, **_):
        return self._capsule

    def __dlpack_device__(self):
        return self._device


def _library(name):
    """A module of a CUDA library, imported if need be; None where it cannot be."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def _on_device(device_id):
    """The current CUDA device set to `device_id` for a with-block, by whichever CUDA library the
    model uses (Triton's ScopedSetDevice); nothing to set without one."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.cuda.device(device_id)
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return cupy.cuda.Device(device_id)
    return contextlib.nullcontext()


def synchronize_cuda(device_id):
    """Waits for the legacy default stream of a GPU with whichever CUDA library the model uses."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.cuda.default_stream(device_id).synchronize()
        return
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        with cupy.cuda.Device(device_id):
            cupy.cuda.Stream.null.synchronize()


def copy_to_host(imported, what):
    """The bytes of GPU memory `imported` in a new host array (uint8), copied by torch or cupy.
    `what` names the tensor in the error."""
    nbytes = imported.nbytes
    out = np.empty(nbytes, np.uint8)
    if nbytes == 0:
        return out
    device = imported.device
    torch = _library("torch")
    if torch is not None:
        source = torch.utils.dlpack.from_dlpack(export(imported.ptr, (nbytes,), "UINT8", device, imported))
        torch.from_numpy(out).copy_(source)
        return out
    cupy = _library("cupy")
    if cupy is not None:
        with cupy.cuda.Device(device[1]):
            source = cupy.from_dlpack(_Exported(export(imported.ptr, (nbytes,), "UINT8", device, imported), device))
            source.get(out=out)
        return out
    raise DLPackError(
        "{} is in GPU memory (CUDA device {}) and cannot be copied to the host: neither torch nor cupy can be "
        "imported by {}. Copy it to the CPU in the model (for example torch_tensor.cpu()) before "
        "pb_utils.Tensor.from_dlpack.".format(what, device[1], sys.executable)
    )
