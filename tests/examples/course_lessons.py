"""The course's lesson programs (examples/course/) run for real and their output checked.

    course_lessons.py lesson1|lesson2|lesson4|lesson7 PROGRAM
    course_lessons.py lesson5_gpu PROGRAM BUILT_WITH_CUDA(0|1)
    course_lessons.py lesson1_mnist|...|lesson8_mnist PROGRAM SOURCE_DIR [MPIEXEC]

Each check writes a small generated mnist.json.gz in the course's layout (digit d a bright bar at
columns 2 + 2d and 3 + 2d over a faint pattern, values x / 127.5 - 1 as the course's file has
them), runs the program on it, and checks the lines the lesson prints: counts, shapes, that the
generator's epoch saw every sample, that losses fall, the SVG plots. lesson1_mnist and
lesson2_mnist run lessons 1 and 2 (its two small models) on the real MNIST in SOURCE_DIR/data/mnist
(exit 77, a skip, when it is not there), lesson3_mnist to lesson8_mnist lessons 3 to 8 on its first
images (lesson 6 under MPIEXEC -np 2): what each prints, and that it learns real digits (losses
fall, accuracy well above the 0.1 of chance). lesson7 runs lesson 7 on its generated digits, its
logs in a temporary folder. lesson5_gpu asks lesson 5 for gpu:0, gpu and gpu:4096.
Standard library only.
"""
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SKIP = 77


def fail(msg, out=""):
    sys.stdout.write(out)
    sys.stdout.write("\nFAILED: " + msg + "\n")
    sys.exit(1)


def toy_split(n, offset):
    images, labels = [], []
    for i in range(n):
        d = ((i + offset) * 7) % 10
        img = []
        for y in range(28):
            for x in range(28):
                v = 255 if x in (2 + 2 * d, 3 + 2 * d) else (x * y + i + offset) % 17
                img.append(v / 127.5 - 1)
        images.append(img)
        labels.append(d)
    return [images, labels]


def write_toy_json(path, n_train, n_valid, n_test):
    data = [toy_split(n_train, 0), toy_split(n_valid, 100000), toy_split(n_test, 200000)]
    with gzip.open(path, "wt") as f:
        json.dump(data, f)


