"""Framing and tensor layout of the stub's socket (see ../protocol.ts, the contract).

A frame is: uint32 LE headerBytes | uint32 LE dataBytes | header (UTF-8 JSON) | data.
Tensors are slices {name, datatype, shape, offset, byteLength}, each offset a multiple of 8;
BYTES tensors use the KServe layout (per element a uint32 LE length and its bytes).
"""

import json
import os
import socket
import struct
import sys
import threading

import numpy as np

# KServe datatype name -> numpy dtype. BF16 has no numpy dtype: its bits travel as uint16.
NUMPY_OF = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": np.dtype(np.uint16),
    "BYTES": np.dtype(np.object_),
}

# numpy dtype -> KServe datatype name (native byte order; BF16 never comes from numpy).
DATATYPE_OF = {dt: name for name, dt in NUMPY_OF.items() if name not in ("BF16",)}

# Triton's TRITONSERVER_DataType values.
TRITON_ENUM_OF = {
    "BOOL": 1,
    "UINT8": 2,
    "UINT16": 3,
    "UINT32": 4,
    "UINT64": 5,
    "INT8": 6,
    "INT16": 7,
    "INT32": 8,
    "INT64": 9,
    "FP16": 10,
    "FP32": 11,
    "FP64": 12,
    "BYTES": 13,
    "BF16": 14,
}

_U32 = struct.Struct("<I")
_PREFIX = struct.Struct("<II")
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_DECODER = json.JSONDecoder()
_ZEROS = bytes(8)
# sendmsg takes at most IOV_MAX buffers (1024 on Linux).
_MAX_IOV = 512


def datatype_of(dtype):
    """The KServe datatype of a numpy dtype, or None when there is none."""
    name = DATATYPE_OF.get(dtype)
    if name is None and dtype.kind in ("S", "U"):
        return "BYTES"
    return name


def serialize_bytes(array):
    """KServe BYTES layout of an array's elements in C order (bytes kept, str UTF-8 encoded)."""
    pack = _U32.pack
    parts = []
    append = parts.append
    for element in array.flat:
        if isinstance(element, bytes):
            raw = element
        elif isinstance(element, str):
            raw = element.encode("utf-8")
        elif isinstance(element, (bytearray, memoryview)):
            raw = bytes(element)
        else:
            raw = str(element).encode("utf-8")
        append(pack(len(raw)))
        append(raw)
    return b"".join(parts)


def deserialize_bytes(buffer, offset=0, length=None):
    """The elements of a KServe BYTES buffer as a 1-D np.object_ array of bytes."""
    view = memoryview(buffer)
    end = len(view) if length is None else offset + length
    unpack = _U32.unpack_from
    elements = []
    append = elements.append
    pos = offset
    while pos < end:
        if pos + 4 > end:
            raise ValueError("Invalid bytes tensor data: incomplete length field")
        (size,) = unpack(view, pos)
        pos += 4
        if pos + size > end:
            raise ValueError("Invalid bytes tensor data: string extends beyond buffer")
        append(bytes(view[pos : pos + size]))
        pos += size
    result = np.empty(len(elements), dtype=np.object_)
    result[:] = elements
    return result


