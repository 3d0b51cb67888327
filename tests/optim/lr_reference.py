"""Reference learning rates for tests/optim/test_lr_scheduler.cpp.

usage: lr_reference.py CASES.json
CASES.json is a list of cases; for each, prints one line: the learning rate at epoch 0 and after
each of the case's steps, space-separated, as repr floats. Rates come from torch 1.13's
torch.optim.lr_scheduler (StepLR, MultiStepLR, CosineAnnealingLR, ReduceLROnPlateau) driving a
plain SGD, except where Paddle's semantics are not torch's: LinearWarmup (no torch equivalent) and
ReduceOnPlateau with cooldown (torch still tracks the best metric during cooldown, Paddle does not)
use transcriptions of paddle.optimizer.lr's formulas, written here from Paddle's documentation.
"""
import json
import math
import sys
import warnings

import torch

warnings.filterwarnings("ignore")  # torch warns that optimizer.step() was never called


def sgd(lr):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def lr_of(opt):
    return opt.param_groups[0]["lr"]


def torch_epochs(case):
    """A torch scheduler stepped case['steps'] times: [lr at epoch 0, 1, ..., steps]."""
    kind, lr = case["kind"], case["lr"]
    opt = sgd(lr)
    if kind == "step":
        s = torch.optim.lr_scheduler.StepLR(opt, step_size=case["step_size"], gamma=case["gamma"])
    elif kind == "multistep":
        s = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=case["milestones"], gamma=case["gamma"])
    elif kind == "cosine":
        s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=case["T_max"], eta_min=case["eta_min"])
    else:
        raise ValueError(kind)
    out = [lr_of(opt)]
    for _ in range(case["steps"]):
        opt.step()
        s.step()
        out.append(lr_of(opt))
    return out


def torch_plateau(case):
    opt = sgd(case["lr"])
    s = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode=case["mode"], factor=case["factor"], patience=case["patience"], threshold=case["threshold"],
        threshold_mode=case["threshold_mode"], cooldown=case["cooldown"], min_lr=case["min_lr"], eps=case["epsilon"])
    out = [lr_of(opt)]
    for m in case["metrics"]:
        opt.step()
        s.step(m)
        out.append(lr_of(opt))
    return out


def paddle_plateau(case):
    """paddle.optimizer.lr.ReduceOnPlateau.step, transcribed."""
    last_lr, best, bad, cooldown_counter = case["lr"], None, 0, 0
    mode, rel, threshold = case["mode"], case["threshold_mode"] == "rel", case["threshold"]

    def better(cur, best):
        if mode == "min":
            return cur < best - best * threshold if rel else cur < best - threshold
        return cur > best + best * threshold if rel else cur > best + threshold

    out = [last_lr]
    for m in case["metrics"]:
        if cooldown_counter > 0:
            cooldown_counter -= 1
        else:
            if best is None or better(m, best):
                best, bad = m, 0
            else:
                bad += 1
            if bad > case["patience"]:
                cooldown_counter, bad = case["cooldown"], 0
                new_lr = max(last_lr * case["factor"], case["min_lr"])
                if last_lr - new_lr > case["epsilon"]:
                    last_lr = new_lr
        out.append(last_lr)
    return out


def warmup(case):
    """paddle.optimizer.lr.LinearWarmup: linear from start_lr to end_lr over warmup_steps epochs,
    then the inner rate at epoch - warmup_steps (a number, or a torch schedule stepped that far)."""
    w, start, end, inner = case["warmup_steps"], case["start_lr"], case["end_lr"], case["inner"]
    after = None
    if isinstance(inner, dict):
        after = torch_epochs(dict(inner, steps=max(0, case["steps"] - w)))
    out = []
    for e in range(case["steps"] + 1):
        if e < w:
            out.append((end - start) * float(e) / float(w) + start)
        else:
            out.append(inner if after is None else after[e - w])
    return out


cases = json.load(open(sys.argv[1]))
for case in cases:
    kind = case["kind"]
    if kind == "plateau":
        lrs = torch_plateau(case) if case["reference"] == "torch" else paddle_plateau(case)
    elif kind == "warmup":
        lrs = warmup(case)
    else:
        lrs = torch_epochs(case)
    print(" ".join(repr(float(x)) for x in lrs))
