"""Runs an ONNX model in onnxruntime, for tests/io/test_onnx.cpp to compare with oar's outputs.

  run_onnx.py MODEL IN.bin OUT.bin [IN.bin OUT.bin ...]

Checks the model with onnx.checker (full check, with shape inference), then for each pair reads
IN.bin (float32, the batch of samples of the model's input shape, the batch size from the file's
size), runs the model's only input through onnxruntime's CPU provider and writes the output as
float32 to OUT.bin. Prints "onnx-ok opset <version> batches <b1,b2,...>".
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort

model_path = sys.argv[1]
model = onnx.load(model_path)
onnx.checker.check_model(model, full_check=True)
opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0]
sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
(inp,) = sess.get_inputs()
sample = [d for d in inp.shape[1:]]
assert all(isinstance(d, int) for d in sample), inp.shape
assert not isinstance(inp.shape[0], int), "the batch dimension is not symbolic: %r" % (inp.shape,)
batches = []
for i in range(2, len(sys.argv), 2):
    x = np.fromfile(sys.argv[i], dtype=np.float32)
    n = x.size // int(np.prod(sample))
    (y,) = sess.run(None, {inp.name: x.reshape([n] + sample)})
    assert y.shape[0] == n, y.shape
    y.astype(np.float32).tofile(sys.argv[i + 1])
    batches.append(str(n))
print("onnx-ok opset", opset, "batches", ",".join(batches))
