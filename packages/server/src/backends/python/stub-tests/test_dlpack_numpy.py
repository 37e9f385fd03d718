"""pb_utils.Tensor's DLPack API (from_dlpack, to_dlpack, is_cpu, __dlpack__, __dlpack_device__) with
numpy alone, after Triton's qa/python_models/dlpack_test (which needs torch and cupy) and its docs.
GPU memory is stood in for by host memory whose capsule says kDLCUDA: nothing here reads it as a GPU
would, and the copy to the host goes through a stand-in torch module.

Run: python3 test_dlpack_numpy.py (dlpack.test.ts runs it with each interpreter it finds).
"""

import ctypes
import gc
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stub"))

import numpy as np  # noqa: E402

import _bw_dlpack  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402

NUMPY_DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
]


def dltensor(capsule):
    """The DLTensor of an unconsumed capsule."""
    return _bw_dlpack._DLManagedTensor.from_address(_bw_dlpack._capsule_get_pointer(capsule, b"dltensor")).dl_tensor


def address(array):
    return array.__array_interface__["data"][0]


class Producer:
    """An object of the __dlpack__ protocol over a numpy array, reporting the device it is told to."""

    def __init__(self, array, device=(1, 0)):
        self.array = array
        self.device = device
        self.streams = []

    def __dlpack__(self, stream=None):
        torch = sys.modules.get("torch")
        self.streams.append(stream if not isinstance(torch, FakeTorch) else (stream, torch.current[-1]))
        datatype = pb_utils.Tensor("x", self.array)._datatype
        return _bw_dlpack.export(address(self.array), self.array.shape, datatype, self.device, self.array)

    def __dlpack_device__(self):
        return self.device


def fake_gpu_tensor(name, array, device_id=1):
    """A pb_utils.Tensor whose memory says it is on CUDA device `device_id` (it is `array`'s)."""
    return pb_utils.Tensor.from_dlpack(name, Producer(array, (2, device_id)))


class FakeTorch(types.ModuleType):
    """Just what the backend asks of torch: legacy-stream synchronization and a device-to-host copy
    (here of host memory that says it is on a GPU)."""

    def __init__(self):
        super().__init__("torch")
        self.synchronized = []
        fake = self

        class Stream:
            def __init__(self, device):
                self.device = device

            def synchronize(self):
                fake.synchronized.append(self.device)

        class Source:
            def __init__(self, capsule):
                tensor = dltensor(capsule)
                self.device = (tensor.device.device_type, tensor.device.device_id)
                count = int(np.prod([tensor.shape[i] for i in range(tensor.ndim)]))
                self.bytes = np.ctypeslib.as_array((ctypes.c_uint8 * count).from_address(tensor.data + tensor.byte_offset)).copy()
                # Consumed as a consumer does: renamed, and its deleter called once done.
                managed = _bw_dlpack._capsule_get_pointer(capsule, b"dltensor")
                _bw_dlpack._capsule_set_name(capsule, b"used_dltensor")
                _bw_dlpack._DELETER(_bw_dlpack._DLManagedTensor.from_address(managed).deleter)(managed)

        class Host:
            def __init__(self, out):
                self.out = out

            def copy_(self, source):
                fake.copied_from = source.device
                self.out[...] = source.bytes

        class Device:
            """torch.cuda.device(i): the current device while `__dlpack__` runs."""

            def __init__(self, device):
                self.device = device

            def __enter__(self):
                fake.current.append(self.device)

            def __exit__(self, *_):
                fake.current.pop()

        self.current = [0]
        self.cuda = types.SimpleNamespace(default_stream=Stream, device=Device)
        self.utils = types.SimpleNamespace(dlpack=types.SimpleNamespace(from_dlpack=Source))
        self.from_numpy = Host