def read_array(buffer, slice_, copy):
    """A slice of `buffer` as a numpy array: a view (fixed-size types, unless `copy`) or BYTES objects."""
    datatype = slice_["datatype"]
    shape = slice_["shape"]
    offset = slice_["offset"]
    length = slice_["byteLength"]
    dtype = NUMPY_OF.get(datatype)
    if dtype is None:
        raise ValueError("unsupported datatype " + repr(datatype))
    if datatype == "BYTES":
        return deserialize_bytes(buffer, offset, length).reshape(shape)
    if length == 0:
        return np.empty(shape, dtype)
    array = np.frombuffer(buffer, dtype, length // dtype.itemsize, offset).reshape(shape)
    return array.copy() if copy else array


def payload_of(datatype, array):
    """(bytes-like payload, byte length) of a tensor about to be written."""
    if datatype == "BYTES":
        raw = serialize_bytes(array)
        return raw, len(raw)
    return array, array.nbytes


def layout(tensors, start=0):
    """Slices for tensors laid end to end from `start` (8-aligned), their payloads, and the end.

    `tensors` are (name, datatype, array) triples; payloads are (offset, payload, byteLength).
    """
    slices = []
    payloads = []
    offset = start
    for name, datatype, array in tensors:
        payload, length = payload_of(datatype, array)
        slices.append(
            {
                "name": name,
                "datatype": datatype,
                "shape": list(array.shape),
                "offset": offset,
                "byteLength": length,
            }
        )
        if length:
            payloads.append((offset, payload, length))
        offset += (length + 7) & ~7
    return slices, payloads, offset


def frame_buffers(payloads):
    """The frame data for laid-out payloads (from offset 0): buffers with zero padding between."""
    buffers = []
    position = 0
    for offset, payload, length in payloads:
        if offset > position:
            buffers.append(_ZEROS[: offset - position])
        buffers.append(payload if isinstance(payload, bytes) else memoryview(payload).cast("B"))
        position = offset + length
    return buffers


class Connection:
    """The child's fd 3: frames read by one thread, written from any thread under one lock."""

    def __init__(self, fd=3):
        self.sock = socket.socket(fileno=fd)
        self.sock.setblocking(True)
        self._reader = self.sock.makefile("rb", buffering=1 << 16)
        self._write_lock = threading.Lock()
        self._writer = None
        self._deferred = []

    def read(self):
        """The next (header dict, data bytearray or None); None at end of stream."""
        prefix = self._reader.read(8)
        if len(prefix) < 8:
            return None
        header_bytes, data_bytes = _PREFIX.unpack(prefix)
        raw = self._reader.read(header_bytes)
        if len(raw) < header_bytes:
            return None
        data = None
        if data_bytes:
            data = bytearray(data_bytes)
            view = memoryview(data)
            got = 0
            while got < data_bytes:
                n = self._reader.readinto(view[got:])
                if not n:
                    return None
                got += n
        # raw_decode: the header is one JSON value, no need for json.loads' checks around it.
        return _DECODER.raw_decode(raw.decode("utf-8"))[0], data

    def send(self, header, buffers=()):
        """Writes one frame: `header` as JSON, then `buffers` (bytes-like, already padded)."""
        encoded = _ENCODER.encode(header).encode("utf-8")
        size = 0
        for buffer in buffers:
            size += memoryview(buffer).nbytes
        parts = [_PREFIX.pack(len(encoded), size), encoded]
        parts.extend(buffers)
        total = 8 + len(encoded) + size
        if self._writer == threading.get_ident():
            # Re-entered by this very thread (a finalizer run by the garbage collector in the
            # middle of a send): sent when the current frame is out, never inside it.
            self._deferred.append((parts, total))
            return
        with self._write_lock:
            self._writer = threading.get_ident()
            try:
                self._send_all(parts, total)
                while self._deferred:
                    self._send_all(*self._deferred.pop(0))
            finally:
                self._writer = None

    def _send_all(self, parts, total):
        sock = self.sock
        if len(parts) <= _MAX_IOV:
            sent = sock.sendmsg(parts)
            if sent == total:
                return
        else:
            sent = 0
        # A partial write (large frames) or too many buffers: continue from where it stopped.
        views = [memoryview(part).cast("B") for part in parts]
        index = 0
        while index < len(views):
            while sent and index < len(views):
                length = views[index].nbytes
                if sent >= length:
                    sent -= length
                    index += 1
                else:
                    views[index] = views[index][sent:]
                    sent = 0
            if index < len(views):
                sent = sock.sendmsg(views[index : index + _MAX_IOV])


def exit_now(code):
    """Leaves at once (no waiting for model threads), output flushed."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