def run(cmd, expect_status=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if p.returncode != expect_status:
        fail("%s exited with %d, expected %d" % (" ".join(cmd), p.returncode, expect_status), p.stdout)
    sys.stdout.write(p.stdout)
    return p.stdout


def need(pattern, out, what):
    m = re.search(pattern, out, re.M)
    if not m:
        fail("no line for %s: %s" % (what, pattern), out)
    return m


def check_lesson1(out, counts, batch):
    n_train, n_valid, n_test = counts
    need(r"^mnist dataset load done$", out, "load done")
    need(r"^number of training samples: %d$" % n_train, out, "train count")
    need(r"^number of validation samples: %d$" % n_valid, out, "valid count")
    need(r"^number of test samples: %d$" % n_test, out, "test count")
    for name, n in (("train", n_train), ("valid", n_valid), ("eval", n_test)):
        m = need(r"^checked %s: (\d+) images, (\d+) labels, each \[1, 28, 28\], values in \[(-?[\d.]+), (-?[\d.]+)\], "
                 r"labels per class 0-9:((?: \d+){10})$" % name, out, "check of " + name)
        if int(m.group(1)) != n or int(m.group(2)) != n:
            fail("%s: %s images and %s labels, expected %d" % (name, m.group(1), m.group(2), n), out)
        if float(m.group(3)) != -1.0 or float(m.group(4)) != 1.0:
            fail("%s: values in [%s, %s], expected [-1, 1]" % (name, m.group(3), m.group(4)), out)
        if sum(int(c) for c in m.group(5).split()) != n:
            fail("%s: labels per class do not add up to %d" % (name, n), out)
    need(r"^load_data\('predict'\): .*mode 'predict' is not train, valid, eval or test$", out, "bad mode")
    m = need(r"^shuffled index_list begins:((?: \d+){8}) \.\.\.$", out, "shuffled indices")
    first = [int(v) for v in m.group(1).split()]
    if first == list(range(8)) or len(set(first)) != 8 or max(first) >= n_train:
        fail("index_list does not look shuffled: %s" % first, out)
    need(r"^first batch: image shape \[%d, 1, 28, 28\], label shape \[%d\]" % (batch, batch), out, "first batch")
    full, rest = divmod(n_train, batch)
    need(r"^one epoch: %d batches \(the last of %d\), %d images; labels per class and checksum of the values equal "
         r"the train split's: yes$" % (full + (rest > 0), rest or batch, n_train), out, "the generator's epoch")
    samples = re.findall(r"^sample (\d): image \[784\], values ([\d.]+) ([\d.]+) ([\d.]+) \.\.\., label (\d)$", out, re.M)
    if [int(s[0]) for s in samples] != list(range(10)):
        fail("RandomDataset(10) did not print samples 0..9", out)
    if not all(0 <= float(v) < 1 for s in samples for v in s[1:4]) or len({s[1] for s in samples}) < 9:
        fail("RandomDataset values are not distinct draws in [0, 1)", out)
    batches = re.findall(r"^batch_id: (\d+), image shape: \[3, 784\], label shape: \[3\]$", out, re.M)
    if batches != ["0", "1", "2"]:  # 10 samples in batches of 3, drop_last
        fail("DataLoader: expected batches 0, 1, 2 of [3, 784], got %s" % batches, out)


def lesson1(program, tmp):
    data = os.path.join(tmp, "mnist.json.gz")
    write_toy_json(data, 250, 40, 30)
    check_lesson1(run([program, "--data", data, "--batch-size", "100"]), (250, 40, 30), 100)
    # A file whose train split has one label too many: the reader's check names the file and the split.
    bad = os.path.join(tmp, "bad.json.gz")
    d = [toy_split(20, 0), toy_split(5, 1), toy_split(5, 2)]
    d[0][1].append(3)
    with gzip.open(bad, "wt") as f:
        json.dump(d, f)
    out = run([program, "--data", bad], expect_status=2)
    need(r"^course_lesson1_data: .*bad\.json\.gz.*train", out, "the reader's message for a bad file")
    run([program, "--data", os.path.join(tmp, "missing.json.gz")], expect_status=2)


def lesson1_mnist(program, source_dir):
    folder = os.path.join(source_dir, "data", "mnist")
    if not os.path.isfile(os.path.join(folder, "train-images-idx3-ubyte.gz")):
        print("skip: no MNIST in " + folder)
        sys.exit(SKIP)
    out = run([program, "--data", folder])
    check_lesson1(out, (50000, 10000, 10000), 100)
    # MNIST's own class counts (train = the first 50,000 of its 60,000 training images).
    need(r"^checked eval: .* 980 1135 1032 1010 982 892 958 1028 974 1009$", out, "the t10k class counts")


def svg_curves(path):
    """The names of the curves in one of oar's SVG plots (its legend texts), after checking it parses."""
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    if root.tag != ns + "svg":
        fail("%s is not an SVG document" % path)
    return [t.text for t in root.iter(ns + "text")], list(root.iter(ns + "polyline")) + list(root.iter(ns + "path"))


def check_model(out, name, params, last_epoch, fall=0.8):
    need(r"^== %s: %d parameters$" % (name, params), out, name + "'s header")
    m = need(r"^%s: mean loss epoch 0 ([\d.]+), epoch %d ([\d.]+); valid: mean square error ([\d.]+), rounded "
             r"prediction right ([\d.]+)$" % (name, last_epoch), out, name + "'s result")
    first, last, valid_mse = float(m.group(1)), float(m.group(2)), float(m.group(3))
    if not last < fall * first:
        fail("%s: the loss did not fall (%g then %g)" % (name, first, last), out)
    # The labels' variance is 8.25: a model that learned nothing does no better than predicting their mean.
    if not valid_mse < 6.0:
        fail("%s: validation mean square error %g is hardly better than predicting the mean" % (name, valid_mse), out)


def lesson2(program, tmp):
    data = os.path.join(tmp, "mnist.json.gz")
    write_toy_json(data, 400, 100, 10)
    plot = os.path.join(tmp, "sigmoid.svg")
    # The course's SGD at 0.001 moves the sigmoid MLP slowly: 1,000 small batches for the two cheap
    # models, 12 batches of 100 for the CNN.
    out = run([program, "--data", data, "--models", "linear,mlp", "--epochs", "25", "--batch-size", "10",
               "--log-every", "20", "--plot", plot])
    m = need(r"^sigmoid at 80 points x = -8, -7\.8, \.\.\., 7\.8: sigmoid\(-8\) = ([\d.]+), sigmoid\(0\) = ([\d.]+), "
             r"sigmoid\(7\.8\) = ([\d.]+); plotted to ", out, "the sigmoid line")
    for got, want in zip(m.groups(), (0.000335, 0.5, 0.999590)):
        if abs(float(got) - want) > 2e-6:
            fail("sigmoid value %s, expected %.6f" % (got, want), out)
    texts, lines = svg_curves(plot)
    if "sigmoid(x)" not in texts or not lines:
        fail("sigmoid.svg has no sigmoid(x) curve", out)
    need(r"^training on 400 images, 25 epochs, batches of 10, SGD learning rate 0\.001, square error$", out, "settings")
    check_model(out, "linear regression", 785, 24)
    check_model(out, "sigmoid MLP", 7971, 24)
    if "== CNN" in out:
        fail("--models linear,mlp trained the CNN too", out)
    lines = re.findall(r"^epoch: (\d+), batch: (\d+), loss is: ([\d.]+)$", out, re.M)
    if len(lines) != 2 * 25 * 2:  # 2 models, 25 epochs, batches 0 and 20 of 40
        fail("expected 100 loss lines, got %d" % len(lines), out)

    out = run([program, "--data", data, "--models", "cnn", "--epochs", "3", "--log-every", "2", "--plot", plot])
    check_model(out, "CNN", 11521, 2)
    if "== linear" in out or "== sigmoid" in out:
        fail("--models cnn trained other models too", out)
    run([program, "--models", "rnn"], expect_status=2)


def lesson2_mnist(program, source_dir, tmp):
    folder = os.path.join(source_dir, "data", "mnist")
    if not os.path.isfile(os.path.join(folder, "train-images-idx3-ubyte.gz")):
        print("skip: no MNIST in " + folder)
        sys.exit(SKIP)
    # The two cheap models on the first 5,000 real training images, 2,000 batches of 10; the
    # validation error is over MNIST's 10,000 validation images.
    out = run([program, "--data", folder, "--models", "linear,mlp", "--epochs", "4", "--train-size", "5000",
               "--batch-size", "10", "--log-every", "250", "--plot", os.path.join(tmp, "sigmoid.svg")])
    need(r"^training on 5000 images, 4 epochs, batches of 10, SGD learning rate 0\.001, square error$", out, "settings")
    check_model(out, "linear regression", 785, 3, fall=0.9)
    check_model(out, "sigmoid MLP", 7971, 3)
    # The CNN on the first 2,000 real images, 4 epochs of 20 batches of 100.
    out = run([program, "--data", folder, "--models", "cnn", "--epochs", "4", "--train-size", "2000",
               "--log-every", "10", "--plot", os.path.join(tmp, "sigmoid.svg")])
    need(r"^training on 2000 images, 4 epochs, batches of 100, SGD learning rate 0\.001, square error$", out,
         "the CNN's settings")
    check_model(out, "CNN", 11521, 3)


def lesson4(program, tmp):
    data = os.path.join(tmp, "mnist.json.gz")
    write_toy_json(data, 600, 200, 10)
    plot = os.path.join(tmp, "optimizers.svg")
    out = run([program, "--data", data, "--log-every", "2", "--plot", plot])
    need(r"^training on 600 images, 2 epochs, batches of 100, learning rate 0\.01", out, "the settings line")
    names = ["SGD", "Momentum", "Adagrad", "Adam"]
    for name in names:
        m = need(r"^%s: mean loss epoch 0 ([\d.]+), epoch 1 ([\d.]+); valid accuracy ([\d.]+)$" % name, out,
                 name + "'s result")
        first, last, acc = (float(g) for g in m.groups())
        if not last < first:
            fail("%s: the loss did not fall (%g then %g)" % (name, first, last), out)
        if not acc > 0.5:  # ten classes: chance is 0.1
            fail("%s: validation accuracy %g" % (name, acc), out)
    # The same initial weights and the same first batch: every optimizer's first loss is the same.
    firsts = re.findall(r"^== \w+\nepoch: 0, batch: 0, loss is: ([\d.]+)$", out, re.M)
    if len(firsts) != 4 or len(set(firsts)) != 1:
        fail("the four runs do not start from the same loss: %s" % firsts, out)
    texts, lines = svg_curves(plot)
    if not all(n in texts for n in names) or len(lines) < 4:
        fail("optimizers.svg lacks a curve of each optimizer (texts: %s)" % texts, out)
    need(r"^loss curves of the four optimizers \(12 batches each\): %s$" % re.escape(plot), out, "the plot line")


def mnist_folder(source_dir):
    folder = os.path.join(source_dir, "data", "mnist")
    if not os.path.isfile(os.path.join(folder, "train-images-idx3-ubyte.gz")):
        print("skip: no MNIST in " + folder)
        sys.exit(SKIP)
    return folder


def course_losses(out, section):
    """The losses of the course's lines (`epoch: E, batch: B, loss is: L...`) under `== section`, by epoch."""
    m = need(r"^== %s\n((?:epoch: .*\n?)+)" % re.escape(section), out, "the lines of " + section)
    by_epoch = {}
    for e, loss in re.findall(r"^epoch: (\d+), batch(?:_id)?: \d+, loss is: ([\d.]+)", m.group(1), re.M):
        by_epoch.setdefault(int(e), []).append(float(loss))
    return [by_epoch[e] for e in sorted(by_epoch)]


def mean(v):
    return sum(v) / len(v)


def lesson3_mnist(program, source_dir):
    # The first 1,000 real training images, 2 epochs of 10 batches: the fluid form follows the fused
    # loss, every model learns.
    out = run([program, "--data", mnist_folder(source_dir)])
    need(r"^data: 1000 real MNIST training images, batches of 100, 2 epochs$", out, "the data line")
    for section, fall in (("MSE on the digit as a number (one output)", 0.6),
                          ("softmax + cross-entropy (ten logits)", 0.7),
                          ("Softmax layer, then cross-entropy on probabilities (fluid form)", 0.7)):
        first, last = course_losses(out, section)[0], course_losses(out, section)[-1]
        if not mean(last) < fall * mean(first):
            fail("%s: the mean loss of the printed lines did not fall below %g of epoch 0's (%g then %g)"
                 % (section, fall, mean(first), mean(last)), out)
    m = need(r"^fused and fluid forms over 20 steps: largest relative loss difference ([\d.e+-]+); last batch "
             r"accuracy ([\d.]+)$", out, "the comparison line")
    # On real digits the two forms' float roundings part over 20 steps by ~1e-4 of the loss; the
    # forms themselves differ by the whole loss.
    if not float(m.group(1)) < 1e-3:
        fail("the fused and fluid forms differ by %s of the loss" % m.group(1), out)
    if not float(m.group(2)) >= 0.4:
        fail("last batch accuracy %s after 20 SGD steps on real digits (chance is 0.1)" % m.group(2), out)


def lesson4_mnist(program, source_dir, tmp):
    # The first 3,000 real training images, 2 epochs (60 steps) each; validation on MNIST's 10,000.
    plot = os.path.join(tmp, "optimizers.svg")
    out = run([program, "--data", mnist_folder(source_dir), "--train-size", "3000", "--log-every", "10",
               "--plot", plot])
    need(r"^training on 3000 images, 2 epochs, batches of 100, learning rate 0\.01", out, "the settings line")
    for name in ["SGD", "Momentum", "Adagrad", "Adam"]:
        m = need(r"^%s: mean loss epoch 0 ([\d.]+), epoch 1 ([\d.]+); valid accuracy ([\d.]+)$" % name, out,
                 name + "'s result")
        first, last, acc = (float(g) for g in m.groups())
        if not last < 0.7 * first:
            fail("%s: the loss did not fall (%g then %g)" % (name, first, last), out)
        if not acc > 0.7:
            fail("%s: validation accuracy %g on real digits (chance is 0.1)" % (name, acc), out)
    texts, lines = svg_curves(plot)
    if len(lines) < 4:
        fail("optimizers.svg lacks the four curves", out)


def lesson5_mnist(program, source_dir):
    # The course's recipe on the CPU, 2,000 real training images, 4 epochs; the test on 200 test images.
    out = run([program, "cpu", "4", "--data", mnist_folder(source_dir)])
    need(r"^device: cpu$", out, "the device line")
    m = need(r"^result: dataset=mnist model=cnn epochs=4 test_accuracy=([\d.]+) ", out, "the result line")
    if not float(m.group(1)) >= 0.8:
        fail("test accuracy %s on real digits" % m.group(1), out)
    losses = [float(v) for v in re.findall(r"^epoch: \d+, batch: \d+, loss is: ([\d.]+)", out, re.M)]
    if len(losses) < 4 or not mean(losses[-3:]) < 0.5 * mean(losses[:3]):
        fail("the loss did not fall: %s" % losses, out)


def lesson5_gpu(program, built_with_cuda):
    """set_device("gpu:N"): in a CUDA build the nvcc-compiled run trains on a GPU that is there and
    refuses one that is not, naming the reason, before reading data; without CUDA every GPU is refused."""
    for device in ("gpu:0", "gpu", "gpu:4096"):
        p = subprocess.run([program, device, "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600)
        out = p.stdout
        sys.stdout.write("$ %s %s 2\n%s" % (os.path.basename(program), device, out))
        if built_with_cuda and p.returncode == 0 and device != "gpu:4096":  # a machine with a GPU
            need(r"^device: gpu:0 \(.+\)$", out, "the device line")
            m = need(r"^result: dataset=generated model=cnn epochs=2 test_accuracy=([\d.]+) ", out, "the result line")
            if not float(m.group(1)) >= 0.9:
                fail("test accuracy %s on the GPU" % m.group(1), out)
            continue
        if p.returncode != 2:
            fail("%s: exit status %d, expected 2 (a refusal)" % (device, p.returncode), out)
        if built_with_cuda:
            index = "4096" if device == "gpu:4096" else "0"
            need(r"^course_lesson5_device: oar: no CUDA device(: cudaGetDeviceCount| gpu:%s \(this machine has)" % index,
                 out, "the refusal")
        else:
            need(r"^course_lesson5_device: oar: device '%s': this program was built without CUDA \(no nvcc, or "
                 r"OAR_BUILD_CUDA=OFF\); use cpu$" % re.escape(device), out, "the refusal")
        for line in ("device:", "epoch:", "result:"):
            if re.search("^" + line, out, re.M):
                fail("%s was refused, yet the program printed a '%s' line" % (device, line), out)


def lesson6_mnist(program, source_dir, mpiexec):
    # Two processes under mpirun on the first 4,096 real training images (2 epochs of 64 steps);
    # validation on 256.
    out = run([mpiexec, "--allow-run-as-root", "--oversubscribe", "-np", "2", program, "--data",
               mnist_folder(source_dir)])
    need(r"^2 process\(es\), 32 images per process per step, 4096 mnist images$", out, "the settings line")
    m = need(r"^result: processes=2 weights identical on every rank; validation accuracy ([\d.]+)$", out,
             "the result line")
    if not float(m.group(1)) >= 0.8:
        fail("validation accuracy %s on real digits" % m.group(1), out)
    losses = [float(v) for v in re.findall(r"^epoch: \d+, batch_id: \d+, loss is: ([\d.]+)", out, re.M)]
    if len(losses) < 4 or not mean(losses[-2:]) < 0.5 * mean(losses[:2]):
        fail("the loss did not fall: %s" % losses, out)


def check_lesson7(out, min_accuracy):
    m = need(r"^result: L2 on every parameter shrinks every layer: yes; on the last Linear only it shrinks that "
             r"layer, not the convolutions: yes; lowest validation accuracy ([\d.]+)$", out, "the result line")
    if not float(m.group(1)) >= min_accuracy:
        fail("lowest validation accuracy %s" % m.group(1), out)
    for tag in ("none", "all", "fc_only"):
        m = need(r"^\[validation\] epoch 0: loss ([\d.]+).*\n(?:.*\n)*?\[validation\] epoch 2: loss ([\d.]+)",
                 out.split("== ")[1 + ("none", "all", "fc_only").index(tag)], tag + "'s validation lines")
        if not float(m.group(2)) < float(m.group(1)):
            fail("%s: the validation loss did not fall (%s then %s)" % (tag, m.group(1), m.group(2)), out)


def lesson7_files(dir, out):
    """The curves and one VisualDL file per run, in `dir`."""
    svg_curves(os.path.join(dir, "curves.svg"))
    for tag in ("none", "all", "fc_only"):
        files = os.listdir(os.path.join(dir, tag))
        if len(files) != 1:
            fail("%s/%s holds %s, expected one VisualDL file" % (dir, tag, files), out)


def lesson7(program, tmp):
    out = run([program, tmp])
    need(r"^data: 600 generated training images, 200 for validation$", out, "the data line")
    check_lesson7(out, 0.9)
    lesson7_files(tmp, out)


def lesson7_mnist(program, source_dir, tmp):
    # 3 epochs on the first 2,000 real training images, validation on 200, three runs from the same weights.
    out = run([program, tmp, "--data", mnist_folder(source_dir)])
    need(r"^data: 2000 mnist training images, 200 for validation$", out, "the data line")
    check_lesson7(out, 0.75)
    lesson7_files(tmp, out)


def lesson8_mnist(program, source_dir, tmp):
    # 4 epochs on the first 2,000 real training images, tested on 200 test images.
    out = run([program, tmp, "--data", mnist_folder(source_dir)])
    need(r"^== training 4 epochs on 2000 mnist images, a checkpoint after each$", out, "the header")
    m = need(r"^result: loaded model scores as the trained one \(test accuracy ([\d.]+)\); resumed run against the "
             r"uninterrupted one after epoch 4: weights bitwise equal, optimizer state bitwise equal$", out,
             "the result line")
    if not float(m.group(1)) >= 0.8:
        fail("test accuracy %s on real digits" % m.group(1), out)
    if not os.path.isfile(os.path.join(tmp, "mnist.safetensors")):
        fail("no mnist.safetensors in " + tmp, out)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    which, program = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        if which == "lesson1":
            lesson1(program, tmp)
        elif which == "lesson1_mnist":
            lesson1_mnist(program, sys.argv[3])
        elif which == "lesson2_mnist":
            lesson2_mnist(program, sys.argv[3], tmp)
        elif which == "lesson2":
            lesson2(program, tmp)
        elif which == "lesson4":
            lesson4(program, tmp)
        elif which == "lesson7":
            lesson7(program, tmp)
        elif which == "lesson3_mnist":
            lesson3_mnist(program, sys.argv[3])
        elif which == "lesson4_mnist":
            lesson4_mnist(program, sys.argv[3], tmp)
        elif which == "lesson5_mnist":
            lesson5_mnist(program, sys.argv[3])
        elif which == "lesson5_gpu":
            lesson5_gpu(program, sys.argv[3] == "1")
        elif which == "lesson6_mnist":
            lesson6_mnist(program, sys.argv[3], sys.argv[4])
        elif which == "lesson7_mnist":
            lesson7_mnist(program, sys.argv[3], tmp)
        elif which == "lesson8_mnist":
            lesson8_mnist(program, sys.argv[3], tmp)
        else:
            print(__doc__)
            return 2
    print("passed: " + which)
    return 0


if __name__ == "__main__":
    sys.exit(main())