class HostTensors(unittest.TestCase):
    def test_numpy_dlpack(self):
        for dtype in NUMPY_DTYPES:
            array = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
            for given in (array, array.__dlpack__()):
                tensor = pb_utils.Tensor.from_dlpack("test_tensor", given)
                self.assertTrue(tensor.is_cpu())
                self.assertEqual(tensor.__dlpack_device__(), (1, 0))
                self.assertEqual(tensor.shape(), [2, 3, 4])
                self.assertEqual(tensor.as_numpy().dtype, array.dtype)
                self.assertTrue(np.array_equal(tensor.as_numpy(), array))
                # Zero-copy both ways.
                self.assertEqual(address(tensor.as_numpy()), address(array))
                back = np.from_dlpack(tensor)
                self.assertEqual(address(back), address(array))
                self.assertTrue(np.array_equal(back, array))
                again = pb_utils.Tensor.from_dlpack("again", tensor.to_dlpack())
                self.assertEqual(address(again.as_numpy()), address(array))
                self.assertEqual(again.triton_dtype(), pb_utils.numpy_to_triton_type(dtype))

    def test_writes_are_seen_through_every_view(self):
        array = np.zeros(4, np.float32)
        tensor = pb_utils.Tensor.from_dlpack("t", array)
        view = np.from_dlpack(tensor)
        tensor.as_numpy()[2] = 7
        self.assertEqual(array[2], 7)
        self.assertEqual(view[2], 7)

    def test_non_contiguous_error(self):
        transposed = np.random.rand(20, 30).astype(np.float16).T
        for given in (transposed, transposed.__dlpack__()):
            with self.assertRaises(pb_utils.TritonModelException) as e:
                pb_utils.Tensor.from_dlpack("test_tensor", given)
            self.assertEqual(
                str(e.exception),
                "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are supported.",
            )
        # Dimensions of one element may have any stride.
        column = np.arange(6, dtype=np.int32).reshape(6, 1)[:, :1]
        self.assertTrue(np.array_equal(pb_utils.Tensor.from_dlpack("c", column).as_numpy(), column))

    def test_dlpack_string_tensor(self):
        tensor = pb_utils.Tensor("test_tensor", np.array(["An Example String"], dtype=np.object_))
        with self.assertRaises(pb_utils.TritonModelException) as e:
            tensor.to_dlpack()
        self.assertEqual(str(e.exception), "DLPack does not have support for string tensors.")

    def test_bool_datatype(self):
        bool_array = np.asarray([False, True])
        bool_tensor = pb_utils.Tensor("tensor", bool_array)
        capsule = bool_tensor.to_dlpack()
        self.assertEqual((dltensor(capsule).dtype.code, dltensor(capsule).dtype.bits), (6, 8))  # kDLBool
        bool_tensor_dlpack = pb_utils.Tensor.from_dlpack("tensor", bool_tensor)
        self.assertTrue(np.array_equal(bool_array, bool_tensor_dlpack.as_numpy()))
        self.assertEqual(bool_tensor_dlpack.as_numpy().dtype, np.bool_)
        self.assertEqual(bool_tensor_dlpack.triton_dtype(), 1)

    def test_bf16(self):
        bits = np.array([0x3F80, 0x4000, 0xC040], dtype=np.uint16)  # 1.0, 2.0, -3.0
        received = pb_utils.Tensor._of("IN", "BF16", bits)
        capsule = received.to_dlpack()
        self.assertEqual((dltensor(capsule).dtype.code, dltensor(capsule).dtype.bits), (4, 16))  # kDLBfloat
        tensor = pb_utils.Tensor.from_dlpack("OUT", capsule)
        self.assertEqual(tensor.triton_dtype(), 14)
        with self.assertRaises(pb_utils.TritonModelException) as e:
            tensor.as_numpy()
        self.assertEqual(
            str(e.exception),
            "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead.",
        )
        self.assertTrue(np.array_equal(tensor._host(), bits))

    def test_read_only_arrays_are_shared(self):
        data = np.frombuffer(np.arange(5, dtype=np.int64).tobytes(), dtype=np.int64)
        self.assertFalse(data.flags.writeable)
        tensor = pb_utils.Tensor("t", data)
        self.assertEqual(address(np.from_dlpack(tensor)), address(data))

    def test_numpy_arrays_read_only_or_bool_are_taken_too(self):
        # numpy refuses to export these (np.from_dlpack's arrays are read-only; bool before numpy 1.25).
        source = pb_utils.Tensor("IN", np.arange(6, dtype=np.int32).reshape(2, 3))
        read_only = np.from_dlpack(source)
        self.assertFalse(read_only.flags.writeable)
        tensor = pb_utils.Tensor.from_dlpack("OUT", read_only)
        self.assertEqual(address(tensor.as_numpy()), address(source.as_numpy()))
        flags = pb_utils.Tensor.from_dlpack("FLAGS", np.array([True, False, True]))
        self.assertEqual(flags.triton_dtype(), 1)
        self.assertTrue(np.array_equal(flags.as_numpy(), [True, False, True]))
        with self.assertRaises(pb_utils.TritonModelException) as e:
            pb_utils.Tensor.from_dlpack("T", read_only.T)
        self.assertEqual(
            str(e.exception),
            "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are supported.",
        )
        for unsupported in (np.zeros(2, np.complex64), np.zeros(2, ">f4"), np.array(["a"])):
            with self.assertRaises(pb_utils.TritonModelException) as e:
                pb_utils.Tensor.from_dlpack("U", unsupported)
            self.assertIn("data type the Python backend does not support", str(e.exception))

    def test_empty_and_scalar(self):
        empty = pb_utils.Tensor.from_dlpack("e", np.empty((0, 3), np.float32))
        self.assertEqual(empty.shape(), [0, 3])
        self.assertEqual(np.from_dlpack(empty).shape, (0, 3))
        scalar = pb_utils.Tensor.from_dlpack("s", np.array(3.5))
        self.assertEqual(scalar.shape(), [])
        self.assertEqual(float(np.from_dlpack(scalar)), 3.5)

    def test_refusals(self):
        with self.assertRaises(pb_utils.TritonModelException) as e:
            pb_utils.Tensor.from_dlpack("", np.zeros(1))
        self.assertEqual(str(e.exception), "Tensor name cannot be an empty string.")
        with self.assertRaises(pb_utils.TritonModelException) as e:
            pb_utils.Tensor.from_dlpack("t", [1, 2, 3])
        self.assertEqual(
            str(e.exception),
            "Provided tensor is not supported. Tensor must be a DLPack capsule "
            "or have `__dlpack__` and `__dlpack_device__` attributes",
        )
        capsule = np.zeros(2).__dlpack__()
        pb_utils.Tensor.from_dlpack("once", capsule)
        with self.assertRaises(pb_utils.TritonModelException) as e:
            pb_utils.Tensor.from_dlpack("twice", capsule)
        self.assertIn("already been consumed", str(e.exception))
        with self.assertRaises(pb_utils.TritonModelException) as e:
            pb_utils.Tensor.from_dlpack("rocm", Producer(np.zeros(2), (10, 0)))
        self.assertEqual(str(e.exception), "DLDevice type 10 is not support by Python backend.")
        complex_capsule = np.zeros(2, np.complex64).__dlpack__()
        with self.assertRaises(pb_utils.TritonModelException) as e:
            pb_utils.Tensor.from_dlpack("complex", complex_capsule)
        self.assertIn("does not support (code 5, 64 bits, 1 lanes)", str(e.exception))

    def test_memory_is_released_once_no_one_uses_it(self):
        owner = np.arange(8, dtype=np.float32)
        baseline = sys.getrefcount(owner)
        tensor = pb_utils.Tensor.from_dlpack("t", owner)
        self.assertGreater(sys.getrefcount(owner), baseline)
        unconsumed = tensor.to_dlpack()
        consumer = np.from_dlpack(tensor)
        del tensor, unconsumed
        gc.collect()
        self.assertGreater(sys.getrefcount(owner), baseline)  # the consumer still views it
        self.assertEqual(consumer[3], 3)
        del consumer
        gc.collect()
        self.assertEqual(sys.getrefcount(owner), baseline)


