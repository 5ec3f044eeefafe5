#!/usr/bin/python3
# File: models/make_tiny_cnn.py — regenerates models/tiny_cnn, the small CNN
# that ships with kiln (ONNX test layout, PyTorch's output as expected data).
#
#   /usr/bin/python3 models/make_tiny_cnn.py      # needs python3-torch, python3-onnx
#
# Conv+BatchNorm+Relu, MaxPool, a residual Add, GlobalAveragePool, Flatten,
# Gemm, Softmax; input 1x3x32x32; seeded, so reruns give the same files.
import os

import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

SEED = 1234
OPSET = 13
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tiny_cnn")


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout))


class TinyCnn(nn.Module):
    """Stem, one residual block, a strided conv, classifier head."""

    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 8)
        self.pool = nn.MaxPool2d(2)
        self.block_a = conv_bn(8, 8)
        self.block_b = conv_bn(8, 8)
        self.down = conv_bn(8, 16, stride=2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.stem(x)))
        y = self.block_b(torch.relu(self.block_a(x)))
        x = torch.relu(x + y)
        x = torch.relu(self.down(x))
        x = torch.flatten(self.gap(x), 1)
        return torch.softmax(self.fc(x), dim=1)


def main():
    torch.manual_seed(SEED)
    model = TinyCnn()
    with torch.no_grad():
        # Non-trivial BatchNorm statistics, so BN is not an identity.
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0.0, 0.2)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
    model.eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        y = model(x)

    data = os.path.join(OUT, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    # PRESERVE (with the model in eval mode) keeps BatchNormalization nodes;
    # EVAL would fold them into the convolutions.
    torch.onnx.export(model, (x,), os.path.join(OUT, "model.onnx"),
                      opset_version=OPSET, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE,
                      input_names=["input"], output_names=["probs"])
    onnx.checker.check_model(onnx.load(os.path.join(OUT, "model.onnx")))
    for fname, name, t in (("input_0.pb", "input", x), ("output_0.pb", "probs", y)):
        proto = onnx.numpy_helper.from_array(t.numpy(), name)
        with open(os.path.join(data, fname), "wb") as f:
            f.write(proto.SerializeToString())
    print(f"wrote {OUT}: output {list(y.shape)}, argmax {int(y.argmax())}")


if __name__ == "__main__":
    main()
