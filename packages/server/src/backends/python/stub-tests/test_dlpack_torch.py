"""pb_utils.Tensor's DLPack API against real PyTorch, on the CPU and, where CUDA is, on the GPU: the
tests of Triton's qa/python_models/dlpack_test that need no cupy, and the copy of a GPU tensor to the
host that an output or a call to another model makes.

Run where torch is installed: python3 test_dlpack_torch.py (dlpack.test.ts runs it when it can import
torch; the GPU check runs it on the lent device, which has CUDA and PyTorch but no Node).
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stub"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.dlpack import from_dlpack, to_dlpack  # noqa: E402

import triton_python_backend_utils as pb_utils  # noqa: E402

PYTORCH_DTYPES = [torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
CUDA = torch.cuda.is_available()


class PBTensorTest(unittest.TestCase):
    def test_pytorch_dlpack(self):
        for pytorch_dtype in PYTORCH_DTYPES:
            pytorch_tensor = torch.ones([100], dtype=pytorch_dtype)
            pb_tensor = pb_utils.Tensor.from_dlpack("test_tensor", to_dlpack(pytorch_tensor))
            self.assertTrue(np.array_equal(pb_tensor.as_numpy(), pytorch_tensor.numpy()))
            pytorch_tensor_dlpack = from_dlpack(pb_tensor.to_dlpack())
            self.assertTrue(torch.equal(pytorch_tensor_dlpack, pytorch_tensor))
            self.assertEqual(pytorch_tensor.type(), pytorch_tensor_dlpack.type())
            # Zero-copy: the same memory all the way.
            self.assertEqual(pytorch_tensor_dlpack.data_ptr(), pytorch_tensor.data_ptr())

            pb_tensor_upgraded = pb_utils.Tensor.from_dlpack("test_tensor", pytorch_tensor)
            self.assertTrue(np.array_equal(pb_tensor_upgraded.as_numpy(), pytorch_tensor.numpy()))
            pytorch_tensor_dlpack = from_dlpack(pb_tensor_upgraded)
            self.assertTrue(torch.equal(pytorch_tensor_dlpack, pytorch_tensor))
            self.assertEqual(pytorch_tensor.type(), pytorch_tensor_dlpack.type())

    def test_non_contiguous_error(self):
        pytorch_tensor = torch.transpose(torch.rand([20, 30], dtype=torch.float16), 0, 1)
        with self.assertRaises(Exception) as e:
            pb_utils.Tensor.from_dlpack("test_tensor", to_dlpack(pytorch_tensor))
        self.assertEqual(
            str(e.exception),
            "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in C-Order are supported.",
        )

    def test_dlpack_cpu_numpy(self):
        pytorch_tensor = torch.rand([100], dtype=torch.float16, device="cpu") * 100
        pb_tensor = pb_utils.Tensor.from_dlpack("tensor", pytorch_tensor)
        self.assertTrue(np.array_equal(np.from_dlpack(pb_tensor), pytorch_tensor.numpy()))
        self.assertTrue(pb_tensor.is_cpu())
        self.assertEqual(pb_tensor.__dlpack_device__(), pytorch_tensor.__dlpack_device__())

    def test_bf16_round_trip(self):
        pytorch_tensor = torch.tensor([1.0, -2.5, 3.0], dtype=torch.bfloat16)
        pb_tensor = pb_utils.Tensor.from_dlpack("tensor", pytorch_tensor)
        self.assertEqual(pb_tensor.triton_dtype(), 14)
        self.assertTrue(torch.equal(from_dlpack(pb_tensor.to_dlpack()), pytorch_tensor))

    @unittest.skipUnless(CUDA, "no CUDA device")
    def test_dlpack_gpu_tensors(self):
        for pytorch_dtype in PYTORCH_DTYPES:
            pytorch_tensor = torch.ones([100], dtype=pytorch_dtype, device="cuda")
            pb_tensor = pb_utils.Tensor.from_dlpack("test_tensor", to_dlpack(pytorch_tensor))
            pytorch_tensor_dlpack = from_dlpack(pb_tensor.to_dlpack())
            self.assertTrue(torch.equal(pytorch_tensor_dlpack, pytorch_tensor))
            self.assertEqual(pytorch_tensor.type(), pytorch_tensor_dlpack.type())
            self.assertEqual(pytorch_tensor_dlpack.data_ptr(), pytorch_tensor.data_ptr())

            pb_tensor = pb_utils.Tensor.from_dlpack("test_tensor", pytorch_tensor)
            pytorch_tensor_dlpack = from_dlpack(pb_tensor)
            self.assertTrue(torch.equal(pytorch_tensor_dlpack, pytorch_tensor))
            self.assertEqual(pytorch_tensor.type(), pytorch_tensor_dlpack.type())

    @unittest.skipUnless(CUDA, "no CUDA device")
    def test_dlpack_gpu_numpy(self):
        pytorch_tensor = torch.rand([100], dtype=torch.float16, device="cuda") * 100
        pb_tensor = pb_utils.Tensor.from_dlpack("tensor", to_dlpack(pytorch_tensor))
        self.assertFalse(pb_tensor.is_cpu())
        self.assertEqual(pb_tensor.__dlpack_device__(), pytorch_tensor.__dlpack_device__())
        with self.assertRaises(Exception) as e:
            pb_tensor.as_numpy()
        self.assertEqual(str(e.exception), "Tensor is stored in GPU and cannot be converted to NumPy.")

    @unittest.skipUnless(CUDA, "no CUDA device")
    def test_cuda_multi_stream(self):
        size = 5000
        pytorch_tensor_1 = torch.tensor([0, 0, 0, 0], device="cuda")
        pytorch_tensor_2 = torch.tensor([0, 0, 0, 0], device="cuda")
        expected_output = torch.tensor([2, 2, 2, 2], device="cuda")
        s1 = torch.cuda.Stream()
        with torch.cuda.stream(s1):
            matrix_a = torch.randn(size, size, device="cuda")
            res = torch.matmul(matrix_a, matrix_a)
            for _ in range(1000):
                res = torch.matmul(res, matrix_a)
            pytorch_tensor_1 += torch.tensor([2, 2, 2, 2], device="cuda")
            pytorch_tensor_2 += torch.tensor([2, 2, 2, 2], device="cuda")
            # Inside the stream, as a model would: from_dlpack of the object waits for its work.
            pb_tensor_1 = pb_utils.Tensor.from_dlpack("tensor", pytorch_tensor_1)
        self.assertTrue(s1.query())
        pb_tensor_2 = pb_utils.Tensor.from_dlpack("tensor", to_dlpack(pytorch_tensor_2))
        self.assertTrue(torch.equal(from_dlpack(pb_tensor_1), expected_output))
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(from_dlpack(pb_tensor_2), expected_output))

    @unittest.skipUnless(CUDA, "no CUDA device")
    def test_gpu_outputs_are_copied_to_the_host(self):
        for pytorch_dtype in PYTORCH_DTYPES + [torch.bool, torch.bfloat16]:
            pytorch_tensor = (torch.arange(24, device="cuda") % 3).to(pytorch_dtype).reshape(2, 3, 4)
            pb_tensor = pb_utils.Tensor.from_dlpack("OUT", pytorch_tensor)
            host = pb_tensor._host()
            self.assertEqual(list(host.shape), [2, 3, 4])
            expected = pytorch_tensor.cpu()
            if pytorch_dtype == torch.bfloat16:
                expected = expected.view(torch.int16).numpy().view(np.uint16)
            else:
                expected = expected.numpy()
            self.assertTrue(np.array_equal(host, expected), str(pytorch_dtype))

    @unittest.skipUnless(CUDA and torch.cuda.device_count() > 1, "fewer than two CUDA devices")
    def test_second_gpu(self):
        pytorch_tensor = torch.arange(8, dtype=torch.float32, device="cuda:1")
        pb_tensor = pb_utils.Tensor.from_dlpack("OUT", pytorch_tensor)
        self.assertEqual(pb_tensor.__dlpack_device__(), (2, 1))
        self.assertTrue(np.array_equal(pb_tensor._host(), np.arange(8, dtype=np.float32)))
        self.assertEqual(from_dlpack(pb_tensor).device, torch.device("cuda:1"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
