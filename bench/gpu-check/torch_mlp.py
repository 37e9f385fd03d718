# The GPU check's PyTorch model (bench/gpu-check/torch-model.ts writes it into a repository as
# model.py): the check's ONNX MLP, relu(x @ w<l> + b<l>) for each layer as @batchwise/modelgen's
# mlp() builds it, with the same weights (w<l>.npy and b<l>.npy beside this file, exported from the
# ONNX model by the check), on cuda:<model_instance_device_id>. Tensors cross through Triton's DLPack
# API (pb_utils.Tensor.to_dlpack / from_dlpack / is_cpu); the requests of a batch run as one matmul
# chain. Nothing here is Batchwise's own: it runs as it is on Triton's Python backend.
import glob
import json
import os

import numpy as np
import torch
import triton_python_backend_utils as pb_utils
from torch.utils.dlpack import from_dlpack, to_dlpack


class TritonPythonModel:
    def initialize(self, args):
        if args["model_instance_kind"] != "GPU":
            raise pb_utils.TritonModelException(
                "this model runs on a GPU: give it a KIND_GPU instance_group, not " + args["model_instance_kind"]
            )
        if not torch.cuda.is_available():
            raise pb_utils.TritonModelException(
                "torch " + torch.__version__ + " sees no CUDA device (torch.cuda.is_available() is False)"
            )
        self.device = torch.device("cuda:" + args["model_instance_device_id"])
        # FP32 as ONNX Runtime's CPU run computes it: no TF32 in the matmuls.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        here = os.path.dirname(os.path.abspath(__file__))
        layers = len(glob.glob(os.path.join(here, "w*.npy")))
        if layers == 0:
            raise pb_utils.TritonModelException("no weights (w0.npy, b0.npy, ...) beside " + __file__)
        self.layers = []
        for layer in range(layers):
            w = np.load(os.path.join(here, "w%d.npy" % layer))
            b = np.load(os.path.join(here, "b%d.npy" % layer))
            self.layers.append((torch.from_numpy(w).to(self.device), torch.from_numpy(b).to(self.device)))
        config = json.loads(args["model_config"])
        self.output_name = config["output"][0]["name"]
        # How outputs leave the GPU: a DLPack capsule of the CUDA tensor (Triton's documented way), or,
        # when this backend cannot take one, the tensor itself (copied to the host by from_dlpack).
        self.output_path = None
        print(
            "torch_mlp: %d layers on %s (%s), torch %s, CUDA %s"
            % (layers, self.device, torch.cuda.get_device_name(self.device), torch.__version__, torch.version.cuda),
            flush=True,
        )

    def _output(self, y):
        if self.output_path == "tensor":
            return pb_utils.Tensor.from_dlpack(self.output_name, y)
        try:
            tensor = pb_utils.Tensor.from_dlpack(self.output_name, to_dlpack(y))
            if self.output_path is None:
                print("torch_mlp: outputs leave the GPU as DLPack capsules of CUDA tensors", flush=True)
            self.output_path = "capsule"
            return tensor
        except Exception as error:  # noqa: BLE001 - recorded, then the other documented form
            if self.output_path == "capsule":
                raise
            print(
                "torch_mlp: pb_utils.Tensor.from_dlpack refused a CUDA capsule (%s); passing the torch tensor instead" % error,
                flush=True,
            )
            self.output_path = "tensor"
            return pb_utils.Tensor.from_dlpack(self.output_name, y)

    def execute(self, requests):
        rows = []
        sizes = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            x = from_dlpack(tensor.to_dlpack())
            if tensor.is_cpu():
                x = x.to(self.device)
            rows.append(x)
            sizes.append(x.shape[0])
        with torch.inference_mode():
            x = rows[0] if len(rows) == 1 else torch.cat(rows)
            for w, b in self.layers:
                x = torch.relu(torch.addmm(b, x, w))
            return [
                pb_utils.InferenceResponse(output_tensors=[self._output(y.contiguous())]) for y in torch.split(x, sizes)
            ]

    def finalize(self):
        self.layers = []