class GpuTensors(unittest.TestCase):
    """Memory a capsule says is on a GPU: kept there (is_cpu() False) and copied to the host only when it leaves."""

    def setUp(self):
        self.saved = {name: sys.modules.get(name) for name in ("torch", "cupy")}

    def tearDown(self):
        for name, module in self.saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

    def test_stays_on_the_gpu(self):
        array = np.arange(12, dtype=np.float16).reshape(3, 4)
        capsule = Producer(array, (2, 1)).__dlpack__()
        tensor = pb_utils.Tensor.from_dlpack("tensor", capsule)
        self.assertFalse(tensor.is_cpu())
        self.assertEqual(tensor.__dlpack_device__(), (2, 1))
        self.assertEqual(tensor.shape(), [3, 4])
        self.assertEqual(tensor.triton_dtype(), 10)
        with self.assertRaises(pb_utils.TritonModelException) as e:
            tensor.as_numpy()
        self.assertEqual(str(e.exception), "Tensor is stored in GPU and cannot be converted to NumPy.")
        # Exported again without a copy, on the same device.
        exported = tensor.to_dlpack()
        self.assertEqual(dltensor(exported).data + dltensor(exported).byte_offset, address(array))
        self.assertEqual((dltensor(exported).device.device_type, dltensor(exported).device.device_id), (2, 1))
        again = pb_utils.Tensor.from_dlpack("again", tensor)
        self.assertFalse(again.is_cpu())
        self.assertEqual(again.__dlpack_device__(), (2, 1))

    def test_gpu_objects_are_synchronized_before_use(self):
        torch = sys.modules["torch"] = FakeTorch()
        producer = Producer(np.ones(4, np.float32), (2, 3))
        tensor = pb_utils.Tensor.from_dlpack("t", producer)
        # The legacy default stream of the tensor's device (current while __dlpack__ ran), then waited for.
        self.assertEqual(producer.streams, [(1, 3)])
        self.assertEqual(torch.synchronized, [3])
        self.assertFalse(tensor.is_cpu())
        host = np.ones(2, np.float32)
        cpu_producer = Producer(host)
        pb_utils.Tensor.from_dlpack("t", cpu_producer)
        self.assertEqual(cpu_producer.streams, [(None, 0)])

    def test_copied_to_the_host_by_torch(self):
        torch = sys.modules["torch"] = FakeTorch()
        for dtype in NUMPY_DTYPES + [np.bool_]:
            array = (np.arange(6) % 2).astype(dtype).reshape(2, 3)
            tensor = fake_gpu_tensor("OUT", array, 1)
            host = tensor._host()
            self.assertEqual(host.dtype, array.dtype)
            self.assertTrue(np.array_equal(host, array))
            self.assertNotEqual(address(host), address(array))
            self.assertEqual(torch.copied_from, (2, 1))

    @unittest.skipIf(
        any(_bw_dlpack._library(name) is not None for name in ("torch", "cupy")), "torch or cupy can be imported here"
    )
    def test_without_a_cuda_library_the_copy_fails_saying_why(self):
        tensor = fake_gpu_tensor("OUT", np.ones(3, np.float32), 0)
        with self.assertRaises(pb_utils.TritonModelException) as e:
            tensor._host()
        self.assertIn("Tensor 'OUT' is in GPU memory (CUDA device 0) and cannot be copied to the host", str(e.exception))
        self.assertIn("neither torch nor cupy", str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
