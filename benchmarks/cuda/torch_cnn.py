"""PyTorch's CUDA path for the course CNN, side by side with benchmarks/cuda/bench_train_gpu:
same model (Conv 1->20 5x5 pad 2, ReLU, MaxPool 2, Conv 20->20 5x5 pad 2, ReLU, MaxPool 2, Linear 980->10),
Adam(lr=1e-3), cross-entropy, batches 100 and 1024, synthetic data already on the GPU plus one
host-to-device copy per batch from pinned memory (as oar's BatchStager), 20 warm-up steps.
Run: python benchmarks/cuda/torch_cnn.py [steps=200]; prints one JSON line per batch size."""
import json
import sys
import time

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    if not torch.cuda.is_available():
        print("SKIPPED: torch.cuda.is_available() is False")
        sys.exit(77)
    dev = torch.device("cuda:0")
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 like oar's cuBLAS calls
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    for batch in (100, 1024):
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 20, 5, 1, 2), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
            torch.nn.Conv2d(20, 20, 5, 1, 2), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 2),
            torch.nn.Flatten(), torch.nn.Linear(980, 10)).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = torch.nn.CrossEntropyLoss()
        x_host = torch.rand(batch, 1, 28, 28).pin_memory()
        y_host = torch.randint(0, 10, (batch,)).pin_memory()

        def step():
            x = x_host.to(dev, non_blocking=True)
            y = y_host.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        for _ in range(20):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(json.dumps({"impl": "torch " + torch.__version__, "device": torch.cuda.get_device_name(0), "batch": batch,
                          "steps": steps, "seconds": round(dt, 4), "train_images_per_sec": round(batch * steps / dt)}))


if __name__ == "__main__":
    main()
